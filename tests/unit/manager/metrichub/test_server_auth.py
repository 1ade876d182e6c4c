"""The hub's gRPC server with a fake authenticator: every RPC is checked, own node only; watches
from other threads, batched watches and the insecure-mode warning."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from manager.metrichub.auth import Authorizer, AuthUnavailableError, Identity
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc


class FakeAuthenticator:
    def __init__(self) -> None:
        self.tokens = {
            "node-a": Identity("system:node:a"),
            "sched": Identity("scheduler", frozenset({"readers"})),
            "nobody": Identity("nobody"),
        }

    def authenticate(self, token: str) -> Identity | None:
        if token == "down":
            raise AuthUnavailableError("api server down")
        return self.tokens.get(token)


@pytest.fixture()
def hub() -> Iterator[tuple[HubStore, pb_grpc.MetricHubStub]]:
    store = HubStore()
    authz = Authorizer(reader_users=(), reader_groups={"readers"})
    server, port = serve(store, authenticator=FakeAuthenticator(), authorizer=authz)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield store, pb_grpc.MetricHubStub(channel)
    finally:
        channel.close()
        assert server.stop(grace=None).wait(5)


def md(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def rpc_error(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


def reports(*nodes: str) -> Iterator[pb.NodeMetricReport]:
    return iter([pb.NodeMetricReport(node_name=n) for n in nodes])


def test_report_needs_a_valid_token(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    store, stub = hub
    assert rpc_error(lambda: stub.Report(reports("a"), timeout=5))[0] == grpc.StatusCode.UNAUTHENTICATED
    code, _ = rpc_error(
        lambda: stub.Report(reports("a"), timeout=5, metadata=(("authorization", "Basic x"),))
    )
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert rpc_error(lambda: stub.Report(reports("a"), timeout=5, metadata=md("?")))[0] == (
        grpc.StatusCode.UNAUTHENTICATED
    )
    code, details = rpc_error(lambda: stub.Report(reports("a"), timeout=5, metadata=md("down")))
    assert code == grpc.StatusCode.UNAVAILABLE and "api server down" in details
    assert store.revision == 0


def test_own_node_only(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    store, stub = hub
    ack = stub.Report(reports("a", "a"), timeout=5, metadata=md("node-a"))
    assert (ack.accepted, ack.last_revision) == (2, 2)
    code, details = rpc_error(lambda: stub.Report(reports("a", "b", "a"), timeout=5, metadata=md("node-a")))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "'a'" in details and "'b'" in details
    assert store.revision == 3  # the stream ended at the foreign report
    code, details = rpc_error(lambda: stub.Report(reports("a"), timeout=5, metadata=md("nobody")))
    assert code == grpc.StatusCode.PERMISSION_DENIED and "node identity" in details


def test_readers_only_for_list_and_watch(hub: tuple[HubStore, pb_grpc.MetricHubStub]) -> None:
    _, stub = hub
    stub.Report(reports("a"), timeout=5, metadata=md("node-a"))
    for token, code in (
        (None, grpc.StatusCode.UNAUTHENTICATED),
        ("node-a", grpc.StatusCode.PERMISSION_DENIED),
    ):
        kw: dict[str, Any] = {"timeout": 5} if token is None else {"timeout": 5, "metadata": md(token)}
        assert rpc_error(lambda: stub.List(pb.ListRequest(), **kw))[0] == code  # noqa: B023
        assert rpc_error(lambda: next(stub.Watch(pb.WatchRequest(), **kw)))[0] == code  # noqa: B023
        assert rpc_error(lambda: next(stub.WatchBatch(pb.WatchRequest(), **kw)))[0] == code  # noqa: B023
    assert [
        i.report.node_name for i in stub.List(pb.ListRequest(), timeout=5, metadata=md("sched")).items
    ] == ["a"]
    stream = stub.Watch(pb.WatchRequest(), timeout=5, metadata=md("sched"))
    ev = next(stream)
    stream.cancel()
    assert (ev.type, ev.revision, ev.item.report.node_name) == (pb.EVENT_TYPE_ADDED, 1, "a")
    batches = stub.WatchBatch(pb.WatchRequest(), timeout=5, metadata=md("sched"))
    first = next(batches)
    batches.cancel()
    assert [(e.type, e.revision, e.item.report.node_name) for e in first.events] == [
        (pb.EVENT_TYPE_ADDED, 1, "a")
    ]


def test_a_batched_watch_gets_every_change_once_in_order() -> None:
    store = HubStore()
    server, port = serve(store)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        store.put(pb.NodeMetricReport(node_name="x"))
        # Two watchers: those that wake together share the batches of a wake-up.
        streams = [
            pb_grpc.MetricHubStub(channel).WatchBatch(pb.WatchRequest(since_revision=1), timeout=10)
            for _ in range(2)
        ]
        for i in range(300):
            store.put(pb.NodeMetricReport(node_name=f"n{i % 4}"))
        store.delete("n2")
        for stream in streams:
            got: list[pb.NodeMetricEvent] = []
            for batch in stream:
                assert batch.events
                got += batch.events
                if len(got) >= 301:
                    break
            stream.cancel()
            assert [e.revision for e in got] == list(range(2, 303))
            assert got[-1].type == pb.EVENT_TYPE_DELETED and got[-1].item.report.node_name == "n2"
            assert {e.type for e in got[:4]} == {pb.EVENT_TYPE_ADDED}
        one = pb_grpc.MetricHubStub(channel).WatchBatch(pb.WatchRequest(node_name="n1"), timeout=10)
        assert [(e.type, e.item.report.node_name) for e in next(one).events] == [(pb.EVENT_TYPE_ADDED, "n1")]
        one.cancel()
        with pytest.raises(grpc.RpcError) as e:
            next(pb_grpc.MetricHubStub(channel).WatchBatch(pb.WatchRequest(since_revision=999), timeout=10))
        assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE
    finally:
        channel.close()
        server.stop(grace=None).wait(5)


def test_insecure_mode_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="manager.metrichub.server"):
        server, _ = serve(HubStore())
    assert server.stop(grace=None).wait(5)
    assert "INSECURE" in caplog.text


def test_tokens_without_tls_beyond_loopback_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="manager.metrichub.server"):
        server, _ = serve(HubStore(), "127.0.0.1:0", authenticator=FakeAuthenticator())
        assert server.stop(grace=None).wait(5)
        assert "in clear" not in caplog.text  # loopback: the embedded scheduler, tests
        server, _ = serve(HubStore(), "0.0.0.0:0", authenticator=FakeAuthenticator())
        assert server.stop(grace=None).wait(5)
    assert "bearer tokens travel in clear" in caplog.text and "INSECURE" not in caplog.text


def test_a_watch_sees_reports_from_other_threads() -> None:
    store = HubStore()
    server, port = serve(store)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stream = pb_grpc.MetricHubStub(channel).Watch(pb.WatchRequest(), timeout=5)
        store.put(pb.NodeMetricReport(node_name="x"))  # written outside the server's loop
        ev = next(stream)
        assert (ev.revision, ev.item.report.node_name) == (1, "x")
        store.delete("x")
        assert next(stream).type == pb.EVENT_TYPE_DELETED
        stream.cancel()
    finally:
        channel.close()
        server.stop(grace=None).wait(5)


def test_hub_metrics_count_reports_and_watchers() -> None:
    import threading

    from prometheus_client import CollectorRegistry

    from manager.metrichub.metrics import HubCollector
    from manager.metrichub.store import HubStore

    store = HubStore()
    registry = CollectorRegistry()
    HubCollector(store, registry)
    store.put(pb.NodeMetricReport(node_name="n1"))
    store.put(pb.NodeMetricReport(node_name="n1"))
    store.put(pb.NodeMetricReport(node_name="n2"))
    assert registry.get_sample_value("koord_manager_hub_reports_received_total") == 3
    assert registry.get_sample_value("koord_manager_hub_nodes") == 2
    entered, release = threading.Event(), threading.Event()

    def watch() -> None:
        with store.watching():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=watch)
    t.start()
    assert entered.wait(5)
    assert registry.get_sample_value("koord_manager_hub_watchers") == 1
    release.set()
    t.join(5)
    assert registry.get_sample_value("koord_manager_hub_watchers") == 0
