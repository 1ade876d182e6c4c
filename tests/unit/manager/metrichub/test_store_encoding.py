"""HubStore's shared event bytes: framed around the report's wire bytes, equal to protobuf's own."""

from __future__ import annotations

import threading

from manager.metrichub.store import HubStore, encode_batches, encoded_events
from proto.koord.v1 import metrichub_pb2 as pb


def _report(node: str, cpu: str) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.node_metric.node_usage.resources["cpu"] = cpu
    r.status.pods_metric.add(name="p", namespace="ns", qos="BE")
    return r


def _take(it: object, n: int) -> list[bytes]:
    out: list[bytes] = []
    for x in it:  # type: ignore[attr-defined]
        out.append(x)
        if len(out) == n:
            break
    return out


def test_encoded_events_equal_the_messages() -> None:
    s = HubStore()
    a = _report("a", "1")
    s.put(a, now=1.5, raw=a.SerializeToString())
    s.put(_report("b", "2"), now=2.0)  # no raw: serialised by protobuf
    a2 = _report("a", "3")
    s.put(a2, now=3.25, raw=a2.SerializeToString())
    s.delete("a")
    for since in (0, 1):
        alive = threading.Event()
        alive.set()
        n = 1 if since == 0 else 3
        encoded = _take(s.watch_encoded(since, alive=alive, poll=0.01), n)
        messages = _take(s.watch(since, alive=alive, poll=0.01), n)
        assert [pb.NodeMetricEvent.FromString(b) for b in encoded] == messages
        assert encoded == [m.SerializeToString() for m in messages]
    deleted = pb.NodeMetricEvent.FromString(_take(s.watch_encoded(3), 1)[0])
    assert (deleted.type, deleted.revision, deleted.item.revision) == (pb.EVENT_TYPE_DELETED, 4, 3)
    assert deleted.item.received_time.ToNanoseconds() == 3_250_000_000
    assert deleted.item.report == a2
    replay = [pb.NodeMetricEvent.FromString(b) for b in _take(s.watch_encoded(0), 1)]
    assert [(e.type, e.revision, e.item.report.node_name) for e in replay] == [(pb.EVENT_TYPE_ADDED, 2, "b")]


def test_the_hub_keeps_its_own_copy_of_a_message_put_without_raw() -> None:
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
    singles = [pb.NodeMetricEvent.FromString(d) for d in encoded_events(tail)]
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
    listed = s.list()
    assert s.list_encoded() == listed.SerializeToString()
    assert (listed.revision, [i.report.node_name for i in listed.items]) == (3, ["a", "b"])
    assert [i.revision for i in listed.items] == [2, 3]
    assert listed.items[1].received_time.ToNanoseconds() == 7_125_000_000
    assert listed.items[1].report == _report("b", "3")
    assert s.list("b").items == listed.items[1:]


def test_history_entries_cost_the_garbage_collector_nothing() -> None:
    import gc

    s = HubStore()
    for i in range(100):
        s.put(_report(f"n{i % 7}", str(i)))
    s.delete("n3")
    gc.collect()
    history = list(s._history)
    assert history and not any(gc.is_tracked(c) for c in history)
