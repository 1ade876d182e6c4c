"""The one check of a NodeMetricReport, applied by the MetricHub when a report arrives (it refuses a
report that fails) and by every consumer when it decodes one (it skips that node): both call
`check_report`, so the hub never stores what a consumer would refuse
(docs/rules/manager.md#metrichub-limits).

A report passes when it is at most MAX_REPORT_BYTES long, names its node with a DNS-1123 subdomain,
carries an update time at most MAX_FUTURE_SKEW_SECONDS after the time the hub received it, and decodes
in full (apis.convert: quantities, enums, JSON text within its size and depth limits). The time rule is
stated against the hub's receive time, which travels with every item (`received_time`), so a consumer
applies it exactly as the hub did, whatever its own clock says.
Imports: apis (convert, nodemetric, reportlimits), proto.koord.v1 (protobuf only). Pure, no I/O.
"""

from __future__ import annotations

from apis.convert import nodemetric_from_report
from apis.nodemetric import NodeMetric, NodeMetricError
from apis.reportlimits import (
    MAX_REPORT_BYTES,
    TOO_LARGE,
    ReportError,
    check_node_name,
    check_update_time,
    reason_of,
)
from proto.koord.v1 import metrichub_pb2 as pb

__all__ = ["NodeMetricError", "ReportError", "check_report", "checked_item", "reason_of"]


def check_report(msg: pb.NodeMetricReport, received_ns: int, size: int | None = None) -> NodeMetric:
    """The report as a NodeMetric; NodeMetricError unless it passes (`reason_of(e)` names the rule:
    a ReportError's reason, or INVALID_FIELD for a field apis.convert cannot decode). `size` is its
    length on the wire when known (else computed); `received_ns` the hub's receive time in
    nanoseconds since the epoch."""
    length = msg.ByteSize() if size is None else size
    if length > MAX_REPORT_BYTES:
        raise ReportError(TOO_LARGE, "", f"report of {length} bytes (at most {MAX_REPORT_BYTES})", length)
    check_node_name(msg.node_name)
    if msg.status.HasField("update_time"):
        # Plain arithmetic, not Timestamp.ToNanoseconds(), which raises ValueError outside Timestamp's
        # range: such a time is refused below as a field apis.convert cannot decode.
        ts = msg.status.update_time
        check_update_time(ts.seconds * 1_000_000_000 + ts.nanos, received_ns)
    return nodemetric_from_report(msg)


def checked_item(item: pb.NodeMetricItem) -> NodeMetric:
    """A consumer's check of one hub item: check_report against the item's own receive time."""
    return check_report(item.report, item.received_time.ToNanoseconds())
