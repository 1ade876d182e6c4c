"""MetricHub caller authentication against the REAL API server: pod-bound ServiceAccount tokens made
with the TokenRequest API (serviceaccounts/<name>/token; this 1.20 server has no token controller and
runs without the ServiceAccount admission plugin), checked by TokenReview; the caller's node comes from
the pod the token is bound to. Also: a scheduler's Watch sees a report within 100 ms of its arrival."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from kubernetes import client

from apis.nodemetric import NodeMetric
from manager.metrichub.auth import EXTRA_NODE_NAME, EXTRA_POD_NAME, Authorizer, TokenReviewAuthenticator
from manager.metrichub.kubeauth import pod_node_lookup, token_reviewer
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc
from scheduler.metricsource import FreshestMerger, HubWatcher

pytestmark = pytest.mark.apiserver


def _bound_token(core: Any, ns: str, sa: str, pod: str, node: str) -> str:
    """Creates ServiceAccount sa and a pod on node (no kubelet needed), returns a token bound to it."""
    try:
        core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    except client.exceptions.ApiException as e:
        if e.status != 409:
            raise
    created = core.create_namespaced_pod(ns, {
        "metadata": {"name": pod},
        "spec": {"nodeName": node, "serviceAccountName": sa, "containers": [{"name": "c", "image": "pause"}]},
    })  # fmt: skip
    ref = client.V1BoundObjectReference(kind="Pod", api_version="v1", name=pod, uid=created.metadata.uid)
    req = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600, bound_object_ref=ref)
    )
    return str(core.create_namespaced_service_account_token(sa, ns, req).status.token)


def _plain_token(core: Any, ns: str, sa: str) -> str:
    core.create_namespaced_service_account(ns, {"metadata": {"name": sa}})
    req = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    return str(core.create_namespaced_service_account_token(sa, ns, req).status.token)


class Hub:
    def __init__(self, kube: Any, ns: str) -> None:
        core = client.CoreV1Api(kube)
        self.agent = _bound_token(core, ns, "koordlet", "koordlet-a", "node-a")
        self.stranger = _bound_token(core, ns, "stranger", "stranger-a", "node-a")
        self.scheduler = _plain_token(core, ns, "koord-scheduler")
        self.review = token_reviewer(kube)
        self.authn = TokenReviewAuthenticator(self.review)
        authz = Authorizer(
            agent_users={f"system:serviceaccount:{ns}:koordlet"},
            reader_users={f"system:serviceaccount:{ns}:koord-scheduler"},
            reader_groups=(),
            pod_node=pod_node_lookup(kube),
        )
        self.store = HubStore()
        self.server, self.port = serve(self.store, "127.0.0.1:0", authenticator=self.authn, authorizer=authz)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pb_grpc.MetricHubStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        assert self.server.stop(grace=None).wait(5)


@pytest.fixture()
def hub(kube: Any, namespace: str) -> Iterator[Hub]:
    h = Hub(kube, namespace)
    try:
        yield h
    finally:
        h.close()


def _md(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def _report(node: str, cpu: str = "1") -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.node_metric.node_usage.resources["cpu"] = cpu
    r.status.update_time.GetCurrentTime()
    return r


def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as e:
        call()
    return e.value.code(), e.value.details()


def test_this_server_binds_tokens_to_pods_but_not_to_nodes(hub: Hub, namespace: str) -> None:
    status = hub.review(hub.agent)
    assert status["authenticated"], status
    assert status["user"]["username"] == f"system:serviceaccount:{namespace}:koordlet"
    extra = status["user"]["extra"]
    assert extra[EXTRA_POD_NAME] == ["koordlet-a"]
    assert EXTRA_NODE_NAME not in extra  # 1.20: the node must be looked up through the pod


def test_unauthenticated_reports_are_refused(hub: Hub) -> None:
    code, details = _code(lambda: hub.stub.Report(iter([_report("node-a")]), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED and "Bearer" in details
    code, _ = _code(
        lambda: hub.stub.Report(iter([_report("node-a")]), timeout=10, metadata=_md("not-a-token"))
    )
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert hub.store.revision == 0


def test_a_report_for_another_node_is_refused(hub: Hub) -> None:
    code, details = _code(
        lambda: hub.stub.Report(iter([_report("node-b")]), timeout=10, metadata=_md(hub.agent))
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "'node-a'" in details and "'node-b'" in details
    assert hub.store.revision == 0


def test_a_mixed_stream_is_refused_at_the_first_foreign_report(hub: Hub) -> None:
    reports = [_report("node-a"), _report("node-b"), _report("node-a")]
    code, _ = _code(lambda: hub.stub.Report(iter(reports), timeout=10, metadata=_md(hub.agent)))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert hub.store.revision == 1  # the own report before the foreign one was accepted, nothing after
    assert [i.report.node_name for i in hub.store.list().items] == ["node-a"]


def test_an_authorised_report_is_accepted_and_reviews_are_cached(hub: Hub) -> None:
    for i in range(5):
        ack = hub.stub.Report(iter([_report("node-a", str(i))]), timeout=10, metadata=_md(hub.agent))
        assert (ack.accepted, ack.last_revision) == (1, i + 1)
    assert hub.authn.reviews == 1


def test_a_pod_bound_token_of_a_non_agent_may_not_report(hub: Hub) -> None:
    code, details = _code(
        lambda: hub.stub.Report(iter([_report("node-a")]), timeout=10, metadata=_md(hub.stranger))
    )
    assert code == grpc.StatusCode.PERMISSION_DENIED and "agent" in details


def test_watch_and_list_need_a_reader(hub: Hub) -> None:
    code, _ = _code(lambda: next(hub.stub.Watch(pb.WatchRequest(), timeout=10)))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    code, _ = _code(lambda: hub.stub.List(pb.ListRequest(), timeout=10))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    code, _ = _code(lambda: next(hub.stub.Watch(pb.WatchRequest(), timeout=10, metadata=_md(hub.agent))))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert hub.stub.List(pb.ListRequest(), timeout=10, metadata=_md(hub.scheduler)).revision == 0


def test_the_scheduler_client_watches_with_a_token_file(hub: Hub, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(hub.scheduler + "\n")
    seen: dict[str, NodeMetric | None] = {}
    got = threading.Event()

    def consume(name: str, nm: NodeMetric | None) -> None:
        seen[name] = nm
        got.set()

    watcher = HubWatcher(f"127.0.0.1:{hub.port}", FreshestMerger(consume), token_file=token_file)
    stop = threading.Event()
    t = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    t.start()
    try:
        assert watcher.synced.wait(10)
        hub.stub.Report(iter([_report("node-a", "3")]), timeout=10, metadata=_md(hub.agent))
        assert got.wait(10)
        assert "node-a" in seen
    finally:
        stop.set()
        watcher.stop()
        t.join(10)


def test_a_scheduler_watch_sees_reports_promptly(hub: Hub) -> None:
    """Delivery latency through authentication and the watch (bench/hub_ingest.py measures it under load;
    here only bounds a busy 2-core machine keeps). 15 reports stay within one node's report budget (a
    bucket of 20, docs/rules/manager.md#metrichub-limits)."""
    hub.stub.Report(iter([_report("node-a", "0")]), timeout=10, metadata=_md(hub.agent))  # warm caches
    stream = hub.stub.Watch(pb.WatchRequest(since_revision=1), metadata=_md(hub.scheduler))
    latencies: list[float] = []
    done = threading.Event()
    count = 15

    def consume() -> None:
        for ev in stream:
            latencies.append(time.time() - ev.item.received_time.ToNanoseconds() / 1e9)
            if len(latencies) == count:
                break
        done.set()

    def consume_until_cancelled() -> None:
        with contextlib.suppress(grpc.RpcError):  # cancelled by the test's cleanup
            consume()

    t = threading.Thread(target=consume_until_cancelled, daemon=True)
    t.start()
    try:
        for i in range(count):
            hub.stub.Report(iter([_report("node-a", str(i))]), timeout=10, metadata=_md(hub.agent))
            time.sleep(0.02)
        assert done.wait(10)
    finally:
        stream.cancel()
        t.join(10)
    assert max(latencies) < 2.0, latencies
    assert statistics.median(latencies) < 0.5, latencies
