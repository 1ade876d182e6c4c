"""BE memory eviction on the real node
(docs/rules/koordlet.md#memory-eviction-gates-bememoryevict-memoryallocatableevict-memoryevict-every-1-s,
docs/rules/koordlet.md#how-a-pod-is-evicted): a BE pod allocates HOG_PERCENT of the node's memory (busybox
``dd`` holding one large buffer while blocked on a pipe) under a NodeSLO threshold nothing reaches; once
its memory is resident, the NodeSLO's ``memoryEvictThresholdPercent`` is set halfway between the node's
usage with and without it (/proc/meminfo, as the koordlet's node_memory_usage: MemTotal − MemAvailable).
The koordlet evicts it through the Eviction API, kubelet stops it, an ``evictPodSuccess`` Event is on the
pod, a sleeping LS pod is untouched, and the koordlet's own samples show the usage it acted on at or above
the threshold. A second BE hog covered by a PodDisruptionBudget (minAvailable 1; kube-controller-manager
computes its status) is refused (429) round after round and keeps running; no eviction of it is counted.

The host's memory is shared with other test runs, so thresholds are set from the usage measured while
the hog is resident, with half the hog (or, for the refused hog, half the usage) as margin, and the
waits allow for the 4 s cool-down after each round on a busy machine.
"""

from __future__ import annotations

import math
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import SLO_GROUP, SLO_VERSION
from koord.localcluster.podspec import SLEEP_FOREVER
from tests.e2e.agenthelpers import audit_records, meminfo, node_memory_usage_percent, running_koordlet
from tests.e2e.conftest import RealNode, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]

GATES = "--feature-gates=BEMemoryEvict=true,BECPUSuppress=false,CPUBurst=false"
# Start with a threshold nothing reaches; each test lowers it once its hog's memory is resident.
IDLE_SLO: dict[str, Any] = {
    "resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": 99}
}
HOG_PERCENT = 6.0
"""The hog's share of the node's memory: the threshold sits HOG_PERCENT / 2 below the usage with it, so
the rest of the host may free that much meanwhile (other test runs) and the hog still crosses it."""
# The strategy rests this long after every round that asked for an eviction, refused or not
# (docs/rules/koordlet.md#memory-eviction-gates-bememoryevict-memoryallocatableevict-memoryevict-every-1-s).
COOL_DOWN_S = 4.0
BE_LABELS = {"koordinator.sh/qosClass": "BE"}


def _percent_of_node(mib: int) -> float:
    return mib * 2**20 * 100 / meminfo()["MemTotal"]


def _hog_mib() -> int:
    m = meminfo()
    hog = max(64, math.ceil(m["MemTotal"] * HOG_PERCENT / 100 / 2**20))
    if m["MemAvailable"] < 3 * hog * 2**20:
        pytest.skip(f"only {m['MemAvailable'] >> 20} MiB available: a {hog} MiB hog would squeeze the host")
    return hog


def _hog_command(mib: int) -> list[str]:
    # dd allocates one bs-sized buffer and fills it from /dev/zero (resident, anonymous: in the pod's memcg
    # and out of MemAvailable); sleep never reads the pipe, so dd blocks holding it. TERM ends the shell
    # (PID 1), which takes the rest of the container with it.
    return [
        "/bin/sh",
        "-c",
        f"trap 'exit 0' TERM; dd if=/dev/zero bs={mib}M count=1 2>/dev/null | sleep 1000000 & wait",
    ]


def _set_threshold(env: dict[str, Any], percent: int) -> None:
    env["custom"].patch_cluster_custom_object(
        SLO_GROUP, SLO_VERSION, "nodeslos", env["node"],
        {"spec": {"resourceUsedThresholdWithBE": {"enable": True, "memoryEvictThresholdPercent": percent}}},
    )  # fmt: skip
    agent = env["agent"]

    def seen() -> bool:
        slo = agent.states.node_slo()
        s = slo.resource_used_threshold_with_be if slo is not None else None
        return s is not None and s.memory_evict_threshold_percent == percent

    wait_for(f"the koordlet to see memoryEvictThresholdPercent={percent}", seen, 20)


def _running(core: Any, namespace: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, namespace)
    return pod if pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None else None


def _events(core: Any, namespace: str, name: str, reason: str) -> list[Any]:
    return [
        e
        for e in core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        if e.reason == reason
    ]


def _evictions_of(agent: Any, pod_name: str) -> float:
    """Σ koordlet_pod_eviction_detail_total over the series of ``pod_name``."""
    total = 0.0
    for family in agent.registry.collect():
        for sample in family.samples:
            if (
                sample.name == "koordlet_pod_eviction_detail_total"
                and sample.labels.get("pod_name") == pod_name
            ):
                total += sample.value
    return total


def _policy_version(real_node: RealNode) -> str:
    """``v1`` when the API server serves policy/v1 PodDisruptionBudgets, else ``v1beta1``."""
    groups = client.ApisApi(real_node.api).get_api_versions().groups
    versions = {v.version for g in groups if g.name == "policy" for v in g.versions}
    return "v1" if "v1" in versions else "v1beta1"


def _start_ls(real_node: RealNode, namespace: str, name: str) -> str:
    real_node.core.create_namespaced_pod(namespace, real_node.pod(
        name, namespace=namespace, qos="Burstable", command=SLEEP_FOREVER,
    ))  # fmt: skip
    return str(
        wait_for("the LS pod running", lambda: _running(real_node.core, namespace, name), 60).metadata.uid
    )


def _hog_resident(agent: Any, name: str, mib: int) -> bool:
    """The hog's memory is in the pod's cgroup (the koordlet's last pod_memory_usage sample)."""
    pods = [p for p in agent.states.pods() if p.name == name]
    if not pods:
        return False
    now = int(time.time() * 1000)
    try:
        res = agent.cache.query("pod_memory_usage", {"pod_uid": pods[0].uid}, now - 3000, now)
    except Exception:
        return False
    return bool(res.count()) and res.last() >= 0.9 * mib * 2**20


def test_be_memory_hog_evicted(real_node: RealNode, e2e_namespace: str, tmp_path: Path) -> None:
    core = real_node.core
    tag = uuid.uuid4().hex[:6]
    hog, ls = f"hog-{tag}", f"ls-{tag}"
    mib = _hog_mib()
    with running_koordlet(real_node, tmp_path, IDLE_SLO, [GATES]) as env:
        agent = env["agent"]
        wait_for("koordlet ready", lambda: agent.ready, 30)
        ls_uid = _start_ls(real_node, e2e_namespace, ls)

        hog_uid = core.create_namespaced_pod(e2e_namespace, real_node.pod(
            hog, namespace=e2e_namespace, qos="BestEffort", command=_hog_command(mib), labels=BE_LABELS,
        )).metadata.uid  # fmt: skip
        wait_for("the hog's memory resident in its cgroup", lambda: _hog_resident(agent, hog, mib), 60)
        with_hog = node_memory_usage_percent()
        threshold = int(with_hog - _percent_of_node(mib) / 2)
        set_at = int(time.time() * 1000)
        _set_threshold(env, threshold)

        def evicted() -> bool:
            try:
                pod = core.read_namespaced_pod(hog, e2e_namespace)
            except ApiException as e:
                return bool(e.status == 404)
            return bool(pod.metadata.uid != hog_uid or pod.status.phase == "Failed")

        wait_for(
            f"the BE hog ({mib} MiB; usage {with_hog:.1f}% with it → threshold {threshold}%) evicted",
            evicted,
            60,
            0.5,
        )
        # The koordlet acted on what it measured: a sample of its own at or above the threshold.
        seen = agent.cache.query("node_memory_usage", {}, set_at, int(time.time() * 1000))
        peak = int(seen.percentile(1.0) * 100 / meminfo()["MemTotal"]) if seen.count() else None
        assert peak is not None and peak >= threshold, f"evicted at {peak}% under the threshold {threshold}%"

        audit = [a for a in audit_records(env["audit"]) if a.get("action") == "evictPod"]
        hog_records = [a for a in audit if a["pod"]["uid"] == hog_uid]
        assert any(a["outcome"] == "evicted" for a in hog_records), f"no audited eviction of the hog: {audit}"
        assert all(a["pod"]["uid"] != ls_uid for a in audit), "the LS pod was an eviction candidate"
        assert {a["strategy"] for a in hog_records} <= {"BEMemoryEvict", "memoryEvict"}, hog_records
        wait_for(
            "the evictPodSuccess Event on the hog",
            lambda: _events(core, e2e_namespace, hog, "evictPodSuccess"),
            10,
        )
        assert _evictions_of(agent, hog) >= 1
        # The LS pod is untouched.
        ls_pod = _running(core, e2e_namespace, ls)
        assert ls_pod is not None and ls_pod.metadata.uid == ls_uid
        assert not _events(core, e2e_namespace, ls, "evictPodSuccess")


def test_pdb_protected_be_hog_not_evicted(real_node: RealNode, e2e_namespace: str, tmp_path: Path) -> None:
    core = real_node.core
    custom = client.CustomObjectsApi(real_node.api)
    pdb_version = _policy_version(real_node)
    tag = uuid.uuid4().hex[:6]
    hog, ls = f"pdbhog-{tag}", f"ls-{tag}"
    app = {"app": f"pdb-{tag}"}
    mib = _hog_mib()
    with running_koordlet(real_node, tmp_path, IDLE_SLO, [GATES]) as env:
        agent = env["agent"]
        wait_for("koordlet ready", lambda: agent.ready, 30)
        ls_uid = _start_ls(real_node, e2e_namespace, ls)
        custom.create_namespaced_custom_object("policy", pdb_version, e2e_namespace, "poddisruptionbudgets", {
            "apiVersion": f"policy/{pdb_version}", "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{tag}"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": app}},
        })  # fmt: skip
        core.create_namespaced_pod(e2e_namespace, real_node.pod(
            hog, namespace=e2e_namespace, qos="BestEffort", command=_hog_command(mib),
            labels={**BE_LABELS, **app},
        ))  # fmt: skip
        hog_uid = wait_for("the BE hog running", lambda: _running(core, e2e_namespace, hog), 60).metadata.uid

        def pdb_blocks() -> bool:
            pdb: Any = custom.get_namespaced_custom_object(
                "policy", pdb_version, e2e_namespace, "poddisruptionbudgets", f"pdb-{tag}"
            )
            st = pdb.get("status") or {}
            return bool(st.get("currentHealthy") == 1 and st.get("disruptionsAllowed") == 0)

        wait_for("kube-controller-manager's PDB status (1 healthy, 0 disruptions allowed)", pdb_blocks, 30)
        wait_for("the hog's memory resident in its cgroup", lambda: _hog_resident(agent, hog, mib), 20)

        # Well under the usage (the hog included): every round asks, however the rest of the host moves.
        threshold = max(1, int(node_memory_usage_percent() / 2))
        _set_threshold(env, threshold)

        def refusals() -> list[dict[str, Any]]:
            return [
                a
                for a in audit_records(env["audit"])
                if a.get("action") == "evictPod" and a["pod"]["uid"] == hog_uid and a["outcome"] == "pending"
            ]

        rounds = 4  # one per cool-down and tick; a busy host's ticks run late
        wait_for(
            f"{rounds} refused eviction rounds",
            lambda: len(refusals()) >= rounds,
            3 * rounds * (COOL_DOWN_S + 1.0),
            0.5,
        )
        refused = refusals()
        assert all(a["status"] == 429 for a in refused), refused
        outcomes = {
            a["outcome"]
            for a in audit_records(env["audit"])
            if a.get("action") == "evictPod" and a["pod"]["uid"] == hog_uid
        }
        assert outcomes == {"pending"}, outcomes
        pod = _running(core, e2e_namespace, hog)
        assert pod is not None and pod.metadata.uid == hog_uid, "the PDB-protected hog did not survive"
        assert _evictions_of(agent, hog) == 0
        assert not _events(core, e2e_namespace, hog, "evictPodSuccess")
        # One evictPodFail Event per minute at most for the 429s.
        assert 1 <= len(_events(core, e2e_namespace, hog, "evictPodFail")) <= 2
        ls_pod = _running(core, e2e_namespace, ls)
        assert ls_pod is not None and ls_pod.metadata.uid == ls_uid
