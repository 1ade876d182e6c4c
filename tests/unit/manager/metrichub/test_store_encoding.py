"""HubStore's shared event bytes: framed around the report's wire bytes, equal to protobuf's own."""

from __future__ import annotations

import threading

from manager.metrichub.store import HubStore
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
