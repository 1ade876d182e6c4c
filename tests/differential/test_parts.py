"""The differential harness's parts without an API server: kube-scheduler's log parser on lines in the
exact formats of 1.20.2, its generated configuration, the seeded generator and the independent checker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koord.localcluster.kubescheduler import parse_log, scheduler_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.defaultpreemption.victims import Candidate, Victims
from tests.differential.checker import Cluster, bound_claim_violations, quantity, violations
from tests.differential.controllers import pdb_status
from tests.differential.generator import ENABLED, FAMILIES, SCORED, generate, scored_plugins
from tests.differential.harness import KNOWN_REASONS, WORKLOADS, known, koord_config
from tests.differential.inprocess import InProcess
from tests.differential.preemption import compare, tied_best

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
    storage = {"StorageClass", "PersistentVolume", "PersistentVolumeClaim"}
    assert {"PriorityClass", "PodDisruptionBudget", *storage, "Service", "ReplicaSet"} <= kinds
    assert kinds <= {"PriorityClass", "PodDisruptionBudget", *storage, *WORKLOADS}
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


# --- the checker's cluster rules ---------------------------------------------------------------------
def knode(name: str, zone: str, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone, **labels}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}},
    }


def kpod(name: str, node: str | None = None, ns: str = "a", **spec: Any) -> dict[str, Any]:
    labels = spec.pop("labels", {})
    s: dict[str, Any] = {"containers": [{"name": "c"}], **spec}
    if node:
        s["nodeName"] = node
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": s}


def term(app: str, key: str = "zone", namespaces: list[str] | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    if namespaces:
        t["namespaces"] = namespaces
    return t


def required(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


NODES = [knode("n1", "z1"), knode("n2", "z1"), knode("n3", "z2")]


def check(pod: dict[str, Any], node: str, pods: list[dict[str, Any]], **storage: Any) -> list[str]:
    cluster = Cluster(NODES, pods, **storage)
    by_name = {n["metadata"]["name"]: n for n in NODES}
    return violations(pod, by_name[node], [p for p in pods if p["spec"].get("nodeName") == node], cluster)


def test_checker_pod_affinity_needs_a_matching_pod_in_the_domain() -> None:
    web = kpod("w", "n1", labels={"app": "web"})
    pod = kpod("p", affinity=required("podAffinity", term("web")), labels={"app": "db"})
    assert check(pod, "n2", [web]) == []  # same zone
    assert check(pod, "n3", [web]) == ["pod affinity {'matchLabels': {'app': 'web'}} over zone"]
    elsewhere = [{**web, "metadata": {**web["metadata"], "namespace": "b"}}]
    assert check(pod, "n2", elsewhere) != []  # the term looks in the pod's namespace only
    other_ns = kpod(
        "p", affinity=required("podAffinity", term("web", namespaces=["b"])), labels={"app": "db"}
    )
    assert check(other_ns, "n2", elsewhere) == [] and check(other_ns, "n3", elsewhere) != []
    own = kpod("p", affinity=required("podAffinity", term("web", "rack")), labels={"app": "web"})
    assert check(own, "n1", []) == ["pod affinity: node lacks a topology key"]
    self_match = kpod("p", affinity=required("podAffinity", term("web")), labels={"app": "web"})
    assert check(self_match, "n3", []) == []  # the first of a series with affinity to itself


def test_checker_anti_affinity_both_ways() -> None:
    web = kpod("w", "n1", labels={"app": "web"})
    pod = kpod("p", affinity=required("podAntiAffinity", term("web")), labels={"app": "db"})
    assert check(pod, "n2", [web]) == ["pod anti-affinity {'matchLabels': {'app': 'web'}} over zone"]
    assert check(pod, "n3", [web]) == []
    host = kpod("p", affinity=required("podAntiAffinity", term("web", "kubernetes.io/hostname")))
    assert check(host, "n2", [web]) == [] and check(host, "n1", [web]) != []
    keeper = kpod("k", "n1", affinity=required("podAntiAffinity", term("db")), labels={"app": "x"})
    db = kpod("p", labels={"app": "db"})
    assert check(db, "n2", [keeper]) == ["existing pod k's anti-affinity over zone"]
    assert check(db, "n3", [keeper]) == []
    assert check(kpod("p", ns="b", labels={"app": "db"}), "n2", [keeper]) == []  # k's term: namespace a
    gone = {**keeper, "metadata": {**keeper["metadata"], "deletionTimestamp": "2020-01-01T00:00:00Z"}}
    assert check(db, "n2", [gone]) == []


def spread(max_skew: int, key: str = "zone", hard: bool = True) -> list[dict[str, Any]]:
    return [{"maxSkew": max_skew, "topologyKey": key, "labelSelector": {"matchLabels": {"app": "web"}},
             "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway"}]  # fmt: skip


def test_checker_topology_spread_over_eligible_domains() -> None:
    pods = [kpod("w1", "n1", labels={"app": "web"}), kpod("w2", "n2", labels={"app": "web"})]
    pod = kpod("p", topologySpreadConstraints=spread(1), labels={"app": "web"})
    assert check(pod, "n3", pods) == []
    assert check(pod, "n1", pods) == ["topology spread over zone: skew 3 > 1"]
    assert check({**pod, "spec": {**pod["spec"], "topologySpreadConstraints": spread(3)}}, "n1", pods) == []
    assert check({**pod, "spec": {**pod["spec"], "topologySpreadConstraints": spread(1, hard=False)}},
                 "n1", pods) == []  # fmt: skip
    # z2 is not eligible when the pod's nodeSelector excludes n3: the minimum is over z1 alone
    pinned = kpod(
        "p", topologySpreadConstraints=spread(1), nodeSelector={"zone": "z1"}, labels={"app": "web"}
    )
    assert check(pinned, "n1", pods) == []
    assert check(kpod("p", topologySpreadConstraints=spread(1, "rack")), "n1", []) == [
        "topology spread: node lacks a topology key"
    ]
    other = kpod("p", topologySpreadConstraints=spread(1), labels={"app": "db"})  # no self match
    assert check(other, "n1", [*pods, kpod("w3", "n3", labels={"app": "web"})]) == []


def pv(name: str, node: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}  # fmt: skip
    return {"metadata": {"name": name}, "status": {"phase": spec.pop("phase", "Available")},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "nodeAffinity": affinity, **spec}}  # fmt: skip


def pvc(name: str, size: str = "1Gi", volume: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                            "resources": {"requests": {"storage": size}}}  # fmt: skip
    if volume:
        spec["volumeName"] = volume
    return {"metadata": {"name": name, "namespace": "a"}, "spec": spec}


def with_claims(*names: str) -> dict[str, Any]:
    return kpod("p", volumes=[{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names])


WFFC = [{"metadata": {"name": "local"}, "volumeBindingMode": "WaitForFirstConsumer"}]


def test_checker_volumes() -> None:
    pvs = [pv("v1", "n1"), pv("v2", "n2", "5Gi"), pv("v3", "n2")]
    store = {"pvs": pvs, "classes": WFFC}
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c")], **store) == []
    assert check(with_claims("c"), "n3", [], pvcs=[pvc("c")], **store) == [
        "no available PVs on the node for claims ['c']"
    ]
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c", "2Gi")], **store) != []  # too small
    assert check(with_claims("c"), "n2", [], pvcs=[pvc("c", "2Gi")], **store) == []
    both = [pvc("c"), pvc("d", "2Gi")]
    assert check(with_claims("c", "d"), "n2", [], pvcs=both, **store) == []  # c on v3, d on v2
    assert check(with_claims("c", "d"), "n1", [], pvcs=both, **store) != []
    taken = {**store, "pvs": [pv("v1", "n1", claimRef={"name": "x"})]}
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c")], **taken) != []
    pending = {**store, "pvs": [pv("v1", "n1", phase="Pending")]}
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c")], **pending) != []
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c", volume="v2")], **store) == [
        "claim c: its PV v2 does not fit the node"
    ]
    assert check(with_claims("c"), "n2", [], pvcs=[pvc("c", volume="v2")], **store) == []
    assert check(with_claims("c"), "n1", [], pvcs=[], **store) == ["claim c does not exist"]
    assert check(with_claims("c"), "n1", [], pvcs=[pvc("c")], pvs=pvs) == [
        "claim c is unbound and not WaitForFirstConsumer"
    ]
    pod = {**with_claims("c"), "metadata": {"name": "p", "namespace": "a"}}
    assert bound_claim_violations(pod, NODES[1], pvs, [pvc("c", volume="v2")]) == []
    assert bound_claim_violations(pod, NODES[0], pvs, [pvc("c", volume="v2")]) == [
        "claim c bound to PV v2, which does not fit the node"
    ]
    assert bound_claim_violations(pod, NODES[0], pvs, [pvc("c")]) == ["claim c not bound after placement"]


def test_checker_inline_disks_as_volume_restrictions() -> None:
    def disks(**volume: Any) -> dict[str, Any]:
        return kpod("p", "n1", volumes=[{"name": "d", **volume}])

    gce = {"gcePersistentDisk": {"pdName": "d1"}}
    gce_ro = {"gcePersistentDisk": {"pdName": "d1", "readOnly": True}}
    assert check(disks(**gce), "n1", [disks(**gce)]) == ["gce disk d1 in use on the node"]
    assert check(disks(**gce_ro), "n1", [disks(**gce_ro)]) == []
    assert check(disks(**gce), "n2", [disks(**gce)]) == []  # another node
    ebs = {"awsElasticBlockStore": {"volumeID": "v", "readOnly": True}}
    assert check(disks(**ebs), "n1", [disks(**ebs)]) == ["ebs disk v in use on the node"]
    rbd = {"rbd": {"monitors": ["m1", "m2"], "image": "i"}}
    rbd2 = {"rbd": {"monitors": ["m2"], "image": "i"}}
    assert check(disks(**rbd), "n1", [disks(**rbd2)]) != []
    assert check(disks(**rbd), "n1", [disks(rbd={"monitors": ["m3"], "image": "i"})]) == []
    iscsi = {"iscsi": {"iqn": "q", "targetPortal": "t", "lun": 0}}
    assert check(disks(**iscsi), "n1", [disks(**iscsi)]) == ["iscsi disk q in use on the node"]


def test_pdb_status_counts_bound_pods_not_being_deleted() -> None:
    pdb = {"metadata": {"name": "b", "namespace": "a", "generation": 2},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}  # fmt: skip
    pods = [
        kpod("w1", "n1", labels={"app": "web"}),
        kpod("w2", "n2", labels={"app": "web"}),
        kpod("w3", None, labels={"app": "web"}),  # pending: expected, not healthy
        kpod("w4", "n1", ns="b", labels={"app": "web"}),  # another namespace
        kpod("d", "n1", labels={"app": "db"}),
    ]
    gone = kpod("w5", "n3", labels={"app": "web"})
    gone["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"
    assert pdb_status(pdb, [*pods, gone]) == {
        "observedGeneration": 2, "disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
        "expectedPods": 4,
    }  # fmt: skip
    assert pdb_status(pdb, pods[2:])["disruptionsAllowed"] == 0


def test_tied_best_follows_kubes_order() -> None:
    def victim(name: str, prio: int, started: int) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"priority": prio},
                "status": {"startTime": f"2020-01-01T00:00:{started:02d}Z"}}  # fmt: skip

    def cand(name: str, violations: int, *pods: dict[str, Any]) -> Candidate:
        return Candidate(name, Victims(tuple(pods), violations))

    a = cand("a", 1, victim("a1", 0, 1))
    b = cand("b", 0, victim("b1", 10, 1))
    c = cand("c", 0, victim("c1", 0, 1), victim("c2", 0, 2))
    d = cand("d", 0, victim("d1", 0, 3))
    e = cand("e", 0, victim("e1", 0, 5))
    assert [x.name for x in tied_best([a, b])] == ["b"]  # fewest PDB violations
    assert [x.name for x in tied_best([b, c])] == ["c"]  # lowest top priority
    assert [x.name for x in tied_best([c, d])] == ["d"]  # smallest priority sum (fewer pods)
    assert [x.name for x in tied_best([d, e])] == ["e"]  # the latest start of the top victims
    twin = cand("f", 0, victim("f1", 0, 5))
    assert sorted(x.name for x in tied_best([d, e, twin])) == ["e", "f"]  # a tie: either


def test_koord_live_copy_neither_preempts_nor_binds_volumes() -> None:
    live = koord_config("s", Path("/k"))["profiles"][0]["plugins"]
    assert live["postFilter"] == {"disabled": [{"name": "DefaultPreemption"}]}
    assert {"name": "VolumeBinding"} in live["reserve"]["disabled"]
    assert live["preBind"] == {"disabled": [{"name": "VolumeBinding"}]}
    whole = koord_config("s", Path("/k"), live=False)["profiles"][0]["plugins"]
    assert "postFilter" not in whole and "preBind" not in whole
    assert whole["filter"] == {"disabled": [{"name": "LoadAwareScheduling"}]}


def test_preemption_compare_flags_a_different_node_or_victims(tmp_path: Path) -> None:
    config = tmp_path / "koord.json"
    config.write_text(json.dumps(koord_config("s", tmp_path / "kubeconfig", live=False)))
    fw = InProcess(config, ENABLED).framework
    nodes = [knode("n1", "z1"), knode("n2", "z2")]
    for n in nodes:
        n["status"]["allocatable"]["cpu"] = "2"

    def running(name: str, node: str, prio: int, started: int) -> dict[str, Any]:
        p = kpod(name, node, priority=prio)
        p["metadata"]["uid"] = name
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}
        p["status"] = {"startTime": f"2020-01-01T00:00:{started:02d}Z"}
        return p

    pods = [running("a", "n1", 0, 1), running("b", "n2", 10, 2)]
    pod = running("p", "", 1000, 3)
    del pod["status"]
    snap = Snapshot.build(nodes, pods)
    state = CycleState(0.0)
    assert fw.pre_filters and all(p.pre_filter(state, pod, snap).is_success() for p in fw.pre_filters)
    feasible, rejections = fw.filter_all(state, pod, snap)
    assert len(feasible) == 0
    statuses = rejections.as_dict()

    def kinds(node: str | None, victims: list[str]) -> tuple[list[str], bool]:
        found, compared = compare(fw, pod, snap, state, statuses, node, victims)
        return [m[0] for m in found], compared

    assert kinds("n1", ["a"]) == ([], True)  # the lower top victim priority wins
    assert kinds("n2", ["b"]) == (["preemption-node"], True)
    assert kinds("n1", ["b"]) == (["preemption-victims"], True)
    assert kinds(None, []) == (["preemption"], False)
    never = {**pod, "spec": {**pod["spec"], "preemptionPolicy": "Never"}}
    assert compare(fw, never, snap, state, statuses, None, [])[0] == []
