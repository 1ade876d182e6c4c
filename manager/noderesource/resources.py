"""Shared pieces of the NodeResource plugins (docs/rules/manager.md#batch-resource-formula,
docs/rules/manager.md#mid-resources, docs/rules/manager.md#edge-cases-kept-from-upstream): exact cpu/memory
amounts, the node's capacity and reservations, NodeMetric reads, the degrade rule, the result types.

Amounts are exact integers in **nano units** (1e-9 core, 1e-9 byte): every parsed quantity is a whole
number of nanos (Go rounds to nano on parse), so sums and differences are exact like Go's
``resource.Quantity`` arithmetic; ``milli``/``value`` round away from zero like ``MilliValue()``/``Value()``.
Float steps (percent ratios) follow upstream's ``float64`` expressions exactly.
NodeMetric objects are read as their JSON dicts (decoding them into ``apis.nodemetric`` dataclasses
costs ~0.5 ms each, too slow for a whole-cluster recompute); a ``NodeMetric`` instance is also accepted.
Imports: the standard library, ``apis`` and ``apis.cpuset``. Pure, no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Generic, NamedTuple, TypeVar

from apis import constants as c
from apis.cpuset import CPUSetError, parse_cpuset
from apis.gojson import GoStruct, jf
from apis.gojson_collections import MapKind
from apis.gojson_kinds import QuantityKind, StrKind
from apis.kubeobjects import Node, Pod
from apis.nodemetric import NodeMetric
from apis.pod import pod_key, pod_requests, resources_key
from apis.qos import (
    PriorityClass,
    QoSClass,
    priority_class_by_name,
    priority_class_with_default,
    qos_class_raw,
)
from apis.quantity import Quantity
from apis.rfc3339 import parse_rfc3339
from apis.sloconfig_merge import default_colocation_strategy
from apis.sloconfig_types import ColocationStrategy
from apis.waits import clamp_seconds

NANO: Final = 10**9
MILLI_NANOS: Final = 10**6
INT64_MAX: Final = 2**63 - 1
T = TypeVar("T")
DEFAULT_STRATEGY: Final = default_colocation_strategy()


# --- exact amounts -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _nano_of_text(text: str) -> int:
    return _nano_of_quantity(Quantity.parse(text))


@functools.lru_cache(maxsize=4096)
def _nano_of_quantity(q: Quantity) -> int:
    f = q.as_fraction() * NANO
    return f.numerator // f.denominator  # exact: parsed quantities are whole nanos


def nano(raw: object) -> int:
    """A quantity (JSON string/number/null, or a ``Quantity``) in nano units; raises QuantityError."""
    if type(raw) is str and len(raw) <= 64:
        return _nano_of_text(raw)
    if isinstance(raw, Quantity):
        return _nano_of_quantity(raw)
    return _nano_of_quantity(Quantity.from_json(raw))


def _away(n: int, unit: int) -> int:
    """n / unit rounded away from zero, saturating at ±(2^63-1) (Go ``Value``/``MilliValue``)."""
    q = -(-abs(n) // unit)
    q = min(q, INT64_MAX)
    return q if n >= 0 else -q


def milli(n: int) -> int:
    """``MilliValue()`` of a nano amount."""
    return _away(n, MILLI_NANOS)


def value(n: int) -> int:
    """``Value()`` of a nano amount."""
    return _away(n, NANO)


def multiply_milli(n: int, ratio: float) -> int:
    """Go ``MultiplyMilliQuant``: ``NewMilliQuantity(int64(float64(q.MilliValue())*ratio))``, in nanos."""
    return int(float(milli(n)) * ratio) * MILLI_NANOS


def multiply_value(n: int, ratio: float) -> int:
    """Go ``MultiplyQuant``: ``NewQuantity(int64(float64(q.Value())*ratio))``, in nanos."""
    return int(float(value(n)) * ratio) * NANO


@dataclass(frozen=True, slots=True)
class Resources:
    """A cpu/memory pair in nano units (the only two resources the plugins consider)."""

    cpu: int = 0
    memory: int = 0

    def __add__(self, o: Resources) -> Resources:
        return Resources(self.cpu + o.cpu, self.memory + o.memory)

    def __sub__(self, o: Resources) -> Resources:
        return Resources(self.cpu - o.cpu, self.memory - o.memory)

    def max(self, o: Resources) -> Resources:
        return Resources(max(self.cpu, o.cpu), max(self.memory, o.memory))

    def min(self, o: Resources) -> Resources:
        return Resources(min(self.cpu, o.cpu), min(self.memory, o.memory))

    def clamp(self) -> Resources:
        """Negative parts raised to 0."""
        return Resources(max(self.cpu, 0), max(self.memory, 0))

    @property
    def milli_cpu(self) -> int:
        return milli(self.cpu)

    @property
    def memory_bytes(self) -> int:
        return value(self.memory)

    def explain(self) -> dict[str, int]:
        """``{"cpu": milli-cores, "memory": bytes}`` for operators."""
        return {"cpu": self.milli_cpu, "memory": self.memory_bytes}


ZERO: Final = Resources()


def resources_of(rl: object) -> Resources:
    """cpu/memory of a JSON ResourceList (or a dict of Quantity); absent → 0."""
    if type(rl) is not dict and not isinstance(rl, Mapping):
        return ZERO
    cpu, mem = rl.get(c.RESOURCE_CPU), rl.get(c.RESOURCE_MEMORY)
    return Resources(0 if cpu is None else nano(cpu), 0 if mem is None else nano(mem))


# --- results -----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceItem:
    """One extended resource a plugin decided on. ``value`` is the integer written to the node (milli-cores
    for ``*-cpu``, bytes for ``*-memory``); ``None`` or ``reset`` removes it from capacity/allocatable."""

    name: str
    value: int | None
    reset: bool = False


@dataclass(frozen=True, slots=True)
class CalculateResult(Generic[T]):
    """A plugin's decision: ``items``, the ``terms`` of its formula (None when degraded/disabled), a
    human ``message`` and a machine ``reason`` (``""`` on a normal calculation)."""

    items: tuple[ResourceItem, ...]
    terms: T | None
    message: str = ""
    reason: str = ""

    @property
    def reset(self) -> bool:
        return any(i.reset for i in self.items)

    def value_of(self, name: str) -> int | None:
        for item in self.items:
            if item.name == name:
                return None if item.reset else item.value
        return None


def reset_result(names: tuple[str, ...], message: str, reason: str) -> CalculateResult[Any]:
    return CalculateResult(tuple(ResourceItem(n, None, reset=True) for n in names), None, message, reason)


# --- strategy ----------------------------------------------------------------------------------------
def setting(strategy: ColocationStrategy, attr: str) -> Any:
    """A strategy field, or ``DefaultColocationStrategy``'s when unset
    (docs/rules/manager.md#missing-strategy-fields-take-the-default-strategys-values)."""
    v = getattr(strategy, attr)
    return getattr(DEFAULT_STRATEGY, attr) if v is None else v


# --- node --------------------------------------------------------------------------------------------
def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    s = obj.get("status")
    return s if isinstance(s, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    return ann if isinstance(ann, Mapping) else {}


def node_capacity(node: Node) -> Resources:
    return resources_of(_status(node).get("capacity"))


def node_allocatable(node: Node) -> Resources:
    return resources_of(_status(node).get("allocatable"))


def kubelet_reserved(node: Node) -> Resources:
    """``max(capacity − allocatable, 0)`` per resource (a resource missing from allocatable counts 0)."""
    return (node_capacity(node) - node_allocatable(node)).clamp()


@dataclass(frozen=True, slots=True)
class NodeReservation(GoStruct):
    """Annotation ``node.koordinator.sh/reservation`` (Go JSON: case-insensitive names)."""

    # jf() returns a dataclasses.field()
    resources: dict[str, Quantity] | None = jf("resources", MapKind(QuantityKind()))  # noqa: RUF009
    reserved_cpus: str | None = jf("reservedCPUs", StrKind())
    apply_policy: str | None = jf("applyPolicy", StrKind())


@functools.lru_cache(maxsize=4096)
def _reservation_of_text(text: str) -> Resources:
    try:
        raw = json.loads(text)
        res = NodeReservation.from_dict(raw) if isinstance(raw, dict) else None
    except (ValueError, RecursionError):  # JSON syntax (nested too deep too), DecodeError
        return ZERO
    if res is None:
        return ZERO
    amount = resources_of(res.resources or {})
    if res.reserved_cpus:
        try:
            cpus = parse_cpuset(res.reserved_cpus)
        except CPUSetError:
            return ZERO
        amount = dataclasses.replace(amount, cpu=len(cpus) * NANO)
    return amount


def annotation_reserved(node: Node) -> Resources:
    """The reservation annotation's cpu/memory; ``reservedCPUs`` replaces cpu by its CPU count; an
    undecodable annotation or cpuset means no reservation
    (docs/rules/manager.md#the-node-reservation-annotation)."""
    text = annotations_of(node).get(c.ANNOTATION_NODE_RESERVATION)
    return _reservation_of_text(text) if isinstance(text, str) else ZERO


def node_reserved(node: Node) -> Resources:
    """``max(kubelet reserved, annotation reservation)`` per resource."""
    return kubelet_reserved(node).max(annotation_reserved(node))


# --- NodeMetric --------------------------------------------------------------------------------------
NodeMetricInput = Mapping[str, Any] | NodeMetric | None


def metric_dict(nodemetric: NodeMetricInput) -> Mapping[str, Any] | None:
    if isinstance(nodemetric, NodeMetric):
        return nodemetric.to_dict()
    return nodemetric


def metric_status(nm: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return {} if nm is None else _status(nm)


def node_metric_info(nm: Mapping[str, Any] | None) -> Mapping[str, Any]:
    info = metric_status(nm).get("nodeMetric")
    return info if isinstance(info, Mapping) else {}


def usage_of(resource_map: object) -> Resources:
    """cpu/memory of a NodeMetric ResourceMap (``{"resources": {...}}``)."""
    if type(resource_map) is dict or isinstance(resource_map, Mapping):
        return resources_of(resource_map.get("resources"))
    return ZERO


def is_degraded(nm: Mapping[str, Any] | None, now: datetime, degrade_minutes: int) -> bool:
    """No NodeMetric, no (or an unreadable) ``status.updateTime``, or ``now`` strictly after
    ``updateTime + degradeTimeMinutes`` (docs/rules/manager.md#degrade; at most 30 days,
    docs/configuration.md#duration-limits)."""
    raw = metric_status(nm).get("updateTime")
    if raw is None:
        return True
    try:
        updated = parse_rfc3339(raw)
    except ValueError:
        return True
    grace = timedelta(seconds=clamp_seconds(degrade_minutes * 60, "colocation-config degradeTimeMinutes"))
    try:
        return now > updated + grace
    except OverflowError:  # an updateTime near year 9999: not stale
        return False


def host_app_usage(nm: Mapping[str, Any] | None, above: int) -> Resources:
    """Sum of ``hostApplicationMetric[].usage`` whose priority class default value is > ``above``."""
    total = ZERO
    apps = metric_status(nm).get("hostApplicationMetric")
    for app in apps if isinstance(apps, list) else ():
        if isinstance(app, Mapping) and priority_class_by_name(app.get("priority")).default_value > above:
            total = total + usage_of(app.get("usage"))
    return total


def metric_priority(entry: Mapping[str, Any]) -> PriorityClass:
    return priority_class_by_name(entry.get("priority"))


@dataclass(slots=True)
class PodMetrics:
    """``status.podsMetric`` by ``namespace/name`` (the last entry wins for a repeated key, as Go's map)."""

    by_key: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, nm: Mapping[str, Any] | None) -> PodMetrics:
        entries = metric_status(nm).get("podsMetric")
        out: dict[str, Mapping[str, Any]] = {}
        for e in entries if isinstance(entries, list) else ():
            if isinstance(e, Mapping):
                out[f"{e.get('namespace') or ''}/{e.get('name') or ''}"] = e
        return cls(out)


# --- pods --------------------------------------------------------------------------------------------
ACTIVE_PHASES: Final = frozenset({"Running", "Pending"})


class PodInfo(NamedTuple):
    """What the plugins read from a pod, extracted once per recompute: ``namespace/name``, whether it is
    Running/Pending, and (active pods only) its priority class with defaults, effective cpu/memory
    request in nanos and whether it is labelled LSE."""

    key: str
    active: bool
    priority: PriorityClass = PriorityClass.NONE
    cpu: int = 0
    memory: int = 0
    lse: bool = False


_REQUEST_MEMO_LIMIT: Final = 4096
_request_memo: dict[Hashable, tuple[int, int]] = {}


def _request_nanos(pod: Pod) -> tuple[int, int]:
    """Effective cpu/memory request (``apis.pod.pod_requests``) in nanos, memoised by the pod's
    ``resources_key`` (everything the aggregation reads), so a recurring shape is summed once."""
    key = resources_key(pod, "requests")
    if key is not None:
        hit = _request_memo.get(key)
        if hit is not None:
            return hit
    req = pod_requests(pod)
    cpu, mem = req.get(c.RESOURCE_CPU), req.get(c.RESOURCE_MEMORY)
    pair = (0 if cpu is None else nano(cpu), 0 if mem is None else nano(mem))
    if key is not None:
        if len(_request_memo) >= _REQUEST_MEMO_LIMIT:
            _request_memo.clear()
        _request_memo[key] = pair
    return pair


def pod_info(pod: Pod) -> PodInfo:
    st = pod.get("status")
    key = pod_key(pod)
    if (type(st) is not dict and not isinstance(st, Mapping)) or st.get("phase") not in ACTIVE_PHASES:
        return PodInfo(key, False)
    cpu, mem = _request_nanos(pod)
    return PodInfo(
        key,
        True,
        priority_class_with_default(pod),
        cpu,
        mem,
        # qos_class_with_default can only yield LSE from the label (Kubernetes QoS maps to LSR/LS/BE)
        qos_class_raw(pod) is QoSClass.LSE,
    )


PodsInput = Sequence[Pod] | Sequence[PodInfo]


def pod_infos(pods: PodsInput) -> Sequence[PodInfo]:
    """``pod_info`` of every pod; a sequence already made of PodInfo is returned as is (so a controller
    running several plugins on one node extracts the pods once)."""
    if pods and isinstance(pods[0], PodInfo):
        return pods  # type: ignore[return-value]
    return [p if isinstance(p, PodInfo) else pod_info(p) for p in pods]
