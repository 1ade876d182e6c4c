"""The default estimator (docs/rules/scheduler.md#estimating-a-pod): the load a pod is expected to add,
per resource of the scaling-factor map, in resource-vector order, plus the force-estimation deadline of
an assigned pod.

Float arithmetic is Go's: ``int64(math.Round(float64(q) * float64(factor) / 100))`` evaluated left to right
in IEEE doubles, with ``math.Round`` rounding half away from zero (never Python's ``round``).
Pods of one workload are identical in everything the estimate reads, so ``Estimator.facts`` memoises the
estimate and the priority class by a key made of exactly those inputs (``estimate_key``).
Imports: the standard library, apis (constants, pod, qos, quantity), scheduler.plugins.loadaware
(args, profile).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from apis import constants as c
from apis.pod import (
    parse_time,
    pod_annotations,
    pod_condition,
    pod_labels,
    pod_limits,
    pod_requests,
    spec,
    status,
)
from apis.qos import PriorityClass, parse_go_int, priority_class_with_default, translate_resource_name
from apis.quantity import Quantity, QuantityError
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.profile import GoJSONError, Vector, go_int_map, go_json_loads

DEFAULT_MILLI_CPU_REQUEST: Final = 250
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024
_GO_ZERO_TIME: Final = datetime(1, 1, 1, tzinfo=UTC)
_CPU_DEFAULTED: Final = frozenset({c.RESOURCE_CPU, c.BATCH_CPU})
_MEMORY_DEFAULTED: Final = frozenset({c.RESOURCE_MEMORY, c.BATCH_MEMORY})
_MEMO_LIMIT: Final = 4096
_STR: Final = frozenset({str})
_MISSING: Final = ("<missing>",)  # a tuple: its type tags it apart from every frozen value


def _freeze(value: Any) -> Hashable:
    """A hashable image of a JSON-like value that keeps every type: strings stand for themselves, any
    other scalar is ``(type, value)`` (so 1, 1.0 and True differ), containers are ``(type, items)``."""
    t = type(value)
    if t is str:
        text: str = value
        return text
    if t is int or t is bool or t is float or value is None:
        return (t, value)  # hashable scalars: what the last line gives, without the Mapping check
    if t is dict and _STR.issuperset(map(type, value.values())) and _STR.issuperset(map(type, value)):
        return (t, tuple(value.items()))  # what the general form below gives, built in C
    if t is dict or isinstance(value, Mapping):
        return (
            t,
            tuple(
                [
                    (k if type(k) is str else _freeze(k), v if type(v) is str else _freeze(v))
                    for k, v in value.items()
                ]
            ),
        )
    if t is list or t is tuple:
        return (t, tuple([_freeze(v) for v in value]))
    hash(value)
    return (t, value)


def _containers_key(value: Any, init: bool) -> Hashable:
    if type(value) is not list and type(value) is not tuple:
        return (type(value),)
    return (
        type(value),
        tuple(
            [
                (_freeze(x.get("resources")), _freeze(x.get("restartPolicy")) if init else None)
                if isinstance(x, Mapping)
                else _MISSING
                for x in value
            ]
        ),
    )


def estimate_key(pod: Mapping[str, Any], customize: bool) -> Hashable:
    """Every input of ``Estimator.estimate`` and ``priority_class_with_default``: the containers' and init
    containers' ``resources`` (and ``restartPolicy``), ``overhead``, ``priority``, the priority-class and
    QoS labels, ``status.qosClass`` and, with ``customize``, the scaling-factor annotation. Raises
    TypeError when some value is not hashable."""
    sp, labels = spec(pod), pod_labels(pod)
    return (
        _containers_key(sp.get("containers"), False),
        _containers_key(sp.get("initContainers"), True),
        _freeze(sp.get("overhead")),
        _freeze(sp.get("priority", _MISSING)),
        _freeze(labels.get(c.LABEL_POD_PRIORITY_CLASS, _MISSING)),
        _freeze(labels.get(c.LABEL_POD_QOS, _MISSING)),
        _freeze(status(pod).get("qosClass", _MISSING)),
        _freeze(pod_annotations(pod).get(c.ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS, _MISSING))
        if customize
        else None,
    )


def round_half_away(x: float) -> float:
    """Go ``math.Round``: the nearest integer, halves away from zero (exact for every double)."""
    ax = abs(x)
    if not math.isfinite(ax):
        return x
    f = math.floor(ax)
    if ax - f >= 0.5:  # ax - f is exact
        f += 1
    return float(math.copysign(f, x))


def go_time(value: Any) -> float | None:
    """An RFC 3339 time as epoch seconds; None for absent, malformed or Go's zero time."""
    t = parse_time(value)
    if t is None or t == _GO_ZERO_TIME:
        return None
    return t.timestamp()


def estimate_resource(
    requests: Mapping[str, Quantity], limits: Mapping[str, Quantity], name: str, factor: int
) -> int:
    """``estimatedUsedByResource`` for the (translated) resource ``name``."""
    zero = Quantity.from_int(0)
    limit = limits.get(name, zero) if name else zero
    request = requests.get(name, zero) if name else zero
    quantity = limit if limit > request else request
    if quantity.is_zero():
        if name in _CPU_DEFAULTED:
            return DEFAULT_MILLI_CPU_REQUEST
        if name in _MEMORY_DEFAULTED:
            return DEFAULT_MEMORY_REQUEST
        return 0
    if name == c.RESOURCE_CPU:
        q, lim = quantity.milli_value(), limit.milli_value()
    else:
        q, lim = quantity.value(), limit.value()
    estimated = int(round_half_away(float(q) * float(factor) / 100))
    if lim > 0 and estimated > lim:
        estimated = lim
    return estimated


class Estimator:
    """``defaultEstimator`` bound to the args and the resource vector."""

    def __init__(self, args: LoadAwareSchedulingArgs, resources: Sequence[str]) -> None:
        self.args = args
        self.resources = tuple(resources)
        self._col = {r: j for j, r in enumerate(self.resources)}
        self._memo: dict[Hashable, tuple[Vector, PriorityClass]] = {}
        self._last: tuple[tuple[Any, ...], tuple[Vector, PriorityClass]] | None = None

    def facts(self, pod: Mapping[str, Any]) -> tuple[Vector, PriorityClass]:
        """``(estimate_or_empty(pod), priority_class_with_default(pod))``, memoised by ``estimate_key``.
        A pod whose inputs are the very objects of the previous call's (Reserve's assumed copy of the
        pod PreFilter just estimated) skips the key; pod dicts are never mutated in place."""
        sp, meta = spec(pod), pod.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        parts = (
            sp.get("containers"),
            sp.get("initContainers"),
            sp.get("overhead"),
            sp.get("priority"),
            meta.get("labels"),
            meta.get("annotations"),
            pod.get("status"),
        )
        last = self._last
        if last is not None and all(a is b for a, b in zip(parts, last[0], strict=True)):
            return last[1]
        try:
            key = estimate_key(pod, self.args.allow_customize_estimation)
        except TypeError:
            return self.estimate_or_empty(pod), priority_class_with_default(pod)
        found = self._memo.get(key)
        if found is None:
            found = (self.estimate_or_empty(pod), priority_class_with_default(pod))
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = found
        self._last = (parts, found)
        return found

    def factors(self, pod: Mapping[str, Any]) -> dict[str, int]:
        """Args factors, overridden/extended by the pod annotation when ``allowCustomizeEstimation``."""
        factors = self.args.estimated_scaling_factors
        if not self.args.allow_customize_estimation:
            return factors
        text = pod_annotations(pod).get(c.ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS)
        if not isinstance(text, str) or not text:
            return factors
        try:
            custom = go_int_map(go_json_loads(text))
        except GoJSONError:
            return factors
        if not custom:
            return factors
        merged = dict(custom)
        for name, factor in factors.items():
            merged.setdefault(name, factor)
        return merged

    def estimate(self, pod: Mapping[str, Any]) -> Vector:
        """The estimate vector (zeros for resources without a factor). Unparsable pod resources raise
        QuantityError."""
        requests, limits = pod_requests(pod), pod_limits(pod)
        priority_class = priority_class_with_default(pod)
        out = [0] * len(self.resources)
        for name, factor in self.factors(pod).items():
            j = self._col.get(name)
            if j is None:
                continue
            real = translate_resource_name(priority_class, name)
            out[j] = estimate_resource(requests, limits, real, factor)
        return tuple(out)

    def estimate_or_empty(self, pod: Mapping[str, Any]) -> Vector:
        """An estimation error is remembered as an empty (all-zero) vector, as PreFilter does."""
        try:
            return self.estimate(pod)
        except (QuantityError, ValueError):
            return (0,) * len(self.resources)

    def assigned_estimate(self, pod: Mapping[str, Any]) -> Vector | None:
        """The estimate of an assigned pod: None when all-zero (koord-free pods included) or unparsable."""
        return self.assigned_facts(pod)[0]

    def assigned_facts(self, pod: Mapping[str, Any]) -> tuple[Vector | None, PriorityClass]:
        """``(assigned_estimate(pod), priority_class_with_default(pod))`` from one memo lookup."""
        vec, priority_class = self.facts(pod)
        if priority_class is PriorityClass.FREE or not any(vec):
            return None, priority_class
        return vec, priority_class

    def _seconds(self, pod: Mapping[str, Any], annotation: str, default: int | None) -> int:
        value = -1
        if self.args.allow_customize_estimation:
            parsed = parse_go_int(pod_annotations(pod).get(annotation), 64)
            value = -1 if parsed is None else parsed
        if default is not None and value < 0:
            value = default
        return value

    def deadline(self, pod: Mapping[str, Any], timestamp: float) -> float | None:
        """``shouldEstimatePodDeadline``: the end of the force-estimation window, or None."""
        after_scheduled = self._seconds(
            pod,
            c.ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED,
            self.args.estimated_seconds_after_pod_scheduled,
        )
        after_initialized = self._seconds(
            pod,
            c.ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED,
            self.args.estimated_seconds_after_initialized,
        )
        if after_initialized > 0:
            cond = pod_condition(pod, "Initialized")
            if cond is not None and cond.get("status") == "True":
                t = go_time(cond.get("lastTransitionTime"))
                if t is not None:
                    return t + after_initialized
        if after_scheduled > 0:
            return timestamp + after_scheduled
        return None


def assign_timestamp(pod: Mapping[str, Any], now: float) -> float:
    """The first ``PodScheduled`` condition's transition time when True and non-zero, else ``now``."""
    cond = pod_condition(pod, "PodScheduled")
    if cond is not None and cond.get("status") == "True":
        t = go_time(cond.get("lastTransitionTime"))
        if t is not None:
            return t
    return now
