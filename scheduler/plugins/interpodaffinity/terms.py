"""Parsed inter-pod affinity terms (docs/rules/scheduler-interpodaffinity.md#terms): a pod's required
and preferred (anti-)affinity terms, each a set of namespaces, a label selector and a topology key, as
kube-scheduler 1.20's ``framework.NewPodInfo`` builds them.

- ``namespaces`` empty means the pod's own namespace; ``namespaceSelector`` (a later API addition) is
  ignored, as a 1.20 API server drops the field.
- The selector is ``metav1.LabelSelectorAsSelector``: absent matches no pod, ``{}`` every pod.
- A category whose terms fail to parse (a selector ``LabelSelectorAsSelector`` rejects) has no terms
  and sets the pod's parse error (the last failing category names it, as in Go).
- Weights are int32: ``weight * multiplier`` wraps as Go's int32 product does.
Imports: apis (jsonfields, labelselector), scheduler.framework.interfaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector, LabelSelectorError
from scheduler.framework.interfaces import Pod


def int32(v: int) -> int:
    """Go's int32 wrap-around."""
    return (v + 2**31) % 2**32 - 2**31


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A processed ``PodAffinityTerm``. ``selector`` None matches no pod (``labels.Nothing``).
    Hashed once: terms key the pod index's groups, looked up on every pod change."""

    namespaces: frozenset[str]
    selector: LabelSelector | None
    topology_key: str
    hash_: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash_", hash((self.namespaces, self.selector, self.topology_key)))

    def __hash__(self) -> int:
        return self.hash_

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """``schedutil.PodMatchesTermsNamespaceAndSelector``."""
        return namespace in self.namespaces and self.selector is not None and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    term: AffinityTerm
    weight: int  # int32


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's processed terms; ``error`` is the parse error (None when every term parsed)."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti: tuple[WeightedTerm, ...] = ()
    error: str | None = None
    has_affinity: bool = False  # kube's podWithAffinity: podAffinity or podAntiAffinity set

    @property
    def has_preferred(self) -> bool:
        return bool(self.preferred_affinity or self.preferred_anti)


NO_TERMS: Final = PodTerms()


def pod_namespace(pod: Mapping[str, Any]) -> str:
    ns = as_mapping(pod.get("metadata")).get("namespace")
    return ns if isinstance(ns, str) else ""


def pod_label_set(pod: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` (a JSON null value reads as "", as Go decodes it)."""
    raw = as_mapping(as_mapping(pod.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _term(namespace: str, raw: Mapping[str, Any]) -> AffinityTerm:
    """Raises LabelSelectorError when the selector does not parse."""
    names = frozenset(str(n) for n in _list(raw.get("namespaces")) if isinstance(n, str))
    if not _list(raw.get("namespaces")):
        names = frozenset({namespace})
    sel = raw.get("labelSelector")
    selector = None if sel is None else LabelSelector.from_dict(sel)
    key = raw.get("topologyKey")
    return AffinityTerm(names, selector, key if isinstance(key, str) else "")


def _weight(value: Any) -> int:
    return int32(value) if isinstance(value, int) and not isinstance(value, bool) else 0


_PARSED: dict[tuple[str, str], PodTerms] = {}
_PARSED_LIMIT: Final = 4096


def parse_pod_terms(pod: Pod | Mapping[str, Any]) -> PodTerms:
    """The pod's terms (``framework.NewPodInfo``). Pods of one workload carry the same affinity, so
    results are kept by (namespace, affinity JSON as written): a workload's pods share one parse."""
    affinity = as_mapping(as_mapping(pod.get("spec")).get("affinity"))
    aff, anti = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
    if aff is None and anti is None:
        return NO_TERMS
    ns = pod_namespace(pod)
    key = (ns, repr((aff, anti)))
    found = _PARSED.get(key)
    if found is None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        found = _PARSED[key] = _parse(ns, aff, anti)
    return found


def _parse(ns: str, aff: Any, anti: Any) -> PodTerms:
    error: str | None = None
    required: dict[str, tuple[AffinityTerm, ...]] = {}
    preferred: dict[str, tuple[WeightedTerm, ...]] = {}
    for category, group, name in (
        ("requiredAffinityTerms", aff, "requiredDuringSchedulingIgnoredDuringExecution"),
        ("requiredAntiAffinityTerms", anti, "requiredDuringSchedulingIgnoredDuringExecution"),
    ):
        try:
            required[category] = tuple(_term(ns, as_mapping(t)) for t in _list(as_mapping(group).get(name)))
        except LabelSelectorError as e:
            required[category], error = (), f"{category}: {e}"
    for category, group in (("preferredAffinityTerms", aff), ("preferredAntiAffinityTerms", anti)):
        raw = _list(as_mapping(group).get("preferredDuringSchedulingIgnoredDuringExecution"))
        try:
            preferred[category] = tuple(
                WeightedTerm(
                    _term(ns, as_mapping(as_mapping(t).get("podAffinityTerm"))),
                    _weight(as_mapping(t).get("weight")),
                )
                for t in raw
            )
        except LabelSelectorError as e:
            preferred[category], error = (), f"{category}: {e}"
    return PodTerms(
        required["requiredAffinityTerms"],
        required["requiredAntiAffinityTerms"],
        preferred["preferredAffinityTerms"],
        preferred["preferredAntiAffinityTerms"],
        error,
        has_affinity=True,
    )


def matches_all(terms: tuple[AffinityTerm, ...], namespace: str, labels: Mapping[str, str]) -> bool:
    """``podMatchesAllAffinityTerms``: false for no terms."""
    return bool(terms) and all(t.matches(namespace, labels) for t in terms)
