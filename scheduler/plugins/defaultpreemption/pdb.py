"""PodDisruptionBudgets as preemption reads them (docs/rules/scheduler-preemption.md#pdb): kube's
``filterPodsWithPDBViolation``. Each budget allows ``status.disruptionsAllowed`` more disruptions; the
potential victims, most important first, each use one from every budget of their namespace whose
selector matches their labels (a pod without labels matches none; a budget whose selector is missing,
empty or invalid matches no pod; a pod already in the budget's ``status.disruptedPods`` uses none). A
pod for which some budget's allowance drops below zero violates it.
Imports: standard library, apis (labelselector, jsonfields), scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector, LabelSelectorError
from scheduler.framework.interfaces import Pod


@dataclass(frozen=True, slots=True)
class PDB:
    """What preemption reads of one PodDisruptionBudget; `selector` None matches no pod."""

    namespace: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted: frozenset[str]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> PDB:
        meta, spec, status = (as_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        namespace = meta.get("namespace")
        selector: LabelSelector | None = None
        raw = spec.get("selector")
        if raw is not None:
            try:
                selector = LabelSelector.from_dict(raw)
            except LabelSelectorError:
                selector = None  # kube skips a budget whose selector does not convert
            if selector is not None and selector.is_empty():
                selector = None  # labels.Everything() is Empty(): kube skips it too
        allowed = status.get("disruptionsAllowed")
        disrupted = as_mapping(status.get("disruptedPods"))
        return cls(
            namespace if isinstance(namespace, str) else "",
            selector,
            allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
            frozenset(k for k in disrupted if isinstance(k, str)),
        )


def _labels(pod: Pod) -> Mapping[str, str]:
    return as_mapping(as_mapping(pod.get("metadata")).get("labels"))


def _meta(pod: Pod, key: str) -> str:
    value = as_mapping(pod.get("metadata")).get(key)
    return value if isinstance(value, str) else ""


def filter_pods_with_pdb_violation(pods: Sequence[Pod], pdbs: Iterable[PDB]) -> tuple[list[Pod], list[Pod]]:
    """(violating, non-violating), each in `pods`' order (callers pass them most important first)."""
    budgets = list(pdbs)
    allowed = [b.disruptions_allowed for b in budgets]
    violating: list[Pod] = []
    non_violating: list[Pod] = []
    for pod in pods:
        violated = False
        labels = _labels(pod)
        if labels:
            namespace, name = _meta(pod, "namespace"), _meta(pod, "name")
            for i, b in enumerate(budgets):
                if b.namespace != namespace or b.selector is None or not b.selector.matches(labels):
                    continue
                if name in b.disrupted:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pod)
    return violating, non_violating
