"""HubStore: latest report per node, revisions, replay and resume of watches, bounded history."""

from __future__ import annotations

import threading

import pytest

from manager.metrichub.store import HubStore, RevisionTooOldError
from proto.koord.v1 import metrichub_pb2 as pb


def report(node: str, cpu: str) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.node_metric.node_usage.resources["cpu"] = cpu
    return r


def cpu_of(item: pb.NodeMetricItem) -> str:
    return item.report.status.node_metric.node_usage.resources["cpu"]


def take(it: object, n: int) -> list[pb.NodeMetricEvent]:
    out = []
    for ev in it:  # type: ignore[attr-defined]
        out.append(ev)
        if len(out) == n:
            break
    return out


def test_latest_report_per_node_and_revisions() -> None:
    s = HubStore()
    assert s.put(report("b", "1")) == 1
    assert s.put(report("a", "2")) == 2
    assert s.put(report("b", "3")) == 3
    listed = s.list()
    assert listed.revision == 3
    assert [i.report.node_name for i in listed.items] == ["a", "b"]
    assert [cpu_of(i) for i in listed.items] == ["2", "3"]
    assert [i.revision for i in listed.items] == [2, 3]
    assert [cpu_of(i) for i in s.list("b").items] == ["3"]
    assert s.list("zzz").items == []


def test_report_without_node_name_is_refused() -> None:
    with pytest.raises(ValueError, match="node_name"):
        HubStore().put(pb.NodeMetricReport())


def test_watch_from_zero_replays_current_then_follows() -> None:
    s = HubStore()
    s.put(report("a", "1"))
    s.put(report("a", "2"))
    s.put(report("b", "5"))
    alive = threading.Event()
    alive.set()
    it = s.watch(0, alive=alive, poll=0.01)
    first = take(it, 2)
    assert [(e.type, e.item.report.node_name, cpu_of(e.item)) for e in first] == [
        (pb.EVENT_TYPE_ADDED, "a", "2"),
        (pb.EVENT_TYPE_ADDED, "b", "5"),
    ]
    s.put(report("a", "7"))
    s.delete("b")
    nxt = take(it, 2)
    assert [(e.type, e.revision) for e in nxt] == [(pb.EVENT_TYPE_MODIFIED, 4), (pb.EVENT_TYPE_DELETED, 5)]
    alive.clear()


def test_watch_resumes_from_a_revision_and_filters_by_node() -> None:
    s = HubStore()
    for i in range(5):
        s.put(report("a" if i % 2 else "b", str(i)))
    got = take(s.watch(2), 3)
    assert [e.revision for e in got] == [3, 4, 5]
    only_a = s.watch(0, node_name="a")
    assert [cpu_of(e.item) for e in take(only_a, 1)] == ["3"]


def test_watch_from_a_revision_outside_history_is_refused() -> None:
    s = HubStore(history=3)
    for i in range(6):
        s.put(report("n", str(i)))
    with pytest.raises(RevisionTooOldError, match="older"):
        next(iter(s.watch(1)))
    with pytest.raises(RevisionTooOldError, match="newer"):
        next(iter(s.watch(99)))
    assert [e.revision for e in take(s.watch(3), 3)] == [4, 5, 6]
