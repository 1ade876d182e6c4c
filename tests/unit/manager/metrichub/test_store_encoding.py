"""HubStore's shared event bytes: built around the report's wire bytes by the Raw* forwarding
messages, equal to what protobuf's own messages serialise to."""

from __future__ import annotations

from manager.metrichub.store import HubStore, encode_batches, encoded_events
from proto.koord.v1 import metrichub_pb2 as pb


def _report(node: str, cpu: str) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.node_metric.node_usage.resources["cpu"] = cpu
    r.status.pods_metric.add(name="p", namespace="ns", qos="BE")
    return r


def _item(revision: int, report: pb.NodeMetricReport, received_ns: int) -> pb.NodeMetricItem:
    item = pb.NodeMetricItem(revision=revision, report=report)
    item.received_time.FromNanoseconds(received_ns)
    return item


def _events(data: list[bytes]) -> list[pb.NodeMetricEvent]:
    return [pb.NodeMetricEvent.FromString(b) for b in data]


def test_encoded_events_equal_protobufs_own_messages() -> None:
    s = HubStore()
    a, b, a2 = _report("a", "1"), _report("b", "2"), _report("a", "3")
    s.put(a, now=1.5)
    s.put(b, now=2.0)
    s.put(a2, now=3.25)
    s.delete("a")
    tail, cursor = s.tail(0)
    assert cursor == 4
    want = [
        pb.NodeMetricEvent(type=pb.EVENT_TYPE_ADDED, revision=1, item=_item(1, a, 1_500_000_000)),
        pb.NodeMetricEvent(type=pb.EVENT_TYPE_ADDED, revision=2, item=_item(2, b, 2_000_000_000)),
        pb.NodeMetricEvent(type=pb.EVENT_TYPE_MODIFIED, revision=3, item=_item(3, a2, 3_250_000_000)),
        pb.NodeMetricEvent(type=pb.EVENT_TYPE_DELETED, revision=4, item=_item(3, a2, 3_250_000_000)),
    ]
    assert encoded_events(tail) == [m.SerializeToString() for m in want]
    assert [node for node, _ in tail] == ["a", "b", "a", "a"]
    replay, at = s.start(0)
    assert at == 4
    assert _events(encoded_events(replay)) == [
        pb.NodeMetricEvent(type=pb.EVENT_TYPE_ADDED, revision=2, item=_item(2, b, 2_000_000_000))
    ]


def test_the_report_bytes_are_forwarded_as_sent() -> None:
    # Two chunks of one status: protobuf merges them on parse; the hub forwards them untouched.
    a = pb.NodeMetricReport(node_name="n")
    a.status.pods_metric.add(name="p")
    stamp = pb.NodeMetricReport()
    stamp.status.update_time.FromSeconds(7)
    raw = a.SerializeToString() + stamp.SerializeToString()
    s = HubStore()
    s.put_raw("n", raw, now=1.0)
    [(_, event)], _ = s.tail(0)
    assert pb.RawNodeMetricItem.FromString(pb.RawNodeMetricEvent.FromString(event).item).report == raw
    report = s.list().items[0].report
    assert report.status.update_time.seconds == 7 and report.status.pods_metric[0].name == "p"


def test_the_hub_keeps_its_own_copy_of_a_message() -> None:
    s = HubStore()
    r = _report("a", "1")
    s.put(r)
    r.status.node_metric.node_usage.resources["cpu"] = "changed"
    assert s.list().items[0].report.status.node_metric.node_usage.resources["cpu"] == "1"


def test_batches_hold_the_events_in_order_and_split_at_the_size_limit() -> None:
    s = HubStore()
    for i in range(20):
        s.put(_report(f"n{i % 3}", str(i)), now=1.0 + i)
    s.delete("n1")
    changes, cursor = s.start(0)
    assert cursor == 21
    tail, _ = s.tail(0)
    singles = _events(encoded_events(tail))
    whole = list(encode_batches(tail))
    assert len(whole) == 1
    assert list(pb.NodeMetricEventBatch.FromString(whole[0]).events) == singles
    split = list(encode_batches(tail, max_bytes=200))
    assert len(split) > 1 and all(
        len(b) <= 200 or len(pb.NodeMetricEventBatch.FromString(b).events) == 1 for b in split
    )
    assert [e for b in split for e in pb.NodeMetricEventBatch.FromString(b).events] == singles
    replay = pb.NodeMetricEventBatch.FromString(next(encode_batches(changes))).events
    assert [(e.type, e.revision, e.item.report.node_name) for e in replay] == [
        (pb.EVENT_TYPE_ADDED, 19, "n0"),
        (pb.EVENT_TYPE_ADDED, 18, "n2"),
    ]
    assert list(encode_batches([])) == []


def test_list_encoded_equals_protobufs_own_list_response() -> None:
    s = HubStore()
    assert s.list_encoded() == pb.ListResponse().SerializeToString()
    s.put(_report("b", "1"), now=5.5)
    s.put(_report("a", "2"), now=6.0)
    s.put(_report("b", "3"), now=7.125)
    want = pb.ListResponse(
        revision=3,
        items=[_item(2, _report("a", "2"), 6_000_000_000), _item(3, _report("b", "3"), 7_125_000_000)],
    )
    assert s.list_encoded() == want.SerializeToString()
    assert s.list() == want
    assert s.list("b").items == want.items[1:]
    assert s.list("zzz") == pb.ListResponse(revision=3)


def test_history_entries_cost_the_garbage_collector_nothing() -> None:
    import gc

    s = HubStore()
    for i in range(100):
        s.put(_report(f"n{i % 7}", str(i)))
    s.delete("n3")
    gc.collect()
    history = list(s._history)
    assert len(history) == 101 and not any(gc.is_tracked(c) for c in history)
