"""Seeded generator of clusters as API objects for the differential tests against the real
kube-scheduler (docs/testing.md#the-kube-scheduler-oracle): Nodes, pods already bound to them, the
pending pods in the order they are created, and the other objects a family needs (PriorityClasses,
PodDisruptionBudgets, StorageClasses, PersistentVolumes and their claims, Services and workload
controllers; the score-only families' objects come from tests/differential/scorefamilies.py).

Every feature is tagged with a family, named after the kube-scheduler plugin it exercises. Only the
families in ENABLED are generated for the comparison: those whose plugins koord-scheduler has (today
all). Disabling one is a one-line change to ENABLED (and, for its scores, to SCORED). The same seed
and families always give the same objects: a mismatch is replayed from its seed.
Imports: standard library only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from tests.differential.checker import violations
from tests.differential.scorefamilies import add_score_families

Obj = dict[str, Any]

FAMILIES: dict[str, str] = {
    "resources": "NodeResourcesFit filter (cpu, memory, an extended resource, pod count) and its "
    "LeastAllocated score; containers without requests, init containers",
    "balanced-allocation": "NodeResourcesBalancedAllocation's score on the resources family's pods "
    "(compares scores only; generates nothing of its own)",
    "overcommit": "NodeResourcesFit on nodes whose bound pods already request more than allocatable",
    "unschedulable": "NodeUnschedulable: spec.unschedulable nodes, pods tolerating them",
    "taints": "TaintToleration filter: NoSchedule/NoExecute taints and tolerations",
    "node-selector": "NodeAffinity filter: nodeSelector",
    "required-node-affinity": "NodeAffinity filter: requiredDuringScheduling terms (matchExpressions "
    "In/NotIn/Exists/DoesNotExist/Gt/Lt, matchFields metadata.name)",
    "prefer-no-schedule": "TaintToleration score: PreferNoSchedule taints",
    "preferred-node-affinity": "NodeAffinity score: preferredDuringScheduling terms",
    "host-ports": "NodePorts: hostPorts on bound and pending pods",
    "inter-pod-affinity": "InterPodAffinity: required and preferred pod (anti-)affinity",
    "topology-spread": "PodTopologySpread: topologySpreadConstraints over zone and hostname",
    "priority-pdb": "DefaultPreemption: PriorityClasses, priorities and PodDisruptionBudgets",
    "local-pv": "VolumeBinding: local PersistentVolumes with node affinity and claims bound to them",
    "image-locality": "ImageLocality score: node status.images (tag variants, sizes around the thresholds), "
    "container and init-container images",
    "selector-spread": "SelectorSpread score (enabled in both profiles for it): Services, RCs, ReplicaSets "
    "and StatefulSets selecting pods; PodTopologySpread's system default constraints on those pods",
    "prefer-avoid-pods": "NodePreferAvoidPods score: the preferAvoidPods node annotation, pods owned by "
    "RCs, ReplicaSets and StatefulSets",
}

# The families compared: all of them (every family's plugins are in koord's default profile).
ENABLED: frozenset[str] = frozenset(
    {
        "resources", "balanced-allocation", "overcommit", "unschedulable", "taints", "node-selector",
        "required-node-affinity", "prefer-no-schedule", "preferred-node-affinity", "host-ports",
        "inter-pod-affinity", "topology-spread", "priority-pdb", "local-pv", "image-locality",
        "selector-spread", "prefer-avoid-pods",
    }
)  # fmt: skip

# kube's score plugin → koord's plugins that may score the same rule (the first koord's profile has),
# per family: compared on every node kube scored when the family is enabled. 1.20's LeastAllocated
# score is NodeResourcesFit's in koord's profile (as in kube from 1.22).
SCORED: dict[str, dict[str, tuple[str, ...]]] = {
    "resources": {"NodeResourcesLeastAllocated": ("NodeResourcesLeastAllocated", "NodeResourcesFit")},
    "balanced-allocation": {"NodeResourcesBalancedAllocation": ("NodeResourcesBalancedAllocation",)},
    "prefer-no-schedule": {"TaintToleration": ("TaintToleration",)},
    "preferred-node-affinity": {"NodeAffinity": ("NodeAffinity",)},
    "inter-pod-affinity": {"InterPodAffinity": ("InterPodAffinity",)},
    "topology-spread": {"PodTopologySpread": ("PodTopologySpread",)},
    "image-locality": {"ImageLocality": ("ImageLocality",)},
    "selector-spread": {"SelectorSpread": ("SelectorSpread",)},
    "prefer-avoid-pods": {"NodePreferAvoidPods": ("NodePreferAvoidPods",)},
}


def scored_plugins(families: frozenset[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for f in sorted(families):
        out.update(SCORED.get(f, {}))
    return out


ZONES = ("zone-a", "zone-b", "zone-c")
REGIONS = ("region-1", "region-2")
GPU = "example.com/gpu"
TAINT_KEYS = ("dedicated", "gpu", "spot")
TAINT_VALUES = ("a", "b", "")
APPS = ("web", "db", "cache")


@dataclass
class Case:
    """One generated cluster: create `extra`, then `nodes`, then `bound` pods, then each of `pending`
    in order. Names are unique to the case (`prefix`); pods carry no namespace and no schedulerName."""

    seed: int
    prefix: str
    families: frozenset[str]
    nodes: list[Obj] = field(default_factory=list)
    bound: list[Obj] = field(default_factory=list)
    pending: list[Obj] = field(default_factory=list)
    extra: list[Obj] = field(default_factory=list)


class _Gen:
    def __init__(self, seed: int, families: frozenset[str]) -> None:
        unknown = families - FAMILIES.keys()
        if unknown:
            raise ValueError(f"families={sorted(unknown)}: unknown (known: {sorted(FAMILIES)})")
        self.r = random.Random(seed)
        self.f = families

    def on(self, family: str, p: float = 1.0) -> bool:
        """Whether `family` is generated and a draw with probability p succeeds (no draw when it is off)."""
        return family in self.f and self.r.random() < p

    # --- nodes -----------------------------------------------------------------------------------
    def node(self, name: str) -> Obj:
        r = self.r
        zone = r.choice(ZONES)
        labels = {
            "kubernetes.io/hostname": name,
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": REGIONS[ZONES.index(zone) % 2],
            "tier": r.choice(("gold", "silver", "bronze")),
            "gen": str(r.randint(1, 9)),
        }
        if r.random() < 0.5:
            labels["disk"] = r.choice(("ssd", "hdd"))
        alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        if "resources" in self.f:
            alloc = {
                "cpu": r.choice(("1", "2", "4", "3500m", "8")),
                "memory": r.choice(("2Gi", "4Gi", "8Gi", "6000Mi", "16Gi")),
                "pods": r.choice(("3", "8", "110", "110", "110")),
            }
            if r.random() < 0.3:
                alloc[GPU] = r.choice(("1", "2"))
        spec: Obj = {}
        taints: list[Obj] = []
        if self.on("taints", 0.3):
            for _ in range(r.randint(1, 2)):
                taints.append({"key": r.choice(TAINT_KEYS), "value": r.choice(TAINT_VALUES),
                               "effect": r.choice(("NoSchedule", "NoExecute"))})  # fmt: skip
        if self.on("prefer-no-schedule", 0.3):
            taints.append(
                {"key": r.choice(TAINT_KEYS), "value": r.choice(TAINT_VALUES), "effect": "PreferNoSchedule"}
            )
        # The API server refuses two taints with the same key and effect.
        spec["taints"] = list({(t["key"], t["effect"]): t for t in reversed(taints)}.values())[::-1]
        if self.on("unschedulable", 0.15):
            spec["unschedulable"] = True
        return {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"allocatable": alloc, "capacity": dict(alloc)},
        }  # fmt: skip

    # --- pods ------------------------------------------------------------------------------------
    def requests(self) -> Obj | None:
        r = self.r
        if "resources" not in self.f:
            return {"cpu": "100m", "memory": "128Mi"}
        if r.random() < 0.15:
            return None  # non-zero defaults in scoring
        req: Obj = {}
        if r.random() < 0.9:
            req["cpu"] = r.choice(("100m", "250m", "500m", "700m", "1", "1500m", "2", "3"))
        if r.random() < 0.9:
            req["memory"] = r.choice(("64Mi", "200Mi", "256Mi", "1Gi", "1500Mi", "3Gi", "5Gi"))
        if r.random() < 0.1:
            req[GPU] = "1"
        return req

    def container(self, name: str, ports: bool) -> Obj:
        c: Obj = {"name": name, "image": "busybox"}
        req = self.requests()
        if req is not None:
            c["resources"] = {"requests": req, **({"limits": {GPU: req[GPU]}} if GPU in req else {})}
        if ports and self.on("host-ports", 0.4):
            c["ports"] = [{"containerPort": 80, "hostPort": self.r.choice((8080, 8081, 9090)),
                           "protocol": self.r.choice(("TCP", "UDP"))}]  # fmt: skip
        return c

    def pod(self, name: str, app: str) -> Obj:
        r = self.r
        spec: Obj = {"containers": [self.container(f"c{i}", i == 0) for i in range(r.choice((1, 1, 2)))]}
        if "resources" in self.f and r.random() < 0.15:
            spec["initContainers"] = [self.container("init", False)]
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": spec,
        }

    def tolerations(self) -> list[Obj]:
        r = self.r
        out: list[Obj] = []
        if self.on("taints", 0.5):
            for _ in range(r.randint(1, 2)):
                kind = r.random()
                if kind < 0.45:
                    t: Obj = {"key": r.choice(TAINT_KEYS), "operator": "Exists"}
                elif kind < 0.9:
                    t = {"key": r.choice(TAINT_KEYS), "operator": "Equal", "value": r.choice(TAINT_VALUES)}
                else:
                    t = {"operator": "Exists"}  # tolerates every taint
                if r.random() < 0.6:
                    t["effect"] = r.choice(("NoSchedule", "NoExecute"))
                out.append(t)
        if self.on("unschedulable", 0.2):
            out.append(
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            )
        return out

    def expression(self, node_names: list[str]) -> Obj:
        r = self.r
        key = r.choice(("tier", "disk", "gen", "topology.kubernetes.io/zone", "missing"))
        op = r.choice(
            ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
            if key == "gen"
            else ("In", "NotIn", "Exists", "DoesNotExist")
        )
        values = {
            "tier": ("gold", "silver", "bronze"), "disk": ("ssd", "hdd"), "gen": tuple("123456789"),
            "topology.kubernetes.io/zone": ZONES, "missing": ("x",),
        }[key]  # fmt: skip
        e: Obj = {"key": key, "operator": op}
        if op in ("In", "NotIn"):
            e["values"] = r.sample(values, r.randint(1, min(2, len(values))))
        elif op in ("Gt", "Lt"):
            e["values"] = [str(r.randint(1, 9))]
        return e

    def node_affinity(self, node_names: list[str]) -> Obj:
        r = self.r
        affinity: Obj = {}
        if self.on("required-node-affinity", 0.3):
            terms = []
            for _ in range(r.randint(1, 2)):
                term: Obj = {}
                if r.random() < 0.85:
                    term["matchExpressions"] = [self.expression(node_names) for _ in range(r.randint(1, 2))]
                if r.random() < 0.2 or not term:
                    term["matchFields"] = [
                        {
                            "key": "metadata.name",
                            "operator": r.choice(("In", "NotIn")),
                            "values": [r.choice(node_names)],
                        }
                    ]  # one value (API validation)
                terms.append(term)
            affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
        if self.on("preferred-node-affinity", 0.4):
            affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": r.randint(1, 100),
                    "preference": {"matchExpressions": [self.expression(node_names)]},
                }
                for _ in range(r.randint(1, 2))
            ]
        return affinity

    def pod_affinity(self) -> Obj:
        r = self.r
        out: Obj = {}
        if not self.on("inter-pod-affinity", 0.5):
            return out
        for kind in ("podAffinity", "podAntiAffinity"):
            if r.random() < 0.5:
                continue
            topology = r.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone"))
            term = {"labelSelector": {"matchLabels": {"app": r.choice(APPS)}}, "topologyKey": topology}
            if r.random() < 0.5:
                out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            else:
                out[kind] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": r.randint(1, 100), "podAffinityTerm": term}]}  # fmt: skip
        return out

    def preemptor(self, name: str, app: str, prefix: str) -> Obj:
        """A high-priority pod that tolerates everything and goes anywhere, too big for most nodes as they
        are: what preemption is for."""
        r = self.r
        req = {"cpu": r.choice(("1500m", "2", "3")), "memory": r.choice(("1Gi", "3Gi"))}
        spec = {"containers": [{"name": "c0", "image": "busybox", "resources": {"requests": req}}],
                "tolerations": [{"operator": "Exists"}], "priorityClassName": f"{prefix}-high"}  # fmt: skip
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": spec,
        }

    def spread(self, app: str) -> list[Obj]:
        r = self.r
        if not self.on("topology-spread", 0.4):
            return []
        return [{
            "maxSkew": r.randint(1, 2),
            "topologyKey": r.choice(("kubernetes.io/hostname", "topology.kubernetes.io/zone")),
            "whenUnsatisfiable": r.choice(("DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": app}},
        }]  # fmt: skip


def generate(
    seed: int, families: frozenset[str] = ENABLED, *, nodes: int = 6, bound: int = 6, pending: int = 12
) -> Case:
    """The cluster of `seed`: about `nodes` nodes, `bound` pods already on them and `pending` pods."""
    g = _Gen(seed, families)
    r = g.r
    prefix = f"d{seed}"
    case = Case(seed, prefix, families)
    names = [f"{prefix}-n{i}" for i in range(max(1, nodes + r.randint(-1, 1)))]
    case.nodes = [g.node(n) for n in names]
    if "priority-pdb" in families:
        for cls, value, policy in (("low", 10, None), ("high", 1000, None), ("never", 1000, "Never")):
            pc: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                       "metadata": {"name": f"{prefix}-{cls}"}, "value": value}  # fmt: skip
            if policy:
                pc["preemptionPolicy"] = policy
            case.extra.append(pc)
        for app in APPS:
            selector = {"matchLabels": {"app": app}}
            case.extra.append({"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
                               "metadata": {"name": f"{prefix}-{app}"},
                               "spec": {"minAvailable": 1, "selector": selector}})  # fmt: skip
    claims: list[str] = []
    if "local-pv" in families:
        claims = _local_volumes(case, names, r)
    for i in range(bound):
        pod = g.pod(f"{prefix}-b{i}", r.choice(APPS))
        node = r.choice(names) if "overcommit" in families else _room_for(pod, case.nodes, case.bound, r)
        if node is None:
            continue
        pod["spec"]["nodeName"] = node
        if g.on("priority-pdb", 0.7):
            pod["spec"]["priorityClassName"] = f"{prefix}-low"
        case.bound.append(pod)
    for i in range(pending):
        app = r.choice(APPS)
        if g.on("priority-pdb", 0.2):
            case.pending.append(g.preemptor(f"{prefix}-p{i}", app, prefix))
            continue
        pod = g.pod(f"{prefix}-p{i}", app)
        spec = pod["spec"]
        if g.on("node-selector", 0.2):
            spec["nodeSelector"] = {r.choice(("tier", "disk")): r.choice(("gold", "silver", "ssd", "hdd"))}
        if tol := g.tolerations():
            spec["tolerations"] = tol
        affinity = {**({"nodeAffinity": na} if (na := g.node_affinity(names)) else {}), **g.pod_affinity()}
        if affinity:
            spec["affinity"] = affinity
        if sp := g.spread(app):
            spec["topologySpreadConstraints"] = sp
        if g.on("priority-pdb", 0.5):
            spec["priorityClassName"] = f"{prefix}-{r.choice(('low', 'high', 'high', 'never'))}"
        if claims and g.on("local-pv", 0.4):
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": r.choice(claims)}}]
        case.pending.append(pod)
    add_score_families(case, families)
    return case


def _local_volumes(case: Case, names: list[str], r: random.Random) -> list[str]:
    """A WaitForFirstConsumer StorageClass without a provisioner, local PVs pinned to nodes by required
    node affinity on the hostname, and claims of that class: some pre-bound to a PV (claimRef on the PV
    — the harness fills in its namespace — volumeName and bind-completed on the claim, as the PV
    controller leaves them), the others unbound, of sizes some PVs cannot hold. Returns the claims."""
    prefix = case.prefix
    sc = f"{prefix}-local"
    case.extra.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                       "metadata": {"name": sc}, "provisioner": "kubernetes.io/no-provisioner",
                       "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
    pvs: list[Obj] = []
    claims: list[Obj] = []
    for i, n in enumerate(names):
        for j in range(r.choice((0, 1, 2, 2))):
            pvs.append({
                "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{prefix}-pv{i}-{j}"},
                "spec": {"capacity": {"storage": r.choice(("1Gi", "5Gi"))}, "accessModes": ["ReadWriteOnce"],
                         "storageClassName": sc, "local": {"path": f"/mnt/disk{j}"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "kubernetes.io/hostname", "operator": "In", "values": [n]}]}]}}},
            })  # fmt: skip
    for k in range(max(1, len(pvs))):
        name = f"{prefix}-pvc{k}"
        size = r.choice(("1Gi", "1Gi", "2Gi", "10Gi"))
        claim: Obj = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
                      "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                               "resources": {"requests": {"storage": size}}}}  # fmt: skip
        free = [pv for pv in pvs if "claimRef" not in pv["spec"]]
        if free and r.random() < 0.3:
            pv = r.choice(free)
            pv["spec"]["claimRef"] = {"kind": "PersistentVolumeClaim", "name": name}
            claim["spec"]["volumeName"] = pv["metadata"]["name"]
            claim["spec"]["resources"]["requests"]["storage"] = "1Gi"
            claim["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        claims.append(claim)
    case.extra += pvs + claims
    return [c["metadata"]["name"] for c in claims]


def _room_for(pod: Obj, nodes: list[Obj], bound: list[Obj], r: random.Random) -> str | None:
    """A random node where `pod` fits beside the pods already bound there — resources, pod count, host
    ports and inline disks, the checker's per-node rules on the node without its taints and the like
    (None: none has room)."""
    order = list(nodes)
    r.shuffle(order)
    for node in order:
        name = node["metadata"]["name"]
        there = [p for p in bound if p["spec"]["nodeName"] == name]
        if not violations(pod, {**node, "spec": {}}, there):
            return str(name)
    return None
