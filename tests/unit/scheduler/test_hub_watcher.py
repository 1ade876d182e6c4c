"""The scheduler's hub watcher against a real hub on loopback: an entry that fails the report check
(put into the store behind the ingest's back, as a hub of another version might hold it) is skipped
and counted, in the List and in the watch, and the watcher goes on; a watcher that raises anyway is
restarted by its supervisor; 5,000 realistic nodes (the bench's ~4 KB reports, ~20 MB, far past
gRPC's 4 MiB default) sync through List pages."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest

from apis import convert
from apis.nodemetric import NodeMetric
from bench.hub_ingest import make_report
from kube.supervise import supervise
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc
from scheduler.metricsource import FreshestMerger, HubWatcher
from tests.samples import full_nodemetric_dict


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return cond()


def report(node: str, cpu: str = "1500m") -> pb.NodeMetricReport:
    msg = convert.nodemetric_dict_to_report(full_nodemetric_dict())
    msg.node_name = node
    msg.status.update_time.GetCurrentTime()
    msg.status.node_metric.node_usage.resources["cpu"] = cpu
    return msg


class Seen:
    def __init__(self) -> None:
        self.metrics: dict[str, NodeMetric | None] = {}
        self.lock = threading.Lock()

    def __call__(self, name: str, nm: NodeMetric | None) -> None:
        with self.lock:
            self.metrics[name] = nm

    def has(self, name: str) -> bool:
        with self.lock:
            return self.metrics.get(name) is not None

    def count(self) -> int:
        with self.lock:
            return sum(1 for m in self.metrics.values() if m is not None)


@pytest.fixture()
def hub() -> Iterator[tuple[HubStore, str]]:
    store = HubStore()
    server, port = serve(store)
    try:
        yield store, f"127.0.0.1:{port}"
    finally:
        assert server.stop(grace=None).wait(5)


def test_a_bad_entry_is_skipped_and_counted_and_the_watch_goes_on(hub: tuple[HubStore, str]) -> None:
    store, target = hub
    store.put(report("good-1"))
    store.put(report("bad-1", cpu="abc"))
    skipped: list[str] = []
    seen = Seen()
    watcher = HubWatcher(target, FreshestMerger(seen), on_skipped=skipped.append, page_items=1)
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,))
    thread.start()
    try:
        assert watcher.synced.wait(10)
        assert seen.has("good-1") and not seen.has("bad-1") and skipped == ["invalid_field"]
        assert watcher.pages == 2  # one item per page
        future = report("good-1")
        future.status.update_time.FromSeconds(future.status.update_time.seconds + 3600)
        store.put(future)  # an hour ahead: refused at ingest; here it is in the store: dropped
        store.put(report("bad-1"))  # the bad node's next report is fine again
        assert wait_for(lambda: seen.has("bad-1") and not seen.has("good-1"))
        assert skipped == ["invalid_field", "future_update_time"] and watcher.skipped == 2
        store.put(report("good-1"))
        assert wait_for(lambda: seen.has("good-1"))
    finally:
        stop.set()
        watcher.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_a_watcher_that_raises_is_restarted(hub: tuple[HubStore, str]) -> None:
    store, target = hub
    store.put(report("node-a"))
    calls: list[str] = []

    def consumer(name: str, nm: NodeMetric | None) -> None:
        calls.append(name)
        if len(calls) == 1:
            raise RecursionError("a consumer bug")

    crashes: list[str] = []
    watcher = HubWatcher(target, FreshestMerger(consumer))
    stop = threading.Event()
    t = supervise(
        "hub-watcher", watcher.run, stop, backoff_initial=0.01, on_crash=lambda n, e: crashes.append(str(e))
    )
    try:
        assert watcher.synced.wait(10)
        assert crashes == ["a consumer bug"] and t.restarts == 1
    finally:
        stop.set()
        watcher.stop()
        assert t.join(10)


def test_5000_realistic_nodes_sync_through_pages(hub: tuple[HubStore, str]) -> None:
    store, target = hub
    base = make_report("node-0")
    for i in range(5000):
        msg = pb.NodeMetricReport.FromString(base)
        msg.node_name = f"node-{i:04d}"
        store.put(msg)
    total = len(store.list_encoded())
    assert total > 4 * (1 << 20)  # one unpaged answer would exceed a default client's limit
    with grpc.insecure_channel(target) as channel:
        with pytest.raises(grpc.RpcError) as e:
            pb_grpc.MetricHubStub(channel).List(pb.ListRequest(), timeout=30)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    seen = Seen()
    watcher = HubWatcher(target, FreshestMerger(seen))
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,))
    thread.start()
    try:
        assert watcher.synced.wait(120)
        assert seen.count() == 5000 and watcher.skipped == 0
        assert watcher.pages >= total // (2 << 20)  # pages of at most 2 MiB
        store.put(report("node-0007", cpu="2"))
        assert wait_for(lambda: _cpu(seen, "node-0007") == "2")
    finally:
        stop.set()
        watcher.stop()
        thread.join(10)
    assert not thread.is_alive()


def _cpu(seen: Seen, name: str) -> str | None:
    with seen.lock:
        nm = seen.metrics.get(name)
    if nm is None or nm.status.node_metric is None:
        return None
    return str(nm.status.node_metric.node_usage.resources["cpu"])
