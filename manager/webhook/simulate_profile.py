"""``koord simulate`` for kind ``ColocationProfile`` (docs/simulate.md#colocationprofile): what
koord-manager's pod-mutating webhook makes of a pod, through ``manager.webhook.profile.mutate_pod``.

Inputs: ``admissionOperation`` (``CREATE`` by default), ``profiles`` (ClusterColocationProfile objects),
``namespaces`` (Namespace objects; the pod's is found by name, none found = the Namespace cannot be
read), ``priorityClasses`` (PriorityClass objects), ``features``
(``{"ColocationProfileSkipMutatingResources": bool}``), ``randIntn`` (what ``rand.Intn(100)`` returns,
0 by default) and ``pod``. Result ``{"mutated": bool, "pod": {...}}``. Bad input raises ValueError
naming the field and value, an invalid profile included; a refused admission raises the webhook's
``ProfileError`` (a ValueError too) with the message the API server would show.
Imports: the standard library, apis.colocationprofile and manager.webhook.profile. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.colocationprofile import ColocationProfileError, parse_profile
from apis.objectcheck import object_list
from manager.webhook.profile import FEATURE_SKIP_MUTATING_RESOURCES, mutate_pod

__all__ = ["simulate"]

OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")
FEATURES: Final = (FEATURE_SKIP_MUTATING_RESOURCES,)


def simulate(scenario: Mapping[str, Any]) -> dict[str, Any]:
    operation = scenario.get("admissionOperation", "CREATE")
    if operation not in OPERATIONS:
        raise ValueError(f"admissionOperation={operation!r}: expected one of {', '.join(OPERATIONS)}")
    pod = scenario.get("pod")
    if not isinstance(pod, Mapping):
        raise ValueError(f"pod: expected a Pod object, got {pod!r:.80}")
    profiles = object_list(scenario, "profiles")
    for i, profile in enumerate(profiles):
        try:
            parse_profile(profile, f"profiles[{i}]")
        except ColocationProfileError as e:
            raise ValueError(str(e)) from None
    priority_classes: dict[str, Mapping[str, Any]] = {}
    for i, pc in enumerate(object_list(scenario, "priorityClasses")):
        priority_classes[_name(pc, f"priorityClasses[{i}]")] = _priority_class(pc, f"priorityClasses[{i}]")
    listed = enumerate(object_list(scenario, "namespaces"))
    namespaces = {_name(ns, f"namespaces[{i}]"): ns for i, ns in listed}
    metadata = pod.get("metadata")
    namespace = metadata.get("namespace", "") if isinstance(metadata, Mapping) else ""
    if not isinstance(namespace, str):
        raise ValueError(f"pod.metadata.namespace: expected a string, got {namespace!r:.80}")
    namespace_labels = _labels(namespaces[namespace], namespace) if namespace in namespaces else None
    result = mutate_pod(
        pod,
        operation=operation,
        profiles=profiles,
        namespace_labels=namespace_labels,
        priority_classes=priority_classes,
        skip_mutating_resources=_features(scenario).get(FEATURE_SKIP_MUTATING_RESOURCES, False),
        rand_intn=_dice(scenario),
    )
    return {"mutated": result.mutated, "pod": result.pod}


def _name(obj: Mapping[str, Any], path: str) -> str:
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{path}.metadata.name: expected a non-empty string, got {name!r:.80}")
    return name


def _labels(namespace: Mapping[str, Any], name: str) -> dict[str, str]:
    labels = namespace.get("metadata", {}).get("labels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(
            f"namespaces[{name}].metadata.labels: expected an object of strings, got {labels!r:.80}"
        )
    return dict(labels)


def _priority_class(pc: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    value = pc.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"{path}.value={value!r}: expected an int32")
    policy = pc.get("preemptionPolicy")
    if policy is not None and not isinstance(policy, str):
        raise ValueError(f"{path}.preemptionPolicy={policy!r}: expected a string")
    return pc


def _features(scenario: Mapping[str, Any]) -> dict[str, bool]:
    features = scenario.get("features") or {}
    if not isinstance(features, Mapping):
        raise ValueError(f"features: expected an object of booleans, got {features!r:.80}")
    for name, on in features.items():
        if name not in FEATURES:
            raise ValueError(f"features[{name!r}]: unknown feature gate (known: {', '.join(FEATURES)})")
        if not isinstance(on, bool):
            raise ValueError(f"features[{name!r}]={on!r}: expected a boolean")
    return dict(features)


def _dice(scenario: Mapping[str, Any]) -> Callable[[int], int]:
    value = scenario.get("randIntn", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 100:
        raise ValueError(f"randIntn={value!r}: expected an integer 0..99 (what rand.Intn(100) returns)")

    def rand_intn(n: int) -> int:
        return value

    return rand_intn
