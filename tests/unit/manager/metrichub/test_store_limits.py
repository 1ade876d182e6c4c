"""HubStore bounds and pages: the history is bounded by bytes and age as well as by count (the oldest
changes go first, a watcher behind them is told to relist), the latest entries by node count and bytes,
and List pages cover every node exactly once in order, within the page size, with an opaque token."""

from __future__ import annotations

import pytest

from manager.metrichub.store import HubStore, RevisionTooOldError, StoreFullError, page_token
from proto.koord.v1 import metrichub_pb2 as pb


def raw(node: str, size: int) -> bytes:
    r = pb.NodeMetricReport(node_name=node)
    r.status.pods_metric.add(name="x" * size)
    return r.SerializeToString()


def test_the_history_is_bounded_by_bytes() -> None:
    s = HubStore(history=1000, history_bytes=100_000)
    for _ in range(50):
        s.put_raw("flood", raw("flood", 10_000))
        assert s.history_bytes <= 100_000
    assert 8 <= s.revision - 50 + len(s._history) <= 10  # about ten 10 kB changes fit
    with pytest.raises(RevisionTooOldError):
        s.start(5)
    assert s.start(49)[1] == 49  # recent revisions still resume
    assert s.stored_bytes < 11_000  # one node: one entry, whatever it sent before


def test_the_history_is_bounded_by_age() -> None:
    """Changes older than the window are dropped as new ones come, so the history's size follows the rate
    of change (flat once the window has passed); a watcher behind it lists again."""
    now = [0.0]
    s = HubStore(history_seconds=300, clock=lambda: now[0])
    for t in range(0, 1200, 2):  # one change every 2 s for 20 minutes
        now[0] = float(t)
        s.put_raw("n", raw("n", 100))
    assert len(s._history) == 151  # the changes of the last 300 s (inclusive)
    assert len(s._times) == len(s._history)
    size = s.history_bytes
    for t in range(1200, 2400, 2):
        now[0] = float(t)
        s.put_raw("n", raw("n", 100))
    assert s.history_bytes == size  # flat: as many changes leave as come
    with pytest.raises(RevisionTooOldError):
        s.start(s.revision - 200)
    assert s.start(s.revision - 100)[1] == s.revision - 100  # within the window: resumes


def test_a_single_change_larger_than_the_bound_is_kept() -> None:
    s = HubStore(history_bytes=1_000)
    s.put_raw("a", raw("a", 5_000))
    assert len(s._history) == 1 and s.tail(0)[0][0][0] == "a"


def test_latest_entries_are_bounded_by_nodes_and_bytes() -> None:
    s = HubStore(max_nodes=2, max_stored_bytes=30_000)
    s.put_raw("a", raw("a", 100))
    s.put_raw("b", raw("b", 100))
    with pytest.raises(StoreFullError, match="maximum of 2 nodes"):
        s.put_raw("c", raw("c", 100))
    s.put_raw("a", raw("a", 20_000))  # an existing node may still report
    with pytest.raises(StoreFullError, match="30000 bytes"):
        s.put_raw("b", raw("b", 20_000))
    assert s.revision == 3 and s.node_count() == 2
    s.put_raw("a", raw("a", 100))  # shrinking frees room
    s.put_raw("b", raw("b", 20_000))
    assert s.delete("a") == 6
    assert s.stored_bytes == len(s.list("b").items[0].SerializeToString())


def test_pages_cover_every_node_once_in_order() -> None:
    s = HubStore()
    names = [f"node-{i:03d}" for i in range(250)]
    for n in reversed(names):
        s.put_raw(n, raw(n, 10))
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = s.list(limit=64, token=token)
        pages += 1
        assert page.revision == 250
        seen += [i.report.node_name for i in page.items]
        token = page.next_page_token
        if not token:
            break
    assert seen == names and pages == 4
    assert s.list(limit=0).next_page_token == "" and len(s.list().items) == 250  # unpaged: all at once
    assert [i.report.node_name for i in s.list("node-007", limit=5).items] == ["node-007"]


def test_a_page_stops_at_its_byte_size_but_holds_one_item() -> None:
    s = HubStore()
    for n in ("a", "b", "c"):
        s.put_raw(n, raw(n, 3_000))
    got = pb.ListResponse.FromString(s.list_encoded(limit=100, max_bytes=7_000))
    assert [i.report.node_name for i in got.items] == ["a", "b"] and got.next_page_token == page_token("b")
    one = pb.ListResponse.FromString(s.list_encoded(limit=100, max_bytes=10))
    assert [i.report.node_name for i in one.items] == ["a"]
    assert pb.ListResponse.FromString(s.list_encoded(limit=100, token=page_token("c"))).items == []


def test_a_foreign_page_token_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid page token"):
        HubStore().list(limit=1, token="%%%")
    with pytest.raises(ValueError, match="invalid page token"):
        HubStore().list(limit=1, token=page_token("a")[:-1])
