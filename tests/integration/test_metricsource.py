"""The scheduler's metric sources: the freshest of hub and CR wins per node; the hub watcher lists,
watches, follows deletes, and recovers from a hub restart (revision reset) by relisting."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from apis.convert import nodemetric_to_report
from apis.nodemetric import NodeMetric, NodeMetricStatus
from koord.localcluster.controlplane import free_ports
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from scheduler.metricsource import FreshestMerger, HubWatcher
from tests.integration.podhelpers import wait_for


def nm(name: str, second: int) -> NodeMetric:
    return NodeMetric(
        metadata={"name": name},
        status=NodeMetricStatus(update_time=datetime(2026, 1, 1, 0, 0, second, tzinfo=UTC)),
    )


def test_fresher_source_wins_and_a_drop_falls_back() -> None:
    seen: list[tuple[str, int | None]] = []
    m = FreshestMerger(
        lambda n, x: seen.append((n, x.status.update_time.second if x and x.status.update_time else None))
    )
    m.update("cr", "a", nm("a", 10))
    m.update("hub", "a", nm("a", 20))
    m.update("cr", "a", nm("a", 15))  # older than the hub's: no change forwarded
    m.update("hub", "a", None)  # hub forgets: the CR's copy is the freshest left
    m.update("cr", "a", None)
    assert seen == [("a", 10), ("a", 20), ("a", 15), ("a", None)]
    m.update("hub", "b", nm("b", 1))
    m.resync("hub", {"c": nm("c", 2)})
    assert set(m.current()) == {"c"}


def test_hub_watcher_lists_watches_and_survives_a_hub_restart() -> None:
    [port] = free_ports(1)
    got: dict[str, NodeMetric | None] = {}
    lock = threading.Lock()

    def consume(name: str, metric: NodeMetric | None) -> None:
        with lock:
            got[name] = metric

    def second_of(name: str) -> int | None:
        with lock:
            m = got.get(name)
        return m.status.update_time.second if m is not None and m.status.update_time else None

    store = HubStore()
    store.put(nodemetric_to_report(nm("a", 1)))
    server, _ = serve(store, f"127.0.0.1:{port}")
    watcher = HubWatcher(f"127.0.0.1:{port}", FreshestMerger(consume), backoff_initial=0.05, backoff_max=0.2)
    stop = threading.Event()
    t = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    t.start()
    try:
        assert watcher.synced.wait(10)
        assert wait_for(lambda: second_of("a") == 1)
        store.put(nodemetric_to_report(nm("a", 2)))
        store.put(nodemetric_to_report(nm("b", 3)))
        assert wait_for(lambda: second_of("a") == 2 and second_of("b") == 3)
        store.delete("b")
        assert wait_for(lambda: "b" in got and got["b"] is None)

        # The hub restarts with a fresh store (revisions start again at 1): the watcher's resume
        # revision is now in the hub's future, so it must relist and drop what the hub forgot.
        server.stop(grace=None).wait()
        fresh = HubStore()
        fresh.put(nodemetric_to_report(nm("c", 4)))
        server, _ = serve(fresh, f"127.0.0.1:{port}")
        assert wait_for(lambda: second_of("c") == 4, timeout=15)
        assert wait_for(lambda: got.get("a", "gone") is None)
        assert watcher.relists >= 2
    finally:
        stop.set()
        watcher.stop()
        server.stop(grace=None)
        t.join(timeout=10)
    assert not t.is_alive()
