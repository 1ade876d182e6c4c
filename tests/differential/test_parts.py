"""The differential harness's parts without an API server: kube-scheduler's log parser on lines in the
exact formats of 1.20.2, its generated configuration, the seeded generator and the independent checker."""

from __future__ import annotations

from pathlib import Path

import pytest

from koord.localcluster.kubescheduler import parse_log, scheduler_config
from tests.differential.checker import quantity, violations
from tests.differential.generator import ENABLED, FAMILIES, SCORED, generate, scored_plugins
from tests.differential.harness import KNOWN_REASONS, known

H = "I1127 07:45:31.608798   14906 "  # klog's header: severity, date, time, thread id
S = 'factory.go:321] "Unable to schedule pod; no fit; waiting" '
B = 'scheduler.go:592] "Successfully bound pod to node" '
LOG = "\n".join(
    H + line
    for line in (
        "scheduler.go:447] Attempting to schedule pod: default/p1",
        "generic_scheduler.go:504] Plugin TaintToleration scores on default/p1 => "
        "[{n1 100} {n2 100} {n0 100}]",
        "generic_scheduler.go:504] Plugin NodeResourcesLeastAllocated scores on default/p1 => "
        "[{n1 86} {n2 43} {n0 0}]",
        "generic_scheduler.go:560] Host n1 => Score 186",
        "generic_scheduler.go:560] Host n2 => Score 143",
        "scheduler.go:447] Attempting to schedule pod: default/p2",
        "default_binder.go:51] Attempting to bind default/p1 to n2",
        S + 'pod="default/p2" err="0/3 nodes are available: 1 node(s) had taint {k: v}, that the pod '
        "didn't tolerate, 2 node(s) didn't match Pod's node affinity.\"",
        B + 'pod="default/p1" node="n1" evaluatedNodes=3 feasibleNodes=3',
        "scheduler.go:447] Attempting to schedule pod: default/p2",
        S + 'pod="default/p2" err="0/3 nodes are available: 3 Insufficient \\"cpu\\"."',
        "scheduler.go:447] Attempting to schedule pod: default/p3",
        B + 'pod="default/p3" node="n0" evaluatedNodes=3 feasibleNodes=1',
    )
)


def test_parse_log_reads_scores_decisions_and_fit_errors_per_attempt() -> None:
    pods = parse_log(LOG)
    assert set(pods) == {"default/p1", "default/p2", "default/p3"}
    (p1,) = pods["default/p1"]
    assert p1.scores == {
        "TaintToleration": {"n1": 100, "n2": 100, "n0": 100},
        "NodeResourcesLeastAllocated": {"n1": 86, "n2": 43, "n0": 0},
    }
    assert p1.totals == {"n1": 186, "n2": 143}
    assert (p1.node, p1.evaluated, p1.feasible, p1.fit_error) == ("n1", 3, 3, None)
    first, second = pods["default/p2"]
    assert first.fit_error == (
        "0/3 nodes are available: 1 node(s) had taint {k: v}, that the pod didn't tolerate, "
        "2 node(s) didn't match Pod's node affinity."
    )
    assert second.fit_error == '0/3 nodes are available: 3 Insufficient "cpu".'  # %q escapes undone
    assert first.scores == {} and first.node is None
    (p3,) = pods["default/p3"]
    assert (p3.node, p3.feasible, p3.scores) == ("n0", 1, {})


def test_parse_log_skips_lines_without_a_klog_header() -> None:
    assert parse_log("Plugin X scores on a/b => [{n 1}]\nrandom text\n") == {}


def test_scheduler_config_is_the_1_20_format_scoring_every_node() -> None:
    cfg = scheduler_config(Path("/k"), "kube-oracle", 4321)
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1beta1"
    assert cfg["percentageOfNodesToScore"] == 100
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["profiles"] == [{"schedulerName": "kube-oracle"}]
    assert cfg["healthzBindAddress"] == cfg["metricsBindAddress"] == "127.0.0.1:4321"


def test_generator_is_seeded_and_generates_only_the_families_asked() -> None:
    assert generate(7) == generate(7)
    assert generate(7) != generate(8)
    case = generate(7)
    assert case.families == ENABLED
    assert len(case.pending) == 12 and case.nodes
    only = generate(7, frozenset({"resources", "taints"}))
    assert not only.extra
    for pod in [*only.bound, *only.pending]:
        spec = pod["spec"]
        assert "topologySpreadConstraints" not in spec and "priorityClassName" not in spec
        assert not any(c.get("ports") for c in spec["containers"])
        assert "podAffinity" not in (spec.get("affinity") or {})
    with pytest.raises(ValueError, match="unknown"):
        generate(1, frozenset({"nope"}))


def test_every_family_has_a_generator() -> None:
    """Disabled families generate their objects too: enabling one is a one-line change."""
    case = generate(11, frozenset(FAMILIES), nodes=8, bound=12, pending=40)
    kinds = {o["kind"] for o in case.extra}
    assert kinds == {
        "PriorityClass",
        "PodDisruptionBudget",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
    }
    specs = [p["spec"] for p in case.pending]
    assert any(c.get("ports") for s in specs for c in s["containers"])
    assert any(
        "podAffinity" in (s.get("affinity") or {}) or "podAntiAffinity" in (s.get("affinity") or {})
        for s in specs
    )
    assert any(
        "preferredDuringSchedulingIgnoredDuringExecution" in (s.get("affinity") or {}).get("nodeAffinity", {})
        for s in specs
    )
    assert any(s.get("topologySpreadConstraints") for s in specs)
    assert any(s.get("volumes") for s in specs)
    assert any(s.get("priorityClassName") for s in specs)
    assert any(t["effect"] == "PreferNoSchedule" for n in case.nodes for t in n["spec"]["taints"])
    assert set(SCORED) <= set(FAMILIES)
    assert scored_plugins(frozenset({"resources", "taints"})) == {
        "NodeResourcesLeastAllocated": ("NodeResourcesLeastAllocated", "NodeResourcesFit")
    }
    assert {"InterPodAffinity", "PodTopologySpread", "TaintToleration"} <= set(scored_plugins(ENABLED))


def test_without_overcommit_bound_pods_fit_their_nodes() -> None:
    for seed in range(20):
        case = generate(seed, ENABLED - {"overcommit"})
        nodes = {n["metadata"]["name"]: n for n in case.nodes}
        for i, pod in enumerate(case.bound):
            before = [p for p in case.bound[:i] if p["spec"]["nodeName"] == pod["spec"]["nodeName"]]
            bare = {**nodes[pod["spec"]["nodeName"]], "spec": {}}  # resources only: bound pods skip the rest
            assert violations(pod, bare, before) == []


def node(**spec: object) -> dict[str, object]:
    return {"metadata": {"name": "n1", "labels": {"tier": "gold", "gen": "5"}}, "spec": spec,
            "status": {"allocatable": {"cpu": "2", "memory": "1Gi", "pods": "2"}}}  # fmt: skip


def pod(requests: dict[str, str] | None = None, **spec: object) -> dict[str, object]:
    c: dict[str, object] = {"name": "c"}
    if requests:
        c["resources"] = {"requests": requests}
    return {"spec": {"containers": [c], **spec}}


def test_checker_finds_each_broken_constraint() -> None:
    assert violations(pod({"cpu": "1"}), node(), []) == []
    assert violations(pod(), node(unschedulable=True), []) == ["node is unschedulable"]
    tolerate = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert violations(pod(tolerations=tolerate), node(unschedulable=True), []) == []
    taint = {"key": "k", "value": "v", "effect": "NoExecute"}
    assert violations(pod(), node(taints=[taint]), []) == [f"untolerated taint {taint}"]
    assert violations(pod(tolerations=[{"key": "k", "value": "v"}]), node(taints=[taint]), []) == []
    assert violations(pod(tolerations=[{"key": "k", "value": "w"}]), node(taints=[taint]), []) != []
    assert violations(pod(tolerations=[{"operator": "Exists"}]), node(taints=[taint]), []) == []
    soft = {"key": "k", "effect": "PreferNoSchedule"}
    assert violations(pod(), node(taints=[soft]), []) == []
    assert violations(pod(nodeSelector={"tier": "silver"}), node(), []) == ["nodeSelector tier=silver"]

    def terms(*t: object) -> dict[str, object]:
        return {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(t)}}
        }

    gt4 = {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]}
    lt4 = {"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["4"]}]}
    name = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
    assert violations(pod(affinity=terms(gt4)), node(), []) == []
    assert violations(pod(affinity=terms(lt4)), node(), []) == ["required node affinity"]
    assert violations(pod(affinity=terms(lt4, gt4)), node(), []) == []  # terms are ORed
    assert violations(pod(affinity=terms(name)), node(), []) == ["required node affinity"]
    assert violations(pod(affinity=terms({})), node(), []) == ["required node affinity"]
    full = [pod({"cpu": "1500m"}), pod()]
    assert violations(pod(), node(), full) == ["pod count"]
    assert violations(pod({"cpu": "600m"}), node(), full[:1]) == ["cpu: 3/2 used + 3/5 > 2"]
    init = pod(
        {"memory": "1Gi"}, initContainers=[{"name": "i", "resources": {"requests": {"memory": "2Gi"}}}]
    )
    assert violations(init, node(), []) == [f"memory: 0 used + {2**31} > {2**30}"]


def test_checker_quantities() -> None:
    assert quantity("1500m") == quantity("1.5") and quantity("2Gi") == 2 * 1024**3 and quantity("3k") == 3000
    with pytest.raises(ValueError):
        quantity("1e3")


def test_known_reasons_only_rewrite_koords_wording() -> None:
    for koord_reason, kube_reason in KNOWN_REASONS.items():
        assert (
            known(f"0/1 nodes are available: 1 {koord_reason}.")
            == f"0/1 nodes are available: 1 {kube_reason}."
        )
    assert (
        known("0/1 nodes are available: 1 Insufficient cpu.")
        == "0/1 nodes are available: 1 Insufficient cpu."
    )
