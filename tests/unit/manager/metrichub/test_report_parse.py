"""The hub's report parse (manager.metrichub.ingest.parse_report) accepts exactly what protobuf
accepts and reads the same node name, on random reports and on random corruptions of them."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from manager.metrichub.ingest import parse_report
from proto.koord.v1 import metrichub_pb2 as pb

_text = st.text(max_size=12)
_rmaps = st.dictionaries(_text, _text, max_size=4)


@st.composite
def reports(draw: st.DrawFn) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=draw(_text))
    if draw(st.booleans()):
        r.status.update_time.FromNanoseconds(draw(st.integers(0, 2**40)))
    nm = r.status.node_metric
    nm.node_usage.resources.update(draw(_rmaps))
    if draw(st.booleans()):
        nm.node_usage.devices_json = draw(_text)
    for _ in range(draw(st.integers(0, 2))):
        agg = nm.aggregated_node_usages.add()
        agg.duration.FromSeconds(draw(st.integers(0, 3600)))
        for kind in draw(st.lists(_text, max_size=3)):
            agg.usage[kind].resources.update(draw(_rmaps))
    for _ in range(draw(st.integers(0, 3))):
        p = r.status.pods_metric.add(name=draw(_text), namespace=draw(_text), qos=draw(_text))
        p.pod_usage.resources.update(draw(_rmaps))
        if draw(st.booleans()):
            p.extensions_json = draw(_text)
    if draw(st.booleans()):
        r.collect_policy.report_interval_seconds = draw(st.integers(-(2**40), 2**40))
    return r


def _protobuf_accepts(data: bytes) -> bool:
    try:
        pb.NodeMetricReport.FromString(data)
    except DecodeError:
        return False
    return True


@settings(max_examples=300, deadline=None)
@given(reports())
def test_a_valid_report_is_accepted_with_its_node_name(report: pb.NodeMetricReport) -> None:
    data = report.SerializeToString()
    got = parse_report(data)
    assert got.node_name == pb.NodeMetricReport.FromString(data).node_name == report.node_name


@settings(max_examples=500, deadline=None)
@given(reports(), st.data())
def test_the_check_agrees_with_protobuf_on_corrupted_bytes(
    report: pb.NodeMetricReport, data: st.DataObject
) -> None:
    raw = bytearray(report.SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):
        if not raw:
            break
        i = data.draw(st.integers(0, len(raw) - 1))
        op = data.draw(st.sampled_from(("flip", "cut", "insert")))
        if op == "flip":
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[i:]
        else:
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=4))
    corrupted = bytes(raw)
    if _protobuf_accepts(corrupted):
        assert parse_report(corrupted).node_name == pb.NodeMetricReport.FromString(corrupted).node_name
    else:
        with pytest.raises(DecodeError):
            parse_report(corrupted)


def test_bad_utf8_and_truncation_are_refused() -> None:
    with pytest.raises(DecodeError):
        parse_report(b"\x0a\x02\xff\xfe")  # node_name is not UTF-8
    pod_name_bad = pb.NodeMetricReport(node_name="n")
    pod_name_bad.status.pods_metric.add(name="p")
    data = pod_name_bad.SerializeToString().replace(b"\x0a\x01p", b"\x0a\x01\xff")
    with pytest.raises(DecodeError):
        parse_report(data)  # deep inside the status
    with pytest.raises(DecodeError):
        parse_report(pb.NodeMetricReport(node_name="node-a").SerializeToString()[:-1])


def test_merged_status_chunks_are_one_status() -> None:
    # Protobuf merges a repeated embedded message (the hub then keeps the bytes exactly as sent).
    a = pb.NodeMetricReport(node_name="n")
    a.status.pods_metric.add(name="p")
    b = pb.NodeMetricReport()
    b.status.update_time.FromSeconds(7)
    merged = parse_report(a.SerializeToString() + b.SerializeToString())
    assert merged.node_name == "n"
    assert merged.status.update_time.seconds == 7 and merged.status.pods_metric[0].name == "p"
