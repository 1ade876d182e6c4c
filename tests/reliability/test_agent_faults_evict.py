"""Eviction faults on the real API server (docs/rules/koordlet.md#how-a-pod-is-evicted,
docs/rules/koordlet.md#retries-back-off): the real BEMemoryEvict strategy in the real QoS loop asks the
real evictor, round after round, to evict a BE pod that

- a PodDisruptionBudget protects: the API server answers 429 until the budget is deleted; or
- the API server fails to evict: 500, injected for the first few requests by a fake at the HTTP boundary
  only (the koordlet's urllib3 pool), every other request reaching the API server.

Each test checks that the retries are paced (the strategy's 4 s cool-down for a 429, the evictor's
growing backoff for a 500: never one request per tick), that nothing is counted twice, that the later
success evicts the pod exactly once and stops the retries, and that the metrics, the audit log and the
pod's Events tell that story. Time is virtual for the loop and the evictor; the API calls are real.
"""

from __future__ import annotations

import itertools
import json
import threading
from datetime import datetime
from typing import Any

import pytest
import urllib3
from kubernetes import client
from prometheus_client import CollectorRegistry

from agent.evictor import Evictor
from agent.gateway import KubeGateway
from agent.podmeta import pod_meta
from agent.qosmanager import memoryevict
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.runner import HostCgroupView, QoSManager, StrategyEntry
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver
from apis.kubeobjects import Pod
from apis.nodeslo import NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from kube.rest import KubeRest
from tests.reliability.agent_fault_helpers import START, FixedMetrics, node
from tests.unit.agent.qosmanager.fakeclock import FakeClock

pytestmark = pytest.mark.apiserver

NODE = "evict-fault-node"
GIB = 1 << 30
STRATEGY = "BEMemoryEvict"


class FailingEvictions:
    """Stands in for ``KubeRest``'s urllib3 pool: the first ``failures`` eviction POSTs are answered 500
    here (the API server never sees them), as an overloaded API server or etcd would answer; every other
    request goes to the real pool."""

    def __init__(self, pool: Any, failures: int) -> None:
        self.pool = pool
        self.left = failures
        self.refused = 0

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        if method == "POST" and url.endswith("/eviction") and self.left > 0:
            self.left -= 1
            self.refused += 1
            status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
                      "reason": "InternalError", "message": "etcdserver: request timed out"}  # fmt: skip
            body = json.dumps(status).encode()
            return urllib3.HTTPResponse(body=body, status=500, reason="Internal Server Error")
        return self.pool.request(method, url, **kwargs)

    def clear(self) -> None:
        self.pool.clear()


class EvictLoop:
    """The koordlet's memory-evict side for one node whose memory is 80 % used (threshold 70 %: 12 GiB
    to release) with one BE pod holding 20 GiB: the strategy in a ``QoSManager`` on a ``FakeClock``, the
    real ``Evictor`` on the real API server (its clock the fake one), audit lines kept in order."""

    def __init__(self, rest: KubeRest, pod: Pod) -> None:
        self.clock = FakeClock(START)
        self.registry = CollectorRegistry()
        self.audit: list[dict[str, Any]] = []
        self.evictor = Evictor(
            KubeGateway(rest, NODE), self.registry, audit=lambda line: self.audit.append(json.loads(line)),
            clock=lambda: self.clock.now().timestamp(),
        )  # fmt: skip
        self.meta = pod_meta(pod, CgroupDriver.CGROUPFS)
        self.metrics = FixedMetrics()
        self.metrics.set("node_memory_usage", {}, 80 * GIB)
        self.metrics.set("pod_memory_usage", {"pod_uid": self.meta.uid}, 20 * GIB)
        self.slo = merge_node_slo_spec(
            NodeSLOSpec.from_dict(
                {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 70}}
            )
        )
        evictor = self.evictor
        self.entry = StrategyEntry(
            memoryevict.MemoryEvictStrategy(),
            lambda: memoryevict.MemoryEvictConfig(already_evicted=evictor.pending_uids()),
        )
        no_host: Any = _NoHost()
        self.manager = QoSManager([self.entry], self._snapshot, no_host, self.evictor, clock=self.clock)

    def _snapshot(self, now: datetime) -> Snapshot:
        return Snapshot(
            now=now, node=node(cpu="16", memory="100Gi"), node_slo=self.slo, pods=[self.meta],
            metrics=self.metrics,
            cgroups=HostCgroupView(HostPaths(), CgroupVersion.V1), cgroup_version=CgroupVersion.V1,
            cgroup_driver=CgroupDriver.CGROUPFS, topology=None, gates={STRATEGY: True},
        )  # fmt: skip

    def run(self, seconds: float, at: dict[float, Any] | None = None) -> None:
        stop = threading.Event()
        for t, callback in (at or {}).items():
            self.clock.at(t, callback)
        self.clock.at(seconds, stop.set)
        self.manager.run_entry(self.entry, stop)

    def attempts(self) -> list[tuple[float, str, int | None]]:
        """(virtual seconds, outcome, HTTP status) of every API attempt, from the audit log."""
        t0 = START.timestamp()
        return [
            (
                datetime.fromisoformat(a["time"].replace("Z", "+00:00")).timestamp() - t0,
                a["outcome"],
                a["status"],
            )
            for a in self.audit
        ]

    def counter(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, {"node": NODE, **labels}) or 0.0


class _NoHost:
    """The memory-evict strategy writes no host file: an executor that must never be called."""

    def execute(self, actions: Any) -> Any:
        raise AssertionError(f"unexpected host actions {actions}")


def _running_be_pod(core: Any, rest: KubeRest, ns: str, name: str, labels: dict[str, str]) -> Pod:
    core.create_namespaced_pod(ns, {
        "metadata": {"name": name, "labels": {"koordinator.sh/qosClass": "BE", **labels}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
    })  # fmt: skip
    # No kubelet here: report the pod Running as it would (1.20 ignores PDBs for Pending pods).
    core.patch_namespaced_pod_status(name, ns, {"status": {"phase": "Running", "qosClass": "BestEffort"}})
    pod: Pod = rest.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return pod


def _events(core: Any, ns: str, name: str) -> list[str]:
    return [
        e.reason for e in core.list_namespaced_event(ns, field_selector=f"involvedObject.name={name}").items
    ]


def test_pdb_429_is_retried_at_the_cool_down_pace_then_evicted_once(
    rest: KubeRest, kube: Any, namespace: str
) -> None:
    core = client.CoreV1Api(kube)
    ns = namespace
    pod = _running_be_pod(core, rest, ns, "guarded", {"app": "guarded"})
    pdb = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}  # fmt: skip
    rest.request("POST", f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets", pdb)
    loop = EvictLoop(rest, pod)
    unguard = {
        30.0: lambda: rest.request(
            "DELETE", f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/guard"
        )
    }
    loop.run(60.0, unguard)

    attempts = loop.attempts()
    refused = [a for a in attempts if a[1] == "pending"]
    assert all(status == 429 for _, _, status in refused)
    # One request per cool-down (4 s), not per 1 s tick: 0, 4, …, 28 s while the budget holds.
    assert 5 <= len(refused) <= 8, attempts
    times = [t for t, _, _ in attempts]
    assert all(later - earlier >= 4.0 for earlier, later in itertools.pairwise(times)), times
    [(evicted_at, outcome, status)] = [a for a in attempts if a[1] != "pending"]
    assert (outcome, status) == ("evicted", None) and 30.0 < evicted_at <= 35.0
    assert attempts[-1][1] == "evicted"  # evicted once: no request after it (the pod is pending release)
    assert loop.entry.failures == 0 and loop.entry.ticks >= 55

    assert loop.counter("koordlet_pod_eviction_total", reason="evicted") == 1.0
    by = {"strategy": STRATEGY, "reason": "evicted"}
    assert loop.counter("koordlet_eviction_attempts_total", outcome="pending", **by) == len(refused)
    assert loop.counter("koordlet_eviction_attempts_total", outcome="evicted", **by) == 1.0
    live: Any = core.read_namespaced_pod("guarded", ns)
    assert live.metadata.deletion_timestamp is not None  # graceful deletion: no kubelet here to finish it
    # 429s raise evictPodFail at most once a minute; the success once.
    assert sorted(_events(core, ns, "guarded")) == ["evictPodFail", "evictPodSuccess"]


def test_500_is_retried_with_a_growing_backoff_then_evicted_once(
    rest: KubeRest, kube: Any, namespace: str
) -> None:
    core = client.CoreV1Api(kube)
    ns = namespace
    pod = _running_be_pod(core, rest, ns, "victim", {})
    failing = FailingEvictions(rest._pool, failures=4)
    rest._pool = failing  # type: ignore[assignment]
    loop = EvictLoop(rest, pod)
    loop.run(120.0)

    attempts = loop.attempts()
    failed = [a for a in attempts if a[1] == "failed"]
    assert [status for _, _, status in failed] == [500] * 4 and failing.refused == 4
    times = [t for t, _, _ in attempts]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    # 5 s after the first failure, then 10, 20, 40 (each at least; the 4 s cool-down rounds them up).
    assert all(gap >= 5.0 * 2**i for i, gap in enumerate(gaps)), times
    assert [outcome for _, outcome, _ in attempts] == ["failed"] * 4 + ["evicted"], attempts
    assert loop.entry.failures == 0

    by = {"strategy": STRATEGY, "reason": "evicted"}
    assert loop.counter("koordlet_eviction_attempts_total", outcome="failed", **by) == 4.0
    assert loop.counter("koordlet_eviction_attempts_total", outcome="evicted", **by) == 1.0
    assert loop.counter("koordlet_pod_eviction_total", reason="evicted") == 1.0
    victim: Any = core.read_namespaced_pod("victim", ns)
    assert victim.metadata.deletion_timestamp is not None
    # One Event per real attempt: four failures, one success; none for the rounds spent backing off.
    assert sorted(_events(core, ns, "victim")) == ["evictPodFail"] * 4 + ["evictPodSuccess"]
