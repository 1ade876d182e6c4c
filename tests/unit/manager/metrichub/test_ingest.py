"""The hub's ingest over real gRPC on loopback: a semantically bad report (the fault probe's: cpu "abc",
an update time a year ahead, devices_json that is not JSON, JSON nested 3,000 deep) is refused with
INVALID_ARGUMENT and counted by reason, and never reaches the store; an oversized report and a node
that reports too often get RESOURCE_EXHAUSTED; a large valid report is checked off the loop; the
Prometheus view shows the refusals."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from apis import convert, reportlimits
from manager.metrichub.auth import Authorizer, FixedTokenAuthenticator, Identity
from manager.metrichub.limits import HubLimits
from manager.metrichub.metrics import HubCollector
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc
from tests.samples import full_nodemetric_dict

Hub = tuple[HubStore, pb_grpc.MetricHubStub]
TOKENS = {"node-1": Identity("system:node:node-1"), "node-2": Identity("system:node:node-2")}


def hub_with(limits: HubLimits | None = None) -> Iterator[Hub]:
    store = HubStore()
    server, port = serve(
        store, authenticator=FixedTokenAuthenticator(TOKENS), authorizer=Authorizer(), limits=limits
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield store, pb_grpc.MetricHubStub(channel)
    finally:
        channel.close()
        assert server.stop(grace=None).wait(5)


@pytest.fixture()
def hub() -> Iterator[Hub]:
    yield from hub_with()


def md(node: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {node}"),)


def good(node: str = "node-1") -> pb.NodeMetricReport:
    msg = convert.nodemetric_dict_to_report(full_nodemetric_dict())
    msg.node_name = node
    msg.status.update_time.GetCurrentTime()
    return msg


def send(stub: pb_grpc.MetricHubStub, *reports: pb.NodeMetricReport) -> tuple[grpc.StatusCode, str]:
    try:
        stub.Report(iter(reports), timeout=10, metadata=md(reports[0].node_name))
    except grpc.RpcError as e:
        return e.code(), e.details()
    return grpc.StatusCode.OK, ""


def _cpu_abc(m: pb.NodeMetricReport) -> None:
    m.status.node_metric.node_usage.resources["cpu"] = "abc"


def _a_year_ahead(m: pb.NodeMetricReport) -> None:
    m.status.update_time.FromSeconds(m.status.update_time.seconds + 365 * 86_400)


def _devices(text: str) -> Callable[[pb.NodeMetricReport], None]:
    def mutate(m: pb.NodeMetricReport) -> None:
        m.status.node_metric.node_usage.devices_json = text

    return mutate


PROBE: list[tuple[str, Callable[[pb.NodeMetricReport], None], str]] = [
    ("cpu abc", _cpu_abc, "invalid_field"),
    ("update time a year ahead", _a_year_ahead, "future_update_time"),
    ("devices not JSON", _devices("not json"), "invalid_field"),
    ("devices nested 3000 deep", _devices("[" * 3000 + "]" * 3000), "json_too_deep"),
]


@pytest.mark.parametrize(("mutate", "reason"), [(m, r) for _, m, r in PROBE], ids=[n for n, _, _ in PROBE])
def test_a_semantically_bad_report_is_refused_and_counted(
    hub: Hub, mutate: Callable[[pb.NodeMetricReport], None], reason: str
) -> None:
    store, stub = hub
    bad = good()
    mutate(bad)
    code, details = send(stub, good(), bad)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("report 2: ")
    assert store.revision == 1  # the good report before it was stored, the bad one never
    assert store.refused[reason] == 1
    assert send(stub, good()) == (grpc.StatusCode.OK, "")  # the node goes on reporting


def test_size_and_rate_limits_answer_resource_exhausted() -> None:
    for store, stub in hub_with(HubLimits(report_rate=0.001, report_burst=20.0)):
        big = good()
        big.status.pods_metric[0].name = "x" * reportlimits.MAX_REPORT_BYTES
        code, details = send(stub, big)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "at most 1048576" in details
        assert store.refused["too_large"] == 1
        # 20 tokens, one per small report, nearly no refill: the 21st of a stream is refused.
        code, details = send(stub, *[good() for _ in range(20)])
        assert code == grpc.StatusCode.OK
        code, details = send(stub, good())
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "reports too often" in details
        assert store.refused["rate_limited"] == 1
        assert send(stub, good("node-2"))[0] == grpc.StatusCode.OK  # another node has its own bucket
        assert store.revision == 21


def test_a_report_for_another_node_is_counted(hub: Hub) -> None:
    store, stub = hub
    foreign = good("node-2")
    code, details = send(stub, good(), foreign)
    assert code == grpc.StatusCode.PERMISSION_DENIED and "'node-1'" in details and "'node-2'" in details
    assert store.refused["foreign_node"] == 1 and store.revision == 1


def test_a_large_valid_report_is_checked_off_the_loop(hub: Hub) -> None:
    store, stub = hub
    large = good()
    template = large.status.pods_metric[0]
    while large.ByteSize() < 200_000:
        large.status.pods_metric.add().CopyFrom(template)
    assert send(stub, large) == (grpc.StatusCode.OK, "")
    bad = pb.NodeMetricReport()
    bad.CopyFrom(large)
    bad.status.pods_metric[-1].qos = "GOLD"
    code, details = send(stub, bad)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "qos" in details
    assert store.revision == 1


def test_the_prometheus_view_shows_refusals_and_bytes(hub: Hub) -> None:
    store, stub = hub
    bad = good()
    _cpu_abc(bad)
    send(stub, good())
    send(stub, bad)
    registry = CollectorRegistry()
    HubCollector(store, registry)
    text = generate_latest(registry).decode()
    assert 'koord_manager_hub_reports_refused_total{reason="invalid_field"} 1.0' in text
    assert 'koord_manager_hub_reports_refused_total{reason="rate_limited"} 0.0' in text
    assert f"koord_manager_hub_stored_bytes {float(store.stored_bytes)}" in text
    assert store.stored_bytes > 0 and store.history_bytes > store.stored_bytes
