"""koordlet on the real node: it finds the pod and container cgroups kubelet made, measures a real
CPU-burning container (matching cpuacct to within 5 %, plus the burner's own swing over the window when
other load on the host moves it), classes a BestEffort pod as BE, streams reports to a real MetricHub and
writes the NodeMetric status to the real API server on its own schedule, reading the host's real /proc.
Its first sample of the container is due within two of its collect rounds as long as they really take.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.daemon import Koordlet
from agent.system.cgroup import CPU_USAGE, read_cgroup
from agent.system.podcgroup import CgroupDriver
from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from apis.quantity import Quantity
from koord.localcluster.podspec import BURN_CPU
from manager.metrichub.store import HubStore
from tests.e2e.agenthelpers import running_koordlet
from tests.e2e.conftest import RealNode, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

INTERVAL = 1.0


@pytest.fixture()
def koordlet(real_node: RealNode, e2e_namespace: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    with running_koordlet(real_node, tmp_path) as env:
        yield env


def test_koordlet_measures_real_pods(
    real_node: RealNode, e2e_namespace: str, koordlet: dict[str, Any]
) -> None:
    agent: Koordlet = koordlet["agent"]
    core = real_node.core
    assert agent.driver is CgroupDriver(real_node.cgroup_driver)
    wait_for("koordlet ready", lambda: agent.ready, 30)
    tag = uuid.uuid4().hex[:6]
    burner, idler = f"burn-{tag}", f"be-{tag}"
    core.create_namespaced_pod(e2e_namespace, real_node.pod(
        burner, namespace=e2e_namespace, qos="Burstable", command=BURN_CPU,
        resources={"requests": {"cpu": "100m", "memory": "16Mi"},
                   "limits": {"cpu": "500m", "memory": "32Mi"}},
    ))  # fmt: skip
    core.create_namespaced_pod(e2e_namespace, real_node.pod(
        idler, namespace=e2e_namespace, qos="BestEffort", labels={"koordinator.sh/qosClass": "BE"},
    ))  # fmt: skip

    def metas() -> dict[str, Any] | None:
        found = {p.name: p for p in agent.states.pods() if p.namespace == e2e_namespace}
        ok = {burner, idler} <= set(found) and all(found[n].containers for n in (burner, idler))
        return found if ok else None

    found = wait_for("both pods Running with container IDs in the agent's informer", metas, 90)
    seen_at = time.time()
    burn = found[burner]
    # The cgroups were derived from UID + QoS + container ID (no tree walk) and are kubelet's own.
    assert (real_node.cgroup_root / "cpuacct" / burn.cgroup_dir).is_dir()
    assert (real_node.cgroup_root / "cpuacct" / burn.containers[0].cgroup_dir).is_dir()
    assert found[idler].kube_qos.value == "BestEffort"

    def sample() -> bool:
        now_ms = int(time.time() * 1000)
        return agent.cache.query("pod_cpu_usage", {"pod_uid": burn.uid}, now_ms - 10_000, now_ms).count() > 0

    wait_for("the burner's first CPU sample", sample, 10, 0.05)
    # Within 2 collect rounds of the container being known, a round being as long as the koordlet's rounds
    # really are now (late on a busy machine), plus scheduling slack.
    took = time.time() - seen_at
    now_ms = int(time.time() * 1000)
    stamps = sorted(agent.cache.query("node_cpu_usage", {}, now_ms - 10_000, now_ms).timestamps.tolist())
    round_s = max([INTERVAL, *((b - a) / 1000 for a, b in itertools.pairwise(stamps))])
    assert took <= 2 * round_s + 1.0, f"first sample {took:.1f}s after the container; {round_s:.1f}s rounds"

    # Agreement with cpuacct measured by the test itself over the same window.
    def cpuacct() -> tuple[float, int]:
        return time.time(), read_cgroup(
            real_node.cgroup_root, agent.cgroup_version, CPU_USAGE, burn.cgroup_dir
        )

    time.sleep(2.5)
    t0, u0 = cpuacct()
    time.sleep(3.0)
    tm, um = cpuacct()
    time.sleep(3.0)
    t1, u1 = cpuacct()
    truth = (u1 - u0) / 1e9 / (t1 - t0)
    assert truth > 0.05, f"the burner used only {truth:.3f} cores"
    # On a busy host the burner's rate moves with the background: the koordlet's intervals do not line up
    # exactly with the test's, so the rate's own swing between the two halves adds to the 5 %.
    swing = abs((um - u0) / (tm - t0) - (u1 - um) / (t1 - tm)) / 1e9
    # Samples stamped inside [t0+1s, t1] cover intervals inside [t0, t1].
    res = agent.cache.query("pod_cpu_usage", {"pod_uid": burn.uid}, int(t0 * 1000) + 1000, int(t1 * 1000))
    assert res.count() >= 3
    assert abs(res.avg() - truth) <= 0.05 * truth + swing, (res.avg(), truth, swing)

    # Streamed to the hub: both pods, the BE one classed BE, real /proc node usage.
    store: HubStore = koordlet["store"]
    node = koordlet["node"]

    def report() -> Any:
        items = store.list(node).items
        if not items:
            return None
        pods = {p.name: p for p in items[0].report.status.pods_metric}
        return items[0].report if {burner, idler} <= set(pods) else None

    rep = wait_for("a hub report with both pods", report, 20)
    pods = {p.name: p for p in rep.status.pods_metric}
    assert pods[idler].qos == "BE" and pods[idler].priority == "koord-batch"
    assert Quantity.parse(pods[burner].pod_usage.resources["cpu"]).milli_value() > 100
    node_usage = rep.status.node_metric.node_usage.resources
    assert Quantity.parse(node_usage["cpu"]).milli_value() > 0
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    assert 0 < Quantity.parse(node_usage["memory"]).value() < mem_total

    # The NodeMetric status lands in the API server through the reporter's own loop (first write one
    # 30 s interval after the agent started).
    def cr_status() -> dict[str, Any] | None:
        nm = koordlet["custom"].get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
        status = nm.get("status") or {}
        names = {p["name"] for p in status.get("podsMetric") or []}
        return status if {burner, idler} <= names else None

    status = wait_for("the NodeMetric status written by the reporter loop", cr_status, 75, 1.0)
    assert status["nodeMetric"]["nodeUsage"]["resources"]["cpu"]
    assert [a["duration"] for a in status["nodeMetric"]["aggregatedNodeUsages"]] == ["5m0s", "10m0s", "30m0s"]
    be = next(p for p in status["podsMetric"] if p["name"] == idler)
    assert be["qos"] == "BE" and be["namespace"] == e2e_namespace
