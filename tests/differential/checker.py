"""An independent checker of hard constraints for the differential tests
(docs/testing.md#the-kube-scheduler-oracle): given the cluster a scheduler saw and the node it chose,
which of the pod's hard constraints the placement breaks. Written from the Kubernetes API's meaning, not
from either scheduler's code (its own quantity reading, its own matching), so a bug shared by koord's
plugins and their oracles still shows.

Per node (`violations(pod, node, pods_on_node)`): node unschedulable, NoSchedule/NoExecute taints,
nodeSelector, required node affinity, resources (requests of containers and init containers, extended
resources) and the pod count, hostPorts, and the inline disks 1.20's VolumeRestrictions refuses to share
(GCE PD and RBD unless both read-only, AWS EBS always, iSCSI unless both read-only).
With the whole cluster (`violations(..., cluster=Cluster(...))`) also:
- required inter-pod affinity: each term needs a pod matching its selector, in its namespaces (the
  pod's own when none are listed), on a node with the chosen node's value of its topologyKey; a node
  without that key fails. Exception (1.20): when no pod in the cluster matches the terms and the pod
  matches its own terms, it may go anywhere its keys exist;
- required anti-affinity, both ways: no pod matching the pod's term in the chosen node's domain, and no
  pod already there (same topology value) whose own anti-affinity term selects the pod;
- topology spread, `DoNotSchedule` constraints: the node has every constraint's key; the eligible nodes
  are those matching the pod's nodeSelector and required node affinity and having all the keys; with
  counts of the selector's pods (same namespace, not terminating) per domain over eligible nodes, the
  chosen domain's count + 1 (when the pod matches its own selector) minus the smallest count over the
  eligible domains must not exceed maxSkew;
- volumes: a claim that does not exist; a bound claim whose PV's required node affinity the node does
  not satisfy; an unbound claim of a WaitForFirstConsumer class with no available PV for it on the node
  (same class, not claimed, phase Available, capacity ≥ request, access modes ⊇ the claim's, node
  affinity satisfied; a pod's claims each get their own PV).
`bound_claim_violations` checks a placement after the fact: each of the pod's claims bound to a PV whose
node affinity the node satisfies.
Imports: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Obj = dict[str, Any]

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1), "m": Fraction(1, 1000), "k": Fraction(10**3), "M": Fraction(10**6),
    "G": Fraction(10**9), "T": Fraction(10**12),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
}  # fmt: skip
_QTY = re.compile(r"^([0-9]+(?:\.[0-9]*)?)(m|k|M|G|T|Ki|Mi|Gi|Ti|)$")


def quantity(text: str) -> Fraction:
    m = _QTY.match(str(text))
    if m is None:
        raise ValueError(f"quantity {text!r}: not a form the generator writes")
    return Fraction(m.group(1)) * _SUFFIX[m.group(2)]


def pod_requests(pod: Obj) -> dict[str, Fraction]:
    """max(sum of the containers' requests, each init container's) per resource."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[r] = total.get(r, Fraction(0)) + quantity(v)
    for c in spec.get("initContainers") or []:
        for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[r] = max(total.get(r, Fraction(0)), quantity(v))
    return total


def _tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t["key"] != taint.get("key"):
            continue
        if op == "Exists" or (op == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def _expression_holds(e: Obj, value: str | None) -> bool:
    op, values = e["operator"], e.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            have, want = int(value or ""), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    raise ValueError(f"operator {op!r}")


def _term_matches(term: Obj, node: Obj) -> bool:
    labels = node["metadata"].get("labels") or {}
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    if not all(_expression_holds(e, labels.get(e["key"])) for e in exprs):
        return False
    return all(_expression_holds(f, node["metadata"]["name"]) for f in fields if f["key"] == "metadata.name")


@dataclass
class Cluster:
    """What the scheduler saw: every node, every pod bound to a node, the storage objects."""

    nodes: list[Obj]
    pods: list[Obj]
    pvs: list[Obj] = field(default_factory=list)
    pvcs: list[Obj] = field(default_factory=list)
    classes: list[Obj] = field(default_factory=list)


def violations(pod: Obj, node: Obj, pods_on_node: list[Obj], cluster: Cluster | None = None) -> list[str]:
    """What placing `pod` on `node` breaks, given the pods already there (empty: nothing); with the
    cluster, also the inter-pod, spreading and volume rules."""
    out: list[str] = []
    spec, nspec = pod.get("spec") or {}, node.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    if nspec.get("unschedulable") and not _tolerates(
        tolerations, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    ):
        out.append("node is unschedulable")
    for taint in nspec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
            out.append(f"untolerated taint {taint}")
    labels = node["metadata"].get("labels") or {}
    for k, v in (spec.get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            out.append(f"nodeSelector {k}={v}")
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))  # fmt: skip
    if required is not None and not any(
        _term_matches(t, node) for t in required.get("nodeSelectorTerms") or []
    ):
        out.append("required node affinity")
    alloc = {r: quantity(v) for r, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
    if len(pods_on_node) + 1 > alloc.get("pods", Fraction(0)):
        out.append("pod count")
    used: dict[str, Fraction] = {}
    for p in pods_on_node:
        for r, v in pod_requests(p).items():
            used[r] = used.get(r, Fraction(0)) + v
    for r, v in pod_requests(pod).items():
        if v > 0 and used.get(r, Fraction(0)) + v > alloc.get(r, Fraction(0)):
            out.append(f"{r}: {used.get(r, 0)} used + {v} > {alloc.get(r, 0)}")
    taken = {(pt.get("hostIP") or "0.0.0.0", pt.get("protocol") or "TCP", pt["hostPort"])
             for p in pods_on_node for c in (p.get("spec") or {}).get("containers") or []
             for pt in c.get("ports") or [] if pt.get("hostPort")}  # fmt: skip
    for c in spec.get("containers") or []:
        for pt in c.get("ports") or []:
            if (
                pt.get("hostPort")
                and (pt.get("hostIP") or "0.0.0.0", pt.get("protocol") or "TCP", pt["hostPort"]) in taken
            ):
                out.append(f"hostPort {pt['hostPort']}/{pt.get('protocol') or 'TCP'}")
    out += _disk_conflicts(pod, pods_on_node)
    if cluster is not None:
        out += _pod_affinity(pod, node, cluster) + _spread(pod, node, cluster) + _volumes(pod, node, cluster)
    return out


# --- inline disks (VolumeRestrictions) ---------------------------------------------------------------
def _disks(pod: Obj) -> list[tuple[str, Any, bool]]:
    """(kind, identity, read-only) of each inline disk 1.20 checks."""
    out: list[tuple[str, Any, bool]] = []
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if g := v.get("gcePersistentDisk"):
            out.append(("gce", g.get("pdName"), bool(g.get("readOnly"))))
        elif a := v.get("awsElasticBlockStore"):
            out.append(("ebs", a.get("volumeID"), False))  # EBS conflicts even read-only
        elif r := v.get("rbd"):
            out.append(("rbd", (frozenset(r.get("monitors") or []), r.get("pool") or "rbd", r.get("image")),
                        bool(r.get("readOnly"))))  # fmt: skip
        elif i := v.get("iscsi"):
            out.append(("iscsi", i.get("iqn"), bool(i.get("readOnly"))))
    return out


def _disk_conflicts(pod: Obj, pods_on_node: list[Obj]) -> list[str]:
    out = []
    there = [d for p in pods_on_node for d in _disks(p)]
    for kind, ident, ro in _disks(pod):
        for k2, i2, ro2 in there:
            if kind != k2:
                continue
            same = bool(ident[0] & i2[0]) and ident[1:] == i2[1:] if kind == "rbd" else ident == i2
            if same and (kind == "ebs" or not (ro and ro2)):
                out.append(f"{kind} disk {ident} in use on the node")
    return out


# --- label selectors and pod (anti-)affinity ---------------------------------------------------------
def selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A LabelSelector; None selects nothing, {} everything."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and not (key in labels and labels[key] in values):
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _ns(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _term_selects(term: Obj, owner: Obj, other: Obj) -> bool:
    """Whether `owner`'s pod (anti-)affinity term selects `other`: namespace and labels."""
    namespaces = term.get("namespaces") or [_ns(owner)]
    return _ns(other) in namespaces and selector_matches(term.get("labelSelector"), _labels(other))


def _required(pod: Obj, kind: str) -> list[Obj]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _pod_affinity(pod: Obj, node: Obj, cluster: Cluster) -> list[str]:
    out: list[str] = []
    nodes = {n["metadata"]["name"]: n for n in cluster.nodes}
    here = _labels(node)

    def node_of(p: Obj) -> dict[str, str]:
        return _labels(nodes.get((p.get("spec") or {}).get("nodeName") or "", {}))

    live = [p for p in cluster.pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    terms = _required(pod, "podAffinity")
    if terms:
        if any(t["topologyKey"] not in here for t in terms):
            out.append("pod affinity: node lacks a topology key")
        else:
            matching = [p for p in live if all(_term_selects(t, pod, p) for t in terms)
                        and all(t["topologyKey"] in node_of(p) for t in terms)]  # fmt: skip
            first = not matching and all(_term_selects(t, pod, pod) for t in terms)
            for t in terms:
                key = t["topologyKey"]
                if not first and not any(node_of(p).get(key) == here[key] for p in matching):
                    out.append(f"pod affinity {t['labelSelector']} over {key}")
    for t in _required(pod, "podAntiAffinity"):
        key = t["topologyKey"]
        if key in here and any(_term_selects(t, pod, p) and node_of(p).get(key) == here[key] for p in live):
            out.append(f"pod anti-affinity {t['labelSelector']} over {key}")
    for p in live:
        for t in _required(p, "podAntiAffinity"):
            key = t["topologyKey"]
            if key in here and node_of(p).get(key) == here[key] and _term_selects(t, p, pod):
                out.append(f"existing pod {p['metadata']['name']}'s anti-affinity over {key}")
    return out


# --- topology spread ---------------------------------------------------------------------------------
def _matches_node_selection(pod: Obj, node: Obj) -> bool:
    spec = pod.get("spec") or {}
    labels = _labels(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return required is None or any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def _spread(pod: Obj, node: Obj, cluster: Cluster) -> list[str]:
    hard = [c for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
            if c.get("whenUnsatisfiable") == "DoNotSchedule"]  # fmt: skip
    if not hard:
        return []
    keys = [c["topologyKey"] for c in hard]
    if any(k not in _labels(node) for k in keys):
        return ["topology spread: node lacks a topology key"]
    eligible = {n["metadata"]["name"]: _labels(n) for n in cluster.nodes
                if all(k in _labels(n) for k in keys) and _matches_node_selection(pod, n)}  # fmt: skip
    out = []
    for c in hard:
        key, selector = c["topologyKey"], c.get("labelSelector")
        counts = {labels[key]: 0 for labels in eligible.values()}
        for p in cluster.pods:
            on = (p.get("spec") or {}).get("nodeName")
            if (on in eligible and _ns(p) == _ns(pod) and not p["metadata"].get("deletionTimestamp")
                    and selector_matches(selector, _labels(p))):  # fmt: skip
                counts[eligible[on][key]] += 1
        self_match = 1 if selector_matches(selector, _labels(pod)) else 0
        skew = counts.get(_labels(node)[key], 0) + self_match - min(counts.values(), default=0)
        if skew > int(c["maxSkew"]):
            out.append(f"topology spread over {key}: skew {skew} > {c['maxSkew']}")
    return out


# --- volumes -----------------------------------------------------------------------------------------
def _claims(pod: Obj) -> list[str]:
    return [v["persistentVolumeClaim"]["claimName"] for v in (pod.get("spec") or {}).get("volumes") or []
            if v.get("persistentVolumeClaim")]  # fmt: skip


def _pv_fits_node(pv: Obj, node: Obj) -> bool:
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    return required is None or any(_term_matches(t, node) for t in required.get("nodeSelectorTerms") or [])


def _pv_serves(pv: Obj, claim: Obj) -> bool:
    """Whether an unclaimed PV could be bound to `claim`: class, capacity, access modes."""
    ps, cs = pv.get("spec") or {}, claim.get("spec") or {}
    if ps.get("claimRef") or (ps.get("storageClassName") or "") != (cs.get("storageClassName") or ""):
        return False
    if (pv.get("status") or {}).get("phase") != "Available":
        return False
    want = quantity(((cs.get("resources") or {}).get("requests") or {}).get("storage") or "0")
    return quantity((ps.get("capacity") or {}).get("storage") or "0") >= want and set(
        cs.get("accessModes") or []
    ) <= set(ps.get("accessModes") or [])


def _volumes(pod: Obj, node: Obj, cluster: Cluster) -> list[str]:
    out: list[str] = []
    claims = {(_ns(c), c["metadata"]["name"]): c for c in cluster.pvcs}
    pvs = {pv["metadata"]["name"]: pv for pv in cluster.pvs}
    delayed = {sc["metadata"]["name"] for sc in cluster.classes
               if sc.get("volumeBindingMode") == "WaitForFirstConsumer"}  # fmt: skip
    unbound: list[Obj] = []
    for name in dict.fromkeys(_claims(pod)):
        claim = claims.get((_ns(pod), name))
        if claim is None:
            out.append(f"claim {name} does not exist")
        elif volume := (claim.get("spec") or {}).get("volumeName"):
            if volume not in pvs or not _pv_fits_node(pvs[volume], node):
                out.append(f"claim {name}: its PV {volume} does not fit the node")
        elif (claim.get("spec") or {}).get("storageClassName") in delayed:
            unbound.append(claim)
        else:
            out.append(f"claim {name} is unbound and not WaitForFirstConsumer")
    free = [pv for pv in cluster.pvs if _pv_fits_node(pv, node)]

    def assign(i: int, used: frozenset[str]) -> bool:
        if i == len(unbound):
            return True
        return any(assign(i + 1, used | {pv["metadata"]["name"]}) for pv in free
                   if pv["metadata"]["name"] not in used and _pv_serves(pv, unbound[i]))  # fmt: skip

    if not assign(0, frozenset()):
        out.append(f"no available PVs on the node for claims {[c['metadata']['name'] for c in unbound]}")
    return out


def bound_claim_violations(pod: Obj, node: Obj, pvs: list[Obj], pvcs: list[Obj]) -> list[str]:
    """After the pod was placed and its claims bound: each claim bound to a PV that fits the node."""
    claims = {c["metadata"]["name"]: c for c in pvcs if _ns(c) == _ns(pod)}
    by_name = {pv["metadata"]["name"]: pv for pv in pvs}
    out = []
    for name in dict.fromkeys(_claims(pod)):
        volume = ((claims.get(name) or {}).get("spec") or {}).get("volumeName")
        if not volume:
            out.append(f"claim {name} not bound after placement")
        elif volume not in by_name or not _pv_fits_node(by_name[volume], node):
            out.append(f"claim {name} bound to PV {volume}, which does not fit the node")
    return out
