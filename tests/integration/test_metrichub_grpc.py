"""MetricHub over real gRPC on loopback: a full NodeMetric reported by an agent stream comes back
from List and Watch without loss."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from apis import convert
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore, encoded_events
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc
from scheduler.metricsource import FreshestMerger, HubWatcher
from tests.samples import full_nodemetric_dict


@pytest.fixture()
def hub() -> Iterator[tuple[HubStore, pb_grpc.MetricHubStub]]:
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield store, pb_grpc.MetricHubStub(channel)
    finally:
        channel.close()
        assert server.stop(grace=None).wait(5)


def _nodemetric(name: str, cpu: str) -> dict[str, Any]:
    nm = full_nodemetric_dict()
    nm["metadata"] = {"name": name}
    nm["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = cpu
    return nm


def test_report_then_list_is_lossless(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    _, stub = hub
    sent = [_nodemetric("node-a", "2500m"), _nodemetric("node-b", "3"), _nodemetric("node-a", "1200m")]
    ack = stub.Report(iter([convert.nodemetric_dict_to_report(nm) for nm in sent]), timeout=10)
    assert (ack.accepted, ack.last_revision) == (3, 3)

    listed = stub.List(pb.ListRequest(), timeout=10)
    assert listed.revision == 3
    assert [i.report.node_name for i in listed.items] == ["node-a", "node-b"]
    got = {
        i.report.node_name: convert.report_to_nodemetric_dict(i.report, metadata={"name": i.report.node_name})
        for i in listed.items
    }
    for want in (sent[2], sent[1]):  # the latest report of each node
        expected = copy.deepcopy(want)
        expected.pop("apiVersion"), expected.pop("kind")
        got_nm = got[want["metadata"]["name"]]
        assert got_nm["spec"] == expected["spec"]
        assert got_nm["status"] == expected["status"]

    one = stub.List(pb.ListRequest(node_name="node-b"), timeout=10)
    assert [i.report.node_name for i in one.items] == ["node-b"]


def test_watch_sees_a_report_and_resumes(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    _, stub = hub
    stub.Report(iter([convert.nodemetric_dict_to_report(_nodemetric("n1", "1"))]), timeout=10)
    stream = stub.Watch(pb.WatchRequest(since_revision=0), timeout=30)
    first = next(stream)
    assert (first.type, first.item.report.node_name) == (pb.EVENT_TYPE_ADDED, "n1")

    got: list[pb.NodeMetricEvent] = []
    done = threading.Event()

    def consume() -> None:
        for ev in stream:
            got.append(ev)
            if len(got) == 2:
                break
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    stub.Report(iter([convert.nodemetric_dict_to_report(_nodemetric("n1", "2")),
                      convert.nodemetric_dict_to_report(_nodemetric("n2", "3"))]), timeout=10)  # fmt: skip
    assert done.wait(10)
    stream.cancel()
    assert [(e.type, e.revision, e.item.report.node_name) for e in got] == [
        (pb.EVENT_TYPE_MODIFIED, 2, "n1"),
        (pb.EVENT_TYPE_ADDED, 3, "n2"),
    ]
    cpu = got[0].item.report.status.node_metric.node_usage.resources["cpu"]
    assert cpu == "2"

    resumed = stub.Watch(pb.WatchRequest(since_revision=2, node_name="n2"), timeout=10)
    ev = next(resumed)
    resumed.cancel()
    assert (ev.revision, ev.item.report.node_name) == (3, "n2")


def test_a_report_without_node_name_is_refused(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    _, stub = hub
    with pytest.raises(grpc.RpcError) as e:
        stub.Report(iter([pb.NodeMetricReport()]), timeout=10)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_watch_from_a_future_revision_is_out_of_range(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    _, stub = hub
    with pytest.raises(grpc.RpcError) as e:
        next(stub.Watch(pb.WatchRequest(since_revision=42), timeout=10))
    assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE


def _follow_with_hub_watcher(target: str, store: HubStore) -> tuple[HubWatcher, dict[str, Any]]:
    seen: dict[str, Any] = {}
    watcher = HubWatcher(target, FreshestMerger(seen.__setitem__), backoff_initial=0.05, backoff_max=0.2)
    stop = threading.Event()
    t = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    t.start()
    try:
        assert watcher.synced.wait(10)
        store.put(convert.nodemetric_dict_to_report(_nodemetric("n1", "1")))
        store.put(convert.nodemetric_dict_to_report(_nodemetric("n2", "2")))
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        watcher.stop()
        t.join(5)
    return watcher, seen


def test_the_scheduler_watches_in_batches() -> None:
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0")
    try:
        watcher, seen = _follow_with_hub_watcher(f"127.0.0.1:{port}", store)
    finally:
        assert server.stop(grace=None).wait(5)
    assert watcher.batched and sorted(seen) == ["n1", "n2"]


class OldHub:
    """A hub that predates WatchBatch: List and Watch over a HubStore, nothing else."""

    def __init__(self, store: HubStore) -> None:
        self.store = store

    def list(self, request: pb.ListRequest, context: grpc.ServicerContext) -> pb.ListResponse:
        return self.store.list()

    def watch(self, request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[pb.NodeMetricEvent]:
        changes, cursor = self.store.start(request.since_revision)
        while context.is_active():
            for event in encoded_events(changes):
                yield pb.NodeMetricEvent.FromString(event)
            time.sleep(0.01)
            changes, cursor = self.store.tail(cursor)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            "koord.v1.MetricHub",
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self.list, pb.ListRequest.FromString, pb.ListResponse.SerializeToString
                ),
                "Watch": grpc.unary_stream_rpc_method_handler(
                    self.watch, pb.WatchRequest.FromString, pb.NodeMetricEvent.SerializeToString
                ),
            },
        )


def test_the_scheduler_falls_back_to_watch_on_a_hub_without_watch_batch() -> None:
    store = HubStore()
    pool = futures.ThreadPoolExecutor(max_workers=8)
    server = grpc.server(pool)
    server.add_generic_rpc_handlers((OldHub(store).handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        watcher, seen = _follow_with_hub_watcher(f"127.0.0.1:{port}", store)
    finally:
        server.stop(grace=None).wait(5)
        pool.shutdown(wait=True)
    assert not watcher.batched and sorted(seen) == ["n1", "n2"]
    assert str(seen["n2"].status.node_metric.node_usage.resources["cpu"]) == "2"
