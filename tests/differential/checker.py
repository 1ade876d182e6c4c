"""An independent checker of hard constraints for the differential tests
(docs/testing.md#the-kube-scheduler-oracle): given the cluster a scheduler saw and the node it chose,
which of the pod's hard constraints the placement breaks. Written from the Kubernetes API's meaning, not
from either scheduler's code (its own quantity reading, its own matching), so a bug shared by koord's
plugins and their oracles still shows.

Covers the enabled families (tests/differential/generator.py): node unschedulable, NoSchedule/NoExecute
taints, nodeSelector, required node affinity, resources (requests of containers and init containers,
extended resources) and the pod count, plus hostPorts. Not yet: inter-pod (anti-)affinity, topology
spread and volumes, whose families are disabled.
Imports: standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
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


def violations(pod: Obj, node: Obj, pods_on_node: list[Obj]) -> list[str]:
    """What placing `pod` on `node` breaks, given the pods already there (empty: nothing)."""
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
    return out
