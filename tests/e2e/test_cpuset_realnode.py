"""CPU orchestration on the real node (docs/rules/scheduler-nodenumaresource.md,
docs/rules/koordlet-topology.md, docs/rules/koordlet-cpuset.md): the koordlet reports the node's CPU
topology as its NodeResourceTopology; koord-scheduler with NodeNUMAResource gives an LSR pod whole cores —
the cpuset `koord simulate` (kind CPUSet, operation takeCPUs) computes from that reported topology — in its
`resource-status` annotation; the koordlet writes that cpuset into the container's cgroup, takes the CPUs out
of the LS share pool (an LS container's cpuset shrinks; the NRT's pools say so, and the BE pool keeps LSR
CPUs), and when the LSR pod goes the CPUs return to the LS pool within one reconcile interval. An LSE pod's
CPUs leave the BE pool too.

First an LSR pod of 2 integer CPUs alone gets its whole cores. This machine has two CPUs and CI has two
cores, where such a pod holds every CPU and would leave the LS pool empty, so the pool part that follows uses
an LSR pod of all CPUs but one (at most 2); on a bigger host it is 2 whole cores again.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.qosmanager.cpusetalloc import CPUSetAllocatorStrategy
from agent.system.podcgroup import CgroupDriver, KubeQOS, container_cgroup_dir, pod_cgroup_dir
from apis import numa
from apis.cpuset import format_cpuset, parse_cpuset
from koord.simulate import simulate_scenario
from scheduler.config import parse_config
from scheduler.registry import KNOWN
from tests.e2e.agenthelpers import running_koordlet
from tests.e2e.conftest import RealNode, wait_for
from tests.helpers.scheduler import running_scheduler

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

SCHEDULER = "koord-scheduler"
NRT = ("topology.node.k8s.io", "v1alpha1", "noderesourcetopologies")
RECONCILE_S = CPUSetAllocatorStrategy.interval_seconds


def _config() -> Any:
    """A profile with NodeNUMAResource where Koordinator's chart puts it. LoadAwareScheduling is off: the
    real node's usage is the whole shared host's, which may be over its threshold."""
    plugins: dict[str, Any] = {
        point: {"enabled": [{"name": "NodeNUMAResource"}], "disabled": [{"name": "LoadAwareScheduling"}]}
        for point in ("preFilter", "filter", "reserve", "preBind")
    }
    plugins["score"] = {
        "enabled": [{"name": "NodeNUMAResource", "weight": 1}],
        "disabled": [{"name": "LoadAwareScheduling"}],
    }
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": SCHEDULER, "plugins": plugins}],
        },
        KNOWN,
    )


def _nrt_annotations(custom: Any, node: str) -> dict[str, str] | None:
    try:
        obj = custom.get_cluster_custom_object(*NRT, node)
    except client.ApiException as e:
        if e.status == 404:
            return None
        raise
    ann = (obj.get("metadata") or {}).get("annotations") or {}
    return ann if numa.ANNOTATION_CPU_TOPOLOGY in ann else None


def _pool_cpus(ann: dict[str, str], key: str) -> frozenset[int]:
    pools = json.loads(ann.get(key) or "[]")
    return frozenset().union(*(parse_cpuset(p.get("cpuset", "")) for p in pools))


def _cpuset_file(real_node: RealNode, pod: Any) -> Path:
    qos = KubeQOS(pod.status.qos_class)
    pod_dir = pod_cgroup_dir(CgroupDriver.CGROUPFS, qos, pod.metadata.uid)
    cdir = container_cgroup_dir(CgroupDriver.CGROUPFS, pod_dir, pod.status.container_statuses[0].container_id)
    v1 = real_node.cgroup_root / "cpuset" / cdir / "cpuset.cpus"
    return v1 if v1.parent.is_dir() else real_node.cgroup_root / cdir / "cpuset.cpus"


def _running(core: Any, ns: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, ns)
    ok = pod.status.phase == "Running" and pod.status.container_statuses
    return pod if ok and pod.status.container_statuses[0].container_id else None


def _wait_running(core: Any, ns: str, name: str, timeout: float = 90) -> Any:
    """The pod once Running; on a timeout the failure says where it stuck (conditions, container states)."""
    try:
        return wait_for(f"pod {name} running", lambda: _running(core, ns, name), timeout=timeout)
    except AssertionError as e:
        status = core.read_namespaced_pod(name, ns).status
        where = f"conditions={status.conditions} containers={status.container_statuses}"
        raise AssertionError(f"{e}: {where}") from None


def _gone(core: Any, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, ns)
    except client.ApiException as e:
        return bool(e.status == 404)
    return False


def _cpus_of(real_node: RealNode, core: Any, ns: str, name: str) -> frozenset[int]:
    pod = _running(core, ns, name)
    if pod is None:
        return frozenset({-1})  # restarted or gone: never equal to an expected set
    try:
        return parse_cpuset(_cpuset_file(real_node, pod).read_text().strip())
    except OSError:
        return frozenset({-1})


def _take_cpus(topology: str, need: int, allocated: list[dict[str, str]]) -> str:
    """What `koord simulate` says the scheduler's accumulator picks (v1 defaults: FullPCPUs, no exclusivity,
    LeastAllocated NUMA strategy, MaxRefCount 1)."""
    result = simulate_scenario({
        "kind": "CPUSet", "operation": "takeCPUs", "cpuTopology": json.loads(topology),
        "allocatedPods": allocated, "numCPUsNeeded": need, "cpuBindPolicy": "FullPCPUs",
        "cpuExclusivePolicy": "None", "numaAllocateStrategy": "LeastAllocated",
    })  # fmt: skip
    assert result["error"] is None, result
    return str(result["cpuset"])


def _pod(real_node: RealNode, ns: str, name: str, qos_label: str, cpus: int) -> dict[str, Any]:
    return real_node.pod(
        name, namespace=ns, qos="Guaranteed", labels={"koordinator.sh/qosClass": qos_label},
        scheduler_name=SCHEDULER, priority_class_name="koord-prod", grace_period_seconds=0,
        resources={"requests": {"cpu": str(cpus), "memory": "32Mi"},
                   "limits": {"cpu": str(cpus), "memory": "32Mi"}},
    )  # fmt: skip


def test_lsr_pod_gets_whole_cores_and_gives_them_back(
    real_node: RealNode, e2e_namespace: str, tmp_path: Path
) -> None:
    core, ns = real_node.core, e2e_namespace
    custom = client.CustomObjectsApi(real_node.api)
    paths = real_node.node.paths
    args = [
        f"--kubelet-config-file={paths.config / 'kubelet-config.yaml'}",
        f"--kubelet-root-dir={paths.kubelet}",
        "--node-topology-sync-interval=1s",
    ]
    with (
        running_koordlet(real_node, tmp_path, args=args),
        running_scheduler(real_node.api, _config(), bind_workers=2),
    ):
        node = real_node.node_name
        ann = wait_for("the node's NodeResourceTopology", lambda: _nrt_annotations(custom, node), timeout=60)
        topology = ann[numa.ANNOTATION_CPU_TOPOLOGY]
        all_cpus = frozenset(d["id"] for d in json.loads(topology)["detail"])
        assert json.loads(ann[numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY])["policy"] == "none"
        assert _pool_cpus(ann, numa.ANNOTATION_CPU_SHARED_POOLS) == all_cpus
        need = min(2, len(all_cpus) - 1)
        tag = uuid.uuid4().hex[:6]

        # First an LSR pod of 2 integer CPUs alone: whole cores as koord simulate says, in its cgroup.
        two = f"lsr2-{tag}"
        core.create_namespaced_pod(ns, _pod(real_node, ns, two, "LSR", 2))
        pod = _wait_running(core, ns, two)
        expected2 = _take_cpus(topology, 2, [])
        assert json.loads(pod.metadata.annotations[numa.ANNOTATION_RESOURCE_STATUS])["cpuset"] == expected2
        assert len(parse_cpuset(expected2)) == 2
        wait_for("the 2-CPU LSR container's cgroup cpuset",
                 lambda: _cpus_of(real_node, core, ns, two) == parse_cpuset(expected2),
                 timeout=3 * RECONCILE_S)  # fmt: skip
        core.delete_namespaced_pod(two, ns, grace_period_seconds=0)
        wait_for("the 2-CPU LSR pod gone", lambda: _gone(core, ns, two), timeout=60)

        # An LS container (Burstable, bound by kubelet directly) follows the LS share pool.
        ls = f"ls-{tag}"
        ls_labels = {"koordinator.sh/qosClass": "LS"}
        core.create_namespaced_pod(
            ns, real_node.pod(ls, namespace=ns, qos="Burstable", labels=ls_labels, grace_period_seconds=0)
        )
        _wait_running(core, ns, ls)

        # The LSR pod: whole cores, as koord simulate computes them from the reported topology.
        lsr = f"lsr-{tag}"
        core.create_namespaced_pod(ns, _pod(real_node, ns, lsr, "LSR", need))
        pod = _wait_running(core, ns, lsr)
        status = json.loads(pod.metadata.annotations[numa.ANNOTATION_RESOURCE_STATUS])
        expected = _take_cpus(topology, need, [])
        assert status["cpuset"] == expected
        lsr_cpus = parse_cpuset(expected)
        assert len(lsr_cpus) == need
        wait_for("the LSR container's cgroup cpuset", lambda: _cpus_of(real_node, core, ns, lsr) == lsr_cpus,
                 timeout=3 * RECONCILE_S)  # fmt: skip
        rest = all_cpus - lsr_cpus
        wait_for("the LS container outside the LSR CPUs", lambda: _cpus_of(real_node, core, ns, ls) == rest,
                 timeout=3 * RECONCILE_S)  # fmt: skip

        def pools_without_lsr() -> dict[str, str] | None:
            a = _nrt_annotations(custom, node) or {}
            return a if a and _pool_cpus(a, numa.ANNOTATION_CPU_SHARED_POOLS) == rest else None

        ann = wait_for("the NRT's LS pool without the LSR CPUs", pools_without_lsr, timeout=30)
        assert _pool_cpus(ann, numa.ANNOTATION_BE_CPU_SHARED_POOLS) == all_cpus  # LSR CPUs stay BE's

        # Deleting the LSR pod gives its CPUs back to the LS pool within one reconcile interval.
        core.delete_namespaced_pod(lsr, ns, grace_period_seconds=0)

        wait_for("the LSR pod gone", lambda: _gone(core, ns, lsr), timeout=60)
        t0 = time.monotonic()
        wait_for("the LS container back on every CPU", lambda: _cpus_of(real_node, core, ns, ls) == all_cpus,
                 timeout=2 * RECONCILE_S + 5)  # fmt: skip
        print(f"LS pool restored {time.monotonic() - t0:.1f}s after the LSR pod was gone")

        # An LSE pod's CPUs leave the BE pool as well (docs/rules/koordlet-cpuset.md#share-pools).
        lse = f"lse-{tag}"
        core.create_namespaced_pod(ns, _pod(real_node, ns, lse, "LSE", 1))
        pod = _wait_running(core, ns, lse)
        lse_cpus = parse_cpuset(
            json.loads(pod.metadata.annotations[numa.ANNOTATION_RESOURCE_STATUS])["cpuset"]
        )
        assert format_cpuset(lse_cpus) == _take_cpus(topology, 1, [])

        def be_pool_without_lse() -> bool:
            a = _nrt_annotations(custom, node) or {}
            return bool(a) and _pool_cpus(a, numa.ANNOTATION_BE_CPU_SHARED_POOLS) == all_cpus - lse_cpus

        wait_for("the NRT's BE pool without the LSE CPU", be_pool_without_lse, timeout=30)
        core.delete_namespaced_pod(lse, ns, grace_period_seconds=0)
