"""Oracle for apis.reportcheck: the report check as it was before the hub's screen, stated the plain way —
the three limits, then the whole report decoded by apis.convert (which raises NodeMetricError naming the
first field it cannot decode). The production check must refuse exactly what this refuses, with the
same error, and accept the rest (tests/unit/apis/test_reportcheck_oracle.py compares the two).
"""

from __future__ import annotations

from apis.convert import nodemetric_from_report
from apis.nodemetric import NodeMetric
from apis.reportlimits import MAX_REPORT_BYTES, TOO_LARGE, ReportError, check_node_name, check_update_time
from proto.koord.v1 import metrichub_pb2 as pb


def check_report(msg: pb.NodeMetricReport, received_ns: int, size: int | None = None) -> NodeMetric:
    """The report as a NodeMetric; NodeMetricError unless it passes every limit and decodes in full."""
    length = msg.ByteSize() if size is None else size
    if length > MAX_REPORT_BYTES:
        raise ReportError(TOO_LARGE, "", f"report of {length} bytes (at most {MAX_REPORT_BYTES})", length)
    check_node_name(msg.node_name)
    if msg.status.HasField("update_time"):
        ts = msg.status.update_time
        check_update_time(ts.seconds * 1_000_000_000 + ts.nanos, received_ns)
    return nodemetric_from_report(msg)
