"""NodeMetric (slo.koordinator.sh/v1alpha1) spec and status as dataclasses, with Go's exact JSON form.

Field names are upstream's (docs/crds.md); the JSON codec is ``apis.gojson`` (each field a ``jf`` spec).
``to_dict()`` reproduces Go's ``encoding/json`` output: struct fields (every ResourceMap,
``AggregatedUsage.duration``) are never dropped by ``omitempty``, so an empty ResourceMap is ``{}``;
empty lists and strings and nil pointers are omitted; ``numaNodeID`` is always written; ``extensions``
is ``{"Object": {...}}``; quantities are canonical strings, durations Go duration strings (``"5m0s"``),
``updateTime`` RFC 3339 in UTC at second precision. Map keys are written in Go's sorted order.
``from_dict()`` reads that form (plus ``"5m"`` durations, bare-number quantities, plain ``extensions``
objects and any RFC 3339 offset), ignores unknown keys like Go, and raises NodeMetricError naming the
JSON path and the value on bad input. ``AggregatePolicy`` and ``NodeMetricCollectPolicy`` are also the
types of the slo-controller-config colocation strategy (``apis.sloconfig_types``).
The bulk of a report (podsMetric, ResourceMaps, aggregated usages, windows, metadata) decodes through the
shortcut kinds of ``apis.nodemetric_kinds``, which give the generic decoder's result.
Imports: the standard library and apis (constants, duration, gojson, gojson_base, gojson_collections,
gojson_kinds, kubeobjects, nodemetric_kinds, qos, quantity, rfc3339).
Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Final, Self, TypeVar

from apis import constants as c
from apis.duration import Duration
from apis.gojson import GoStruct, StructKind, jf
from apis.gojson_base import DecodeError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import (
    EnumKind,
    ExtensionsKind,
    IntKind,
    ObjectKind,
    QuantityKind,
    StrKind,
    TimeKind,
)
from apis.kubeobjects import ObjectMeta
from apis.nodemetric_kinds import (
    JsonObjectKind,
    PodsMetricKind,
    ResourceMapKind,
    UsageMapKind,
    WindowKind,
)
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Quantity
from apis.rfc3339 import format_rfc3339, parse_rfc3339

__all__ = [
    "RESOURCE_MAP",
    "AggregatePolicy",
    "AggregatedUsage",
    "AggregationType",
    "HostApplicationMetricInfo",
    "MemoryCollectPolicy",
    "NUMAMetricInfo",
    "NodeMetric",
    "NodeMetricCollectPolicy",
    "NodeMetricError",
    "NodeMetricInfo",
    "NodeMetricSpec",
    "NodeMetricStatus",
    "PeakMetric",
    "PodMetricInfo",
    "ReclaimableMetric",
    "ResourceMap",
    "default_collect_policy",
    "format_time",
    "parse_time",
]

T = TypeVar("T")


class NodeMetricError(ValueError):
    """Invalid NodeMetric input; ``path`` is the JSON path (e.g. ``status.podsMetric[1].qos``)."""

    def __init__(self, path: str, reason: str, value: object) -> None:
        super().__init__(f"{path or '<root>'}: {reason} (got {value!r})")
        self.path = path
        self.value = value


def parse_time(v: object, path: str = "updateTime") -> datetime:
    """An RFC 3339 time as an aware UTC datetime (fractions beyond microseconds are truncated)."""
    try:
        return parse_rfc3339(v)
    except ValueError as e:
        raise NodeMetricError(path, str(e), v) from None


def format_time(t: datetime) -> str:
    """Go's ``metav1.Time`` JSON: UTC, RFC 3339, whole seconds (``2026-11-22T02:16:47Z``)."""
    return format_rfc3339(t, "updateTime")


class _Model(GoStruct):
    """``from_dict`` raising NodeMetricError (the first bad field) instead of DecodeError."""

    __slots__ = ()

    @classmethod
    def from_dict(cls, data: Any, path: str = "") -> Self:
        if not isinstance(data, Mapping):
            raise NodeMetricError(path, "expected an object", data)
        try:
            return super().from_dict(data, path)
        except DecodeError as e:
            first = e.errors[0]
            raise NodeMetricError(first.path, first.message, first.value) from None


class AggregationType(enum.StrEnum):
    """Keys of ``AggregatedUsage.usage``."""

    AVG = "avg"
    P50 = "p50"
    P90 = "p90"
    P95 = "p95"
    P99 = "p99"


class MemoryCollectPolicy(enum.StrEnum):
    """``nodeMemoryCollectPolicy``: which memory kind the node, pod and host-app usages report."""

    USAGE_WITHOUT_PAGE_CACHE = "usageWithoutPageCache"
    USAGE_WITH_HOT_PAGE_CACHE = "usageWithHotPageCache"
    USAGE_WITH_PAGE_CACHE = "usageWithPageCache"


DEFAULT_AGGREGATE_DURATION_SECONDS: Final = 300
DEFAULT_REPORT_INTERVAL_SECONDS: Final = 60
DEFAULT_AGGREGATE_DURATIONS: Final = (Duration.parse("5m"), Duration.parse("10m"), Duration.parse("30m"))
DEFAULT_MEMORY_COLLECT_POLICY: Final = MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE


RESOURCES = MapKind(QuantityKind(), nullable=False, dotted=True)
STR = StrKind(nullable=False)


def _struct(cls: type[Any]) -> StructKind:
    return StructKind(cls, pointer=False)


def _items(cls: type[Any]) -> ListKind:
    return ListKind(StructKind(cls, pointer=False), nullable=False, null_items=False)


# --- status ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class ResourceMap(_Model):
    """A resource list (``resources``) plus optional GPU ``devices`` kept as free-form JSON objects."""

    resources: dict[str, Quantity] = jf("resources", RESOURCES)
    devices: list[dict[str, Any]] | None = jf(
        "devices", ListKind(ObjectKind(), keep_empty=True, null_items=False)
    )


RESOURCE_MAP = ResourceMapKind(ResourceMap)


@dataclass(slots=True)
class AggregatedUsage(_Model):
    """Usages of one window by aggregation type; a cold type holds an empty ResourceMap."""

    usage: dict[AggregationType, ResourceMap] = jf("usage", UsageMapKind(RESOURCE_MAP, AggregationType))
    duration: Duration = jf("duration", WindowKind(null_ok=True))


@dataclass(slots=True)
class NUMAMetricInfo(_Model):
    """Usage of one NUMA node (an item of ``nodeMetric.numaUsages``)."""

    numa_node_id: int = jf("numaNodeID", IntKind(32, pointer=False), required=True)
    node_usage: ResourceMap = jf("nodeUsage", RESOURCE_MAP)
    system_usage: ResourceMap = jf("systemUsage", RESOURCE_MAP)


@dataclass(slots=True)
class NodeMetricInfo(_Model):
    """``status.nodeMetric``: node and system usages, their aggregated windows and per-NUMA usages."""

    node_usage: ResourceMap = jf("nodeUsage", RESOURCE_MAP)
    aggregated_node_usages: list[AggregatedUsage] = jf("aggregatedNodeUsages", _items(AggregatedUsage))
    system_usage: ResourceMap = jf("systemUsage", RESOURCE_MAP)
    aggregated_system_usages: list[AggregatedUsage] = jf("aggregatedSystemUsages", _items(AggregatedUsage))
    numa_usages: list[NUMAMetricInfo] = jf("numaUsages", _items(NUMAMetricInfo))


@dataclass(slots=True)
class PodMetricInfo(_Model):
    """An item of ``status.podsMetric``; ``extensions`` is the free-form object (None = absent)."""

    name: str = jf("name", STR)
    namespace: str = jf("namespace", STR)
    pod_usage: ResourceMap = jf("podUsage", RESOURCE_MAP)
    priority: PriorityClass = jf("priority", EnumKind(PriorityClass))
    qos: QoSClass = jf("qos", EnumKind(QoSClass))
    extensions: dict[str, Any] | None = jf("extensions", ExtensionsKind())


@dataclass(slots=True)
class HostApplicationMetricInfo(_Model):
    """An item of ``status.hostApplicationMetric`` (priority and QoS copied from the NodeSLO spec)."""

    name: str = jf("name", STR)
    usage: ResourceMap = jf("usage", RESOURCE_MAP)
    priority: PriorityClass = jf("priority", EnumKind(PriorityClass))
    qos: QoSClass = jf("qos", EnumKind(QoSClass))


@dataclass(slots=True)
class ReclaimableMetric(_Model):
    """``status.prodReclaimableMetric``: Prod resources predicted reclaimable."""

    resource: ResourceMap = jf("resource", RESOURCE_MAP)


@dataclass(slots=True)
class PeakMetric(_Model):
    """``status.prodPeakMetric``: predicted peak of Prod usage (system included, margin applied)."""

    resource: ResourceMap = jf("resource", RESOURCE_MAP)


@dataclass(slots=True)
class NodeMetricStatus(_Model):
    """NodeMetric ``status``. Built with the defaults it carries an empty prodReclaimableMetric, as the
    koordlet always writes one; None there means the object has none (e.g. freshly created, or decoded
    from a status without one)."""

    update_time: datetime | None = jf("updateTime", TimeKind())
    node_metric: NodeMetricInfo | None = jf("nodeMetric", StructKind(NodeMetricInfo))
    pods_metric: list[PodMetricInfo] = jf(
        "podsMetric", PodsMetricKind(PodMetricInfo, RESOURCE_MAP, PriorityClass, QoSClass)
    )
    host_application_metric: list[HostApplicationMetricInfo] = jf(
        "hostApplicationMetric", _items(HostApplicationMetricInfo)
    )
    prod_reclaimable_metric: ReclaimableMetric | None = jf(
        "prodReclaimableMetric", StructKind(ReclaimableMetric), default_factory=ReclaimableMetric
    )
    prod_peak_metric: PeakMetric | None = jf("prodPeakMetric", StructKind(PeakMetric))


# --- spec ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class AggregatePolicy(_Model):
    """``nodeAggregatePolicy`` / ``metricAggregatePolicy``: the windows of the aggregated usages, in order."""

    durations: list[Duration] = jf("durations", ListKind(WindowKind(), nullable=False, null_items=False))


@dataclass(slots=True)
class NodeMetricCollectPolicy(_Model):
    """``spec.metricCollectPolicy``; every field optional (None = not set, the agent defaults it)."""

    aggregate_duration_seconds: int | None = jf("aggregateDurationSeconds", IntKind(64))
    report_interval_seconds: int | None = jf("reportIntervalSeconds", IntKind(64))
    node_aggregate_policy: AggregatePolicy | None = jf("nodeAggregatePolicy", StructKind(AggregatePolicy))
    node_memory_collect_policy: MemoryCollectPolicy | None = jf(
        "nodeMemoryCollectPolicy", EnumKind(MemoryCollectPolicy, pointer=True)
    )

    def with_defaults(self) -> NodeMetricCollectPolicy:
        """The defaults overlaid with this policy as Go's JSON merge does (an absent or empty
        durations list keeps the default windows); every field of the result is set."""
        base = default_collect_policy()
        own = self.node_aggregate_policy
        return NodeMetricCollectPolicy(
            aggregate_duration_seconds=_first(
                self.aggregate_duration_seconds, base.aggregate_duration_seconds
            ),
            report_interval_seconds=_first(self.report_interval_seconds, base.report_interval_seconds),
            node_aggregate_policy=(
                AggregatePolicy(list(own.durations))
                if own is not None and own.durations
                else base.node_aggregate_policy
            ),
            node_memory_collect_policy=_first(
                self.node_memory_collect_policy, base.node_memory_collect_policy
            ),
        )


def _first(a: T | None, b: T | None) -> T | None:
    return b if a is None else a


def default_collect_policy() -> NodeMetricCollectPolicy:
    """Defaults: 300 s aggregation, 60 s reports, windows [5m, 10m, 30m], usageWithoutPageCache.

    See docs/configuration.md#colocation-config.
    """
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=DEFAULT_AGGREGATE_DURATION_SECONDS,
        report_interval_seconds=DEFAULT_REPORT_INTERVAL_SECONDS,
        node_aggregate_policy=AggregatePolicy(list(DEFAULT_AGGREGATE_DURATIONS)),
        node_memory_collect_policy=DEFAULT_MEMORY_COLLECT_POLICY,
    )


@dataclass(slots=True)
class NodeMetricSpec(_Model):
    """NodeMetric ``spec``, written by koord-manager."""

    collect_policy: NodeMetricCollectPolicy | None = jf(
        "metricCollectPolicy", StructKind(NodeMetricCollectPolicy)
    )


@dataclass(slots=True)
class NodeMetric(_Model):
    """A whole NodeMetric object (cluster-scoped, name = node name); ``metadata`` is kept verbatim.
    A default NodeMetric has an empty status (``{}``), like the object koord-manager creates."""

    metadata: ObjectMeta = jf("metadata", JsonObjectKind(pointer=False))
    spec: NodeMetricSpec = jf("spec", _struct(NodeMetricSpec))
    status: NodeMetricStatus = jf("status", _struct(NodeMetricStatus))
    api_version: str = jf(
        "apiVersion", EnumKind((c.SLO_API_VERSION,)), default_factory=lambda: c.SLO_API_VERSION
    )
    kind: str = jf("kind", EnumKind((c.NODE_METRIC_KIND,)), default_factory=lambda: c.NODE_METRIC_KIND)

    _JSON_ORDER: ClassVar[tuple[str, ...]] = ("apiVersion", "kind")

    @property
    def name(self) -> str:
        """The node name (``metadata.name``)."""
        name = self.metadata.get("name", "")
        return name if isinstance(name, str) else ""
