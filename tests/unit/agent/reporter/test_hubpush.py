"""HubPusher against a real MetricHub gRPC server on 127.0.0.1: acknowledged delivery, latest-only
buffering while the hub is down, redelivery once it listens, bearer token metadata."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from agent.reporter.hubpush import HubPusher
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc


def report(node: str, marker: int) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.update_time.FromSeconds(1_700_000_000 + marker)
    return r


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RecordingServicer(pb_grpc.MetricHubServicer):
    """Stores every report and records each Report call's metadata."""

    def __init__(self, store: HubStore) -> None:
        self.store = store
        self.metadata: list[dict[str, str]] = []

    def Report(  # noqa: N802 (gRPC method name)
        self, request_iterator: Iterator[pb.NodeMetricReport], context: grpc.ServicerContext
    ) -> pb.ReportAck:
        self.metadata.append({k: str(v) for k, v in context.invocation_metadata()})
        last = 0
        accepted = 0
        for report in request_iterator:
            last = self.store.put(report)
            accepted += 1
        return pb.ReportAck(accepted=accepted, last_revision=last)


class ZeroAckServicer(pb_grpc.MetricHubServicer):
    def Report(  # noqa: N802
        self, request_iterator: Iterator[pb.NodeMetricReport], context: grpc.ServicerContext
    ) -> pb.ReportAck:
        for _ in request_iterator:
            pass
        return pb.ReportAck(accepted=0)


def start(servicer: pb_grpc.MetricHubServicer) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_MetricHubServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


@pytest.fixture()
def hub() -> Iterator[tuple[HubStore, int]]:
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0")
    try:
        yield store, port
    finally:
        server.stop(None).wait(5)


def test_delivered_report_is_acknowledged_and_listed(hub: tuple[HubStore, int]) -> None:
    store, port = hub
    results: list[tuple[str, str]] = []
    pusher = HubPusher(f"127.0.0.1:{port}", on_result=lambda t, r: results.append((t, r)), timeout=5.0)
    try:
        assert pusher.push(report("n1", 1)) is True
        assert pusher.pending is None
        assert pusher.last_error is None
        listed = store.list()
        assert [item.report.node_name for item in listed.items] == ["n1"]
        assert listed.items[0].report == report("n1", 1)
        assert results == [("hub", "succeeded")]
        # a second report replaces the node's entry
        assert pusher.push(report("n1", 2)) is True
        assert store.list("n1").items[0].report.status.update_time.seconds == 1_700_000_002
        assert store.revision == 2
    finally:
        pusher.close()


def test_push_with_nothing_pending_is_true(hub: tuple[HubStore, int]) -> None:
    store, port = hub
    pusher = HubPusher(f"127.0.0.1:{port}", timeout=5.0)
    try:
        assert pusher.push() is True
        assert store.revision == 0
    finally:
        pusher.close()


def test_hub_down_keeps_only_latest_then_delivers_it() -> None:
    port = free_port()
    results: list[tuple[str, str]] = []
    pusher = HubPusher(f"127.0.0.1:{port}", on_result=lambda t, r: results.append((t, r)), timeout=0.5)
    try:
        first, second, third = report("n1", 1), report("n1", 2), report("n1", 3)
        assert pusher.push(first) is False
        assert pusher.pending == first
        assert pusher.last_error is not None and "UNAVAILABLE" in pusher.last_error
        assert pusher.push(second) is False
        assert pusher.push(third) is False
        assert pusher.pending == third  # only the latest is kept
        assert results == [("hub", "failed")] * 3

        store = HubStore()
        server, bound = serve(store, f"127.0.0.1:{port}")
        try:
            assert bound == port
            deadline = time.monotonic() + 20.0  # the channel reconnects after its backoff
            delivered = False
            while not delivered and time.monotonic() < deadline:
                delivered = pusher.push()
                if not delivered:
                    time.sleep(0.1)
            assert delivered
            assert pusher.pending is None
            items = store.list().items
            assert len(items) == 1
            assert items[0].report == third
            assert store.revision == 1  # the older reports were never sent
            assert results[-1] == ("hub", "succeeded")
        finally:
            server.stop(None).wait(5)
    finally:
        pusher.close()


def test_bearer_token_sent_and_reread(tmp_path: Path) -> None:
    store = HubStore()
    servicer = RecordingServicer(store)
    server, port = start(servicer)
    token = tmp_path / "token"
    token.write_text("secret-1\n")
    pusher = HubPusher(f"127.0.0.1:{port}", token_file=token, timeout=5.0)
    try:
        assert pusher.push(report("n1", 1)) is True
        token.write_text("secret-2")  # rotated
        assert pusher.push(report("n1", 2)) is True
        assert [m.get("authorization") for m in servicer.metadata] == ["Bearer secret-1", "Bearer secret-2"]
    finally:
        pusher.close()
        server.stop(None).wait(5)


def test_no_token_file_sends_no_authorization() -> None:
    store = HubStore()
    servicer = RecordingServicer(store)
    server, port = start(servicer)
    pusher = HubPusher(f"127.0.0.1:{port}", timeout=5.0)
    try:
        assert pusher.push(report("n1", 1)) is True
        assert len(servicer.metadata) == 1
        assert "authorization" not in servicer.metadata[0]
    finally:
        pusher.close()
        server.stop(None).wait(5)


def test_unreadable_token_file_fails_and_keeps_report(hub: tuple[HubStore, int], tmp_path: Path) -> None:
    store, port = hub
    missing = tmp_path / "absent-token"
    results: list[tuple[str, str]] = []
    pusher = HubPusher(
        f"127.0.0.1:{port}", token_file=missing, on_result=lambda t, r: results.append((t, r)), timeout=5.0
    )
    try:
        r = report("n1", 1)
        assert pusher.push(r) is False
        assert pusher.pending == r
        assert pusher.last_error is not None and str(missing) in pusher.last_error
        assert store.revision == 0
        missing.write_text("tok")
        assert pusher.push() is True
        assert store.list().items[0].report == r
        assert results == [("hub", "failed"), ("hub", "succeeded")]
    finally:
        pusher.close()


def test_zero_accepted_ack_is_a_failure() -> None:
    server, port = start(ZeroAckServicer())
    pusher = HubPusher(f"127.0.0.1:{port}", timeout=5.0)
    try:
        r = report("n1", 1)
        assert pusher.push(r) is False
        assert pusher.pending == r
        assert pusher.last_error == "hub accepted no report"
    finally:
        pusher.close()
        server.stop(None).wait(5)


def test_rejected_report_stays_pending(hub: tuple[HubStore, int]) -> None:
    store, port = hub
    pusher = HubPusher(f"127.0.0.1:{port}", timeout=5.0)
    try:
        bad = pb.NodeMetricReport()  # no node name: the hub answers INVALID_ARGUMENT
        assert pusher.push(bad) is False
        assert pusher.last_error is not None and pusher.last_error.startswith("INVALID_ARGUMENT")
        assert pusher.pending == bad
        assert store.revision == 0
    finally:
        pusher.close()
