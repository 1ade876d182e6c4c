"""Read-only helpers over a Kubernetes Pod as the API returns it (a plain camelCase JSON mapping).

Effective pod requests/limits follow Kubernetes' ``PodRequests``/``PodLimits``
(docs/rules/manager.md#batch-resource-formula, docs/rules/scheduler.md#estimating-a-pod,
docs/rules/scheduler.md#effective-requests-and-limits): containers summed, each init container's peak maxed
in (sidecars per KEP-753), plus ``spec.overhead``; no defaulting of requests from limits. Also pod keys,
phase, owners, conditions, times.
Imports: the standard library and ``apis`` (jsonfields, quantity, rfc3339) only. Pure functions, no I/O.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Final

from apis.jsonfields import as_mapping
from apis.quantity import Quantity, parse_resource_list
from apis.rfc3339 import parse_rfc3339

ResourceList = dict[str, Quantity]

PHASE_PENDING: Final = "Pending"
PHASE_RUNNING: Final = "Running"
PHASE_SUCCEEDED: Final = "Succeeded"
PHASE_FAILED: Final = "Failed"

CONTAINER_RESTART_POLICY_ALWAYS: Final = "Always"
KIND_DAEMONSET: Final = "DaemonSet"


# --- field access ----------------------------------------------------------------------------------


def _sequence(value: Any) -> Sequence[Any]:
    if type(value) is list:
        return value
    return value if isinstance(value, list | tuple) else ()


def metadata(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(pod.get("metadata"))


def spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(pod.get("spec"))


def status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(pod.get("status"))


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(metadata(pod).get("labels"))


def pod_annotations(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(metadata(pod).get("annotations"))


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec.containers`` (entries that are not objects are skipped)."""
    return [as_mapping(c) for c in _sequence(spec(pod).get("containers")) if isinstance(c, Mapping)]


def init_containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """``spec.initContainers`` in declaration order."""
    return [as_mapping(c) for c in _sequence(spec(pod).get("initContainers")) if isinstance(c, Mapping)]


def is_restartable_init_container(container: Mapping[str, Any]) -> bool:
    """A sidecar (KEP-753): an init container with ``restartPolicy: Always``."""
    return container.get("restartPolicy") == CONTAINER_RESTART_POLICY_ALWAYS


def resource_list(value: Any, names: Iterable[str] | None = None) -> ResourceList:
    """Parse a JSON ResourceList (``{"cpu": "500m", ...}``); ``null``/absent → empty, a ``null`` entry → 0.

    With ``names``, only those resources are parsed (others are ignored even if malformed).
    Raises ``QuantityError`` (naming the resource) on a malformed quantity.
    """
    raw = as_mapping(value)
    if names is not None:
        wanted = frozenset(names)
        raw = {name: q for name, q in raw.items() if name in wanted}
    return parse_resource_list(raw)


def container_requests(container: Mapping[str, Any], names: Iterable[str] | None = None) -> ResourceList:
    """The container's ``resources.requests`` as written (no defaulting from limits)."""
    return resource_list(as_mapping(container.get("resources")).get("requests"), names)


def container_limits(container: Mapping[str, Any], names: Iterable[str] | None = None) -> ResourceList:
    """The container's ``resources.limits``."""
    return resource_list(as_mapping(container.get("resources")).get("limits"), names)


# --- effective pod requests / limits ---------------------------------------------------------------


def add_resource_list(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """``into[name] += other[name]`` for every name of ``other`` (missing names start from it)."""
    for name, q in other.items():
        current = into.get(name)
        into[name] = q if current is None else current + q


def max_resource_list(into: ResourceList, other: Mapping[str, Quantity]) -> None:
    """``into[name] = max(into[name], other[name])``; a name missing from ``into`` is taken from ``other``."""
    for name, q in other.items():
        current = into.get(name)
        if current is None or q > current:
            into[name] = q


def _effective(pod: Mapping[str, Any], field: str) -> ResourceList:
    """Kubernetes' aggregation for one of ``requests``/``limits`` (before overhead).

    ``sum(containers) + sum(sidecars)`` maxed with every init container's peak, where the peak of the
    i-th init container is its own amount plus all sidecars declared before it (a sidecar's own peak
    includes itself).
    """
    total: ResourceList = {}
    for c in containers(pod):
        add_resource_list(total, resource_list(as_mapping(c.get("resources")).get(field)))

    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in init_containers(pod):
        amount = resource_list(as_mapping(c.get("resources")).get(field))
        if is_restartable_init_container(c):
            add_resource_list(total, amount)
            add_resource_list(sidecars, amount)
            peak = dict(sidecars)
        else:
            peak = dict(amount)
            add_resource_list(peak, sidecars)
        max_resource_list(init_peak, peak)

    max_resource_list(total, init_peak)
    return total


def pod_overhead(pod: Mapping[str, Any]) -> ResourceList:
    """``spec.overhead`` (RuntimeClass overhead), empty when absent."""
    return resource_list(spec(pod).get("overhead"))


# Memo of the aggregations by content: the key is every input they read, so a hit cannot be stale.
_MEMO_LIMIT: Final = 4096
_memo: dict[tuple[str, Hashable], ResourceList] = {}


def _list_key(value: Any) -> tuple[tuple[str, str | None], ...] | None:
    """A ResourceList's JSON as a key (None: not memoisable, e.g. a number, whose type matters)."""
    if not isinstance(value, Mapping):
        return ()  # read as an empty list
    items = tuple(value.items())
    for name, q in items:
        if type(name) is not str or (q is not None and type(q) is not str):
            return None
    return items


def resources_key(pod: Mapping[str, Any], field: str = "requests") -> Hashable | None:
    """Everything the aggregation of ``field`` (``requests``/``limits``) reads from the pod, as a
    hashable value: per container its ResourceList, per init container also whether it is a sidecar,
    and the overhead. None when some value is not a string or null (not memoised)."""
    sp = spec(pod)
    parts: list[Hashable] = []
    for c in _sequence(sp.get("containers")):
        if isinstance(c, Mapping):
            k = _list_key(as_mapping(c.get("resources")).get(field))
            if k is None:
                return None
            parts.append(k)
    parts.append(None)  # separator: containers | init containers
    for c in _sequence(sp.get("initContainers")):
        if isinstance(c, Mapping):
            k = _list_key(as_mapping(c.get("resources")).get(field))
            if k is None:
                return None
            parts.append((is_restartable_init_container(c), k))
    overhead = _list_key(sp.get("overhead"))
    if overhead is None:
        return None
    parts.append(overhead)
    return tuple(parts)


def _memoised(pod: Mapping[str, Any], field: str, compute: Callable[[], ResourceList]) -> ResourceList:
    """``compute()`` (a fresh dict each call), memoised by ``resources_key``; errors are not memoised."""
    key = resources_key(pod, field)
    if key is None:
        return compute()
    hit = _memo.get((field, key))
    if hit is None:
        hit = compute()
        if len(_memo) >= _MEMO_LIMIT:
            _memo.clear()
        _memo[(field, key)] = hit
    return dict(hit)  # Quantities are immutable; the dict is the caller's


def _pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    reqs = _effective(pod, "requests")
    add_resource_list(reqs, pod_overhead(pod))
    return reqs


def _pod_limits(pod: Mapping[str, Any]) -> ResourceList:
    limits = _effective(pod, "limits")
    for name, q in pod_overhead(pod).items():
        current = limits.get(name)
        if current is not None and not current.is_zero():
            limits[name] = current + q
    return limits


def pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    """Effective pod requests over every resource name, overhead included (``PodRequests``).

    A container with only limits contributes no request
    (docs/rules/scheduler.md#effective-requests-and-limits). Memoised by content.
    """
    return _memoised(pod, "requests", lambda: _pod_requests(pod))


def pod_limits(pod: Mapping[str, Any]) -> ResourceList:
    """Effective pod limits (``PodLimits``): overhead is added only to resources with a non-zero limit.
    Memoised by content."""
    return _memoised(pod, "limits", lambda: _pod_limits(pod))


# --- identity, phase, owners, conditions -----------------------------------------------------------


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name`` (an absent field renders as the empty string, as Go's ``%v`` of "" does)."""
    meta = metadata(pod)
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def phase(pod: Mapping[str, Any]) -> str:
    value = status(pod).get("phase")
    return value if isinstance(value, str) else ""


def is_terminated(pod: Mapping[str, Any]) -> bool:
    """Phase ``Succeeded`` or ``Failed``; a missing phase is not terminated.

    See docs/rules/scheduler.md#which-pods-are-tracked.
    """
    return phase(pod) in (PHASE_SUCCEEDED, PHASE_FAILED)


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Any ownerReference has kind ``DaemonSet``."""
    return any(
        isinstance(ref, Mapping) and ref.get("kind") == KIND_DAEMONSET
        for ref in _sequence(metadata(pod).get("ownerReferences"))
    )


def pod_condition(pod: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    """The first ``status.conditions`` entry of that ``type``, or None."""
    for cond in _sequence(status(pod).get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == condition_type:
            return cond
    return None


def parse_time(value: Any) -> _dt.datetime | None:
    """An RFC 3339 timestamp (``metav1.Time``/``MicroTime``) as an aware UTC datetime.

    None for absent, empty or malformed values (offset-less ones included). Fractional seconds beyond
    microseconds are truncated.
    """
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None
