"""The ClusterColocationProfile pod mutation (pure): what koord-manager's pod-mutating webhook does to a
pod being created (docs/rules/colocation-profile.md).

``mutate_pod`` takes the pod, the profiles as raw CR objects, the labels of the pod's Namespace, the
PriorityClasses and the feature gate, and returns a ``Mutation`` (a new pod; the input is never
modified). Only ``CREATE`` mutates. The profiles that match are applied in name order, each with its
probability; then, unless a matched profile carries the skip annotation or the gate is on, the
resources are rewritten (``manager.webhook.batchresources``). A profile whose object cannot be decoded
(wrong JSON types, an unknown ``qosClass``: what the API server's schema refuses) is skipped with a
logged warning. Everything upstream only finds out while applying a profile refuses the admission with
``ProfileError``: a missing PriorityClass, a ``probability`` string that is not a percentage, a patch
that cannot be applied, a malformed quantity.
Imports: the standard library, apis (colocationprofile, constants, qos) and manager.webhook's pure
helpers (batchresources, strategicmerge).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from apis.colocationprofile import (
    ClusterColocationProfile,
    ColocationProfileError,
    ProfileSelector,
    parse_profile,
)
from manager.webhook.batchresources import ResourceError, rewrite_resources
from manager.webhook.strategicmerge import PatchError, strategic_merge

__all__ = [
    "CREATE",
    "FEATURE_SKIP_MUTATING_RESOURCES",
    "Mutation",
    "ProfileError",
    "matches",
    "mutate_pod",
    "percent",
]

log = logging.getLogger(__name__)

CREATE: Final = "CREATE"
FEATURE_SKIP_MUTATING_RESOURCES: Final = "ColocationProfileSkipMutatingResources"
_GO_INT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


class ProfileError(ValueError):
    """The admission must be refused with this message (e.g. a missing PriorityClass)."""


@dataclass(frozen=True)
class Mutation:
    """The webhook's outcome: whether it mutated the pod, and the pod after it."""

    mutated: bool
    pod: dict[str, Any]  # a new dict; the input pod is never modified


def mutate_pod(
    pod: Mapping[str, Any],
    *,
    operation: str,
    profiles: Sequence[Mapping[str, Any]],
    namespace_labels: Mapping[str, str] | None,
    priority_classes: Mapping[str, Mapping[str, Any]],
    skip_mutating_resources: bool = False,
    rand_intn: Callable[[int], int] = random.randrange,
) -> Mutation:
    """Apply the matching profiles to ``pod``; raises ProfileError when the admission must be refused.

    ``namespace_labels`` are the labels of the pod's Namespace (the request's namespace when the pod
    names none), None when it could not be read; ``priority_classes`` maps
    a name to its PriorityClass object (``value``, ``preemptionPolicy``); ``skip_mutating_resources``
    is the feature gate ColocationProfileSkipMutatingResources; ``rand_intn(100)`` is the dice of the
    ``probability`` rule (docs/rules/colocation-profile.md#probability).
    """
    out = copy.deepcopy(dict(pod))
    if operation != CREATE or not profiles:
        return Mutation(False, out)
    _check_pod(out)
    selected = [p for p in _decoded(profiles) if matches(p, out, namespace_labels)]
    if not selected:
        return Mutation(False, out)
    skip_resources = skip_mutating_resources
    mutated = False
    for profile in sorted(selected, key=lambda p: p.name):
        # The skip annotation counts even when the dice skip the profile.
        skip_resources = skip_resources or profile.skip_update_resources
        if _skipped_by_probability(profile, rand_intn):
            log.debug("profile %s skipped for pod %s by its probability", profile.name, _pod_key(out))
            continue
        out = _apply(out, profile, priority_classes)
        mutated = True
    if skip_resources:
        return Mutation(mutated, out)
    try:
        rewritten = rewrite_resources(out)
    except ResourceError as e:
        raise ProfileError(str(e)) from None
    return Mutation(mutated or rewritten, out)


def _decoded(profiles: Sequence[Mapping[str, Any]]) -> list[ClusterColocationProfile]:
    out: list[ClusterColocationProfile] = []
    for raw in profiles:
        try:
            out.append(parse_profile(raw))
        except ColocationProfileError as e:
            metadata = raw.get("metadata") if isinstance(raw, Mapping) else None
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            log.warning("ClusterColocationProfile %r is invalid and is skipped: %s", name, e)
    return out


def matches(
    profile: ClusterColocationProfile, pod: Mapping[str, Any], namespace_labels: Mapping[str, str] | None
) -> bool:
    """Whether the profile selects the pod (docs/rules/colocation-profile.md#which-profiles-match-a-pod):
    each selector that is set must match; a selector that cannot be evaluated (invalid, or the
    Namespace unreadable) counts as a match."""
    spec = profile.spec
    if spec.namespace_selector is not None and not _allows(spec.namespace_selector, namespace_labels):
        return False
    return spec.selector is None or _allows(spec.selector, _labels(pod, "labels"))


def _allows(selector: ProfileSelector, labels: Mapping[str, str] | None) -> bool:
    if selector.error is not None or selector.is_empty() or labels is None:
        return True
    return selector.matches(labels)


def percent(probability: int | str | None) -> int:
    """``probability`` scaled against 100 (int as is, ``"N%"`` → N, unset → 100); raises ProfileError
    for a string that is not a percentage (docs/rules/colocation-profile.md#probability)."""
    if probability is None:
        return 100
    if isinstance(probability, int):
        return probability
    if not probability.endswith("%"):
        raise ProfileError("invalid value for IntOrString: invalid type: string is not a percentage")
    digits = probability[:-1]
    if _GO_INT.fullmatch(digits) is None or not -(1 << 63) <= int(digits) < 1 << 63:
        reason = "invalid syntax" if _GO_INT.fullmatch(digits) is None else "value out of range"
        raise ProfileError(
            f"invalid value for IntOrString: invalid value {json.dumps(probability, ensure_ascii=False)}: "
            f"strconv.Atoi: parsing {json.dumps(digits, ensure_ascii=False)}: {reason}"
        )
    return math.floor(float(int(digits)) * 100.0 / 100.0)


def _skipped_by_probability(profile: ClusterColocationProfile, rand_intn: Callable[[int], int]) -> bool:
    p = percent(profile.spec.probability)
    return p == 0 or (p != 100 and rand_intn(100) > p)


# --- applying one profile (docs/rules/colocation-profile.md#what-a-profile-writes) -------------------
def _apply(
    pod: dict[str, Any], profile: ClusterColocationProfile, priority_classes: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    spec = profile.spec
    if spec.labels:
        _writable(pod, "labels").update(spec.labels)
    if spec.annotations:
        _writable(pod, "annotations").update(spec.annotations)
    # Mappings and suffixes read the pod as the previous steps left it. Go walks these maps in random
    # order; koord in the order written (it only matters when one mapping feeds another).
    for name, mapping in (("labels", spec.label_keys_mapping), ("annotations", spec.annotation_keys_mapping)):
        if mapping:
            values = _writable(pod, name)
            for old, new in mapping.items():
                values[new] = values.get(old, "")
    labels = _labels(pod, "labels")
    for key, suffix in (spec.label_suffixes or {}).items():
        if key in labels:
            _writable(pod, "labels")[key] = labels[key] + suffix
    if spec.scheduler_name:
        _pod_spec(pod)["schedulerName"] = spec.scheduler_name
    if spec.qos_class:
        _writable(pod, "labels")[c.LABEL_POD_QOS] = spec.qos_class
    if spec.priority_class_name:
        _set_priority_class(pod, spec.priority_class_name, priority_classes)
    if spec.koordinator_priority is not None:
        _writable(pod, "labels")[c.LABEL_POD_PRIORITY] = str(spec.koordinator_priority)
    if spec.patch is not None:
        try:
            pod = strategic_merge(pod, spec.patch)
        except PatchError as e:
            raise ProfileError(str(e)) from None
        pod = _without_directives(pod)
        _check_pod(pod)
    return pod


def _set_priority_class(
    pod: dict[str, Any], name: str, priority_classes: Mapping[str, Mapping[str, Any]]
) -> None:
    """``priorityClassName``, and ``priority`` / ``preemptionPolicy`` from the PriorityClass (a class
    without a preemption policy clears the pod's)."""
    pc = priority_classes.get(name)
    if pc is None:
        raise ProfileError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
    value = pc.get("value", 0)
    policy = pc.get("preemptionPolicy")
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < 1 << 31:
        raise ProfileError(f"PriorityClass {name}: value {value!r} is not an int32")
    if policy is not None and not isinstance(policy, str):
        raise ProfileError(f"PriorityClass {name}: preemptionPolicy {policy!r} is not a string")
    spec = _pod_spec(pod)
    spec["priorityClassName"] = name
    spec["priority"] = value
    if policy is None:
        spec.pop("preemptionPolicy", None)
    else:
        spec["preemptionPolicy"] = policy


# --- pod access ------------------------------------------------------------------------------------
def _check_pod(pod: Mapping[str, Any]) -> None:
    """What Go's decoding of the Pod would refuse among the fields the mutation reads or writes."""
    metadata = pod.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ProfileError(f"metadata: must be an object (got {metadata!r:.80})")
    spec = pod.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise ProfileError(f"spec: must be an object (got {spec!r:.80})")
    for name in ("labels", "annotations"):
        values = (metadata or {}).get(name)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(isinstance(v, str) for v in values.values()):
            raise ProfileError(f"metadata.{name}: must be an object of strings (got {values!r:.80})")


def _labels(pod: Mapping[str, Any], name: str) -> Mapping[str, str]:
    metadata = pod.get("metadata")
    values = metadata.get(name) if isinstance(metadata, dict) else None
    return values if isinstance(values, dict) else {}


def _writable(pod: dict[str, Any], name: str) -> dict[str, str]:
    """``metadata.<name>``, created when absent (only when a value is about to be written)."""
    metadata = pod.get("metadata")
    if not isinstance(metadata, dict):
        metadata = pod["metadata"] = {}
    values = metadata.get(name)
    if not isinstance(values, dict):
        values = metadata[name] = {}
    return values


def _pod_spec(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = pod["spec"] = {}
    return spec


def _without_directives(value: Any) -> Any:
    """Drop the ``$``-prefixed keys a patch may leave (no Pod field has one: decoding drops them)."""
    if isinstance(value, dict):
        return {k: _without_directives(v) for k, v in value.items() if not str(k).startswith("$")}
    if isinstance(value, list):
        return [_without_directives(v) for v in value]
    return value


def _pod_key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    return f"{meta.get('namespace', '')}/{meta.get('name', meta.get('generateName', ''))}"
