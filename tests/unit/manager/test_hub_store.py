"""HubStore: latest report per node, revisions, replay and resume of watches, bounded history."""

from __future__ import annotations

import pytest

from manager.metrichub.store import Change, HubStore, RevisionTooOldError, encoded_events
from proto.koord.v1 import metrichub_pb2 as pb


def report(node: str, cpu: str) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.node_metric.node_usage.resources["cpu"] = cpu
    return r


def cpu_of(item: pb.NodeMetricItem) -> str:
    return item.report.status.node_metric.node_usage.resources["cpu"]


def events(changes: tuple[list[Change], int]) -> list[pb.NodeMetricEvent]:
    return [pb.NodeMetricEvent.FromString(e) for e in encoded_events(changes[0])]


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
    first, cursor = s.start(0)
    assert cursor == 3
    assert [(e.type, e.item.report.node_name, cpu_of(e.item)) for e in events((first, cursor))] == [
        (pb.EVENT_TYPE_ADDED, "a", "2"),
        (pb.EVENT_TYPE_ADDED, "b", "5"),
    ]
    assert s.tail(cursor) == ([], 3)
    s.put(report("a", "7"))
    s.delete("b")
    nxt = s.tail(cursor)
    assert nxt[1] == 5
    assert [(e.type, e.revision) for e in events(nxt)] == [
        (pb.EVENT_TYPE_MODIFIED, 4),
        (pb.EVENT_TYPE_DELETED, 5),
    ]


def test_watch_resumes_from_a_revision_and_filters_by_node() -> None:
    s = HubStore()
    for i in range(5):
        s.put(report("a" if i % 2 else "b", str(i)))
    assert s.start(2) == ([], 2)
    assert [e.revision for e in events(s.tail(2))] == [3, 4, 5]
    assert [cpu_of(e.item) for e in events(s.start(0, node_name="a"))] == ["3"]
    assert [e.revision for e in events(s.tail(1, node_name="a"))] == [2, 4]
    assert s.start(0, node_name="zzz") == ([], 5)


def test_watch_from_a_revision_outside_history_is_refused() -> None:
    s = HubStore(history=3)
    for i in range(6):
        s.put(report("n", str(i)))
    with pytest.raises(RevisionTooOldError, match="older"):
        s.start(1)
    with pytest.raises(RevisionTooOldError, match="newer"):
        s.start(99)
    with pytest.raises(RevisionTooOldError, match="fell behind"):
        s.tail(2)
    backlog, cursor = s.start(3)  # the oldest kept change is revision 4
    assert backlog == [] and [e.revision for e in events(s.tail(cursor))] == [4, 5, 6]
