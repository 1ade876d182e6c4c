"""NodeAffinity's weighted preferred terms (a pod's and the args') and ``NodeAffinityArgs``
(docs/rules/scheduler-affinity-taint.md#nodeaffinityargs), as kube-scheduler v1.20.2 parses them.

Preferred terms (``component-helpers`` ``NewPreferredSchedulingTerms``): a term of weight 0 or with an
empty preference is skipped; a preference that does not parse is an error of the whole list.
``NodeAffinityArgs.addedAffinity`` is a ``v1.NodeAffinity``: its ``requiredDuringScheduling...`` node
selector is ANDed with every pod's constraints (``NewNodeSelector``: empty terms skipped, no terms left
matches no node), its preferred terms are added to every pod's. ``ValidateNodeAffinityArgs`` accepts the
args only when both parse. The field is spelled the same in v1beta1 and v1.
Imports: apis.jsonfields, scheduler.framework, scheduler.plugins.nodeaffinity_terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis.jsonfields import as_mapping
from scheduler.framework.interfaces import Pod
from scheduler.plugins.nodeaffinity_terms import Term, as_list, parse_term

PREFERRED: Final = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED: Final = "requiredDuringSchedulingIgnoredDuringExecution"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

WeightedTerm = tuple[Term, int]


@dataclass(frozen=True, slots=True)
class Preferred:
    """Parsed preferred terms: ``terms`` (each with its weight), or the first parse ``error``."""

    terms: tuple[WeightedTerm, ...] = ()
    error: str | None = None


NO_PREFERENCES: Final = Preferred()


def _weight(raw: Any) -> int:
    """An int32 weight; anything else reads as 0 (skipped): the API server admits only 1..100."""
    if isinstance(raw, bool) or not isinstance(raw, int) or not _INT32_MIN <= raw <= _INT32_MAX:
        return 0
    return raw


def parse_preferred(raw: Any, path: str) -> Preferred:
    """``NewPreferredSchedulingTerms`` over a JSON list of ``{weight, preference}``."""
    out: list[WeightedTerm] = []
    for k, item in enumerate(as_list(raw)):
        entry = as_mapping(item)
        weight = _weight(entry.get("weight"))
        if weight == 0:
            continue
        term = parse_term(as_mapping(entry.get("preference")))
        if term is None:
            continue
        if isinstance(term, str):
            return Preferred(error=f"{path}[{k}].preference.{term}")
        out.append((term, weight))
    return Preferred(tuple(out))


def pod_preferred(pod: Pod) -> Preferred:
    """The pod's ``affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution``."""
    affinity = as_mapping(pod.get("spec")).get("affinity")
    if not affinity:  # the common case
        return NO_PREFERENCES
    raw = as_mapping(as_mapping(affinity).get("nodeAffinity")).get(PREFERRED)
    return parse_preferred(raw, PREFERRED) if raw else NO_PREFERENCES


@dataclass(frozen=True, slots=True)
class NodeAffinityArgs:
    """``required``: the added node selector's terms (None: no added required affinity; empty: no node
    matches); ``preferred``: the added preferred terms."""

    required: tuple[Term, ...] | None = None
    preferred: tuple[WeightedTerm, ...] = ()

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> NodeAffinityArgs:
        """Defaults (no added affinity) and validation as kube's; ValueError names the field and value."""
        added = (args or {}).get("addedAffinity")
        if added is None:
            return cls()
        if not isinstance(added, Mapping):
            raise ValueError(f"addedAffinity={added!r}: must be an object")
        where = "addedAffinity."
        required: tuple[Term, ...] | None = None
        selector = added.get(REQUIRED)
        if selector is not None:
            if not isinstance(selector, Mapping):
                raise ValueError(f"{where}{REQUIRED}={selector!r}: must be an object")
            raw_terms = selector.get("nodeSelectorTerms")
            if raw_terms is not None and not isinstance(raw_terms, list):
                raise ValueError(f"{where}{REQUIRED}.nodeSelectorTerms={raw_terms!r}: must be a list")
            terms: list[Term] = []
            for k, raw in enumerate(as_list(raw_terms)):
                if not isinstance(raw, Mapping):
                    raise ValueError(f"{where}{REQUIRED}.nodeSelectorTerms[{k}]={raw!r}: must be an object")
                term = parse_term(raw)
                if isinstance(term, str):
                    raise ValueError(f"{where}{REQUIRED}.nodeSelectorTerms[{k}].{term}")
                if term is not None:
                    terms.append(term)
            required = tuple(terms)
        raw_pref = added.get(PREFERRED)
        if raw_pref is not None and not isinstance(raw_pref, list):
            raise ValueError(f"{where}{PREFERRED}={raw_pref!r}: must be a list")
        for k, item in enumerate(as_list(raw_pref)):
            w = item.get("weight", 0) if isinstance(item, Mapping) else None
            if isinstance(w, bool) or not isinstance(w, int) or not _INT32_MIN <= w <= _INT32_MAX:
                raise ValueError(f"{where}{PREFERRED}[{k}].weight={w!r}: must be an int32")
        preferred = parse_preferred(raw_pref, where + PREFERRED)
        if preferred.error is not None:
            raise ValueError(preferred.error)
        return cls(required, preferred.terms)
