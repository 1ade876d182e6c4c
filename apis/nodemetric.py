"""NodeMetric (slo.koordinator.sh/v1alpha1) spec and status as dataclasses, with Go's exact JSON form.

Field names are upstream's (SPEC §2). ``to_dict()`` reproduces Go's ``encoding/json`` output: struct
fields (every ResourceMap, ``AggregatedUsage.duration``) are never dropped by ``omitempty``, so an empty
ResourceMap is ``{}``; empty lists and strings and nil pointers are omitted; ``numaNodeID`` is always
written; ``extensions`` is ``{"Object": {...}}``; quantities are canonical strings, durations Go
duration strings (``"5m0s"``), ``updateTime`` RFC 3339 in UTC at second precision. Map keys are
written in Go's sorted order. ``from_dict()`` reads that form (plus ``"5m"`` durations, bare-number
quantities, plain ``extensions`` objects and any RFC 3339 offset), ignores unknown keys like Go, and
raises NodeMetricError naming the JSON path and the value on bad input.
Imports: the standard library and apis (constants, duration, qos, quantity and the private
_nodemetric_json codec helpers). Pure, no I/O.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, TypeVar

from apis import constants as c
from apis._nodemetric_json import (
    ALWAYS,
    INT32_RANGE,
    INT64_RANGE,
    JSON,
    OPTIONAL,
    Field,
    Model,
    NodeMetricError,
    constant,
    enum_field,
    format_time,
    int_field,
    items,
    join,
    json_object,
    list_of,
    obj,
    parse_duration,
    parse_time,
    str_field,
    struct,
)
from apis.duration import Duration
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Quantity, QuantityError

__all__ = [
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


# --- status ------------------------------------------------------------------------------------------
def _dec_resources(v: object, path: str) -> dict[str, Quantity]:
    out: dict[str, Quantity] = {}
    for name, q in obj(v, path).items():
        try:
            out[name] = Quantity.from_json(q)
        except QuantityError as e:
            raise NodeMetricError(join(path, name), f"invalid quantity: {e}", q) from None
    return out


@dataclass(slots=True)
class ResourceMap(Model):
    """A resource list (``resources``) plus optional GPU ``devices`` kept as free-form JSON objects."""

    resources: dict[str, Quantity] = field(default_factory=dict)
    devices: list[JSON] | None = None

    _FIELDS = (
        Field("resources", "resources", _dec_resources, lambda r: {k: str(r[k]) for k in sorted(r)}),
        Field("devices", "devices", list_of(json_object), copy.deepcopy),
    )


def _dec_usage(v: object, path: str) -> dict[AggregationType, ResourceMap]:
    out: dict[AggregationType, ResourceMap] = {}
    for key, rm in obj(v, path).items():
        if key not in AggregationType.__members__.values():
            raise NodeMetricError(
                path, f"unknown aggregation type, not one of {list(map(str, AggregationType))}", key
            )
        out[AggregationType(key)] = (
            ResourceMap() if rm is None else ResourceMap.from_dict(rm, join(path, key))
        )
    return out


@dataclass(slots=True)
class AggregatedUsage(Model):
    """Usages of one window by aggregation type; a cold type holds an empty ResourceMap."""

    usage: dict[AggregationType, ResourceMap] = field(default_factory=dict)
    duration: Duration = field(default_factory=lambda: Duration(0))

    _FIELDS = (
        Field("usage", "usage", _dec_usage, lambda u: {str(k): u[k].to_dict() for k in sorted(u, key=str)}),
        Field("duration", "duration", parse_duration, str, ALWAYS),
    )


@dataclass(slots=True)
class NUMAMetricInfo(Model):
    """Usage of one NUMA node (an item of ``nodeMetric.numaUsages``)."""

    numa_node_id: int = 0
    node_usage: ResourceMap = field(default_factory=ResourceMap)
    system_usage: ResourceMap = field(default_factory=ResourceMap)

    _FIELDS = (
        int_field("numa_node_id", "numaNodeID", INT32_RANGE, ALWAYS),
        struct("node_usage", "nodeUsage", ResourceMap),
        struct("system_usage", "systemUsage", ResourceMap),
    )


@dataclass(slots=True)
class NodeMetricInfo(Model):
    """``status.nodeMetric``: node and system usages, their aggregated windows and per-NUMA usages."""

    node_usage: ResourceMap = field(default_factory=ResourceMap)
    aggregated_node_usages: list[AggregatedUsage] = field(default_factory=list)
    system_usage: ResourceMap = field(default_factory=ResourceMap)
    aggregated_system_usages: list[AggregatedUsage] = field(default_factory=list)
    numa_usages: list[NUMAMetricInfo] = field(default_factory=list)

    _FIELDS = (
        struct("node_usage", "nodeUsage", ResourceMap),
        items("aggregated_node_usages", "aggregatedNodeUsages", AggregatedUsage),
        struct("system_usage", "systemUsage", ResourceMap),
        items("aggregated_system_usages", "aggregatedSystemUsages", AggregatedUsage),
        items("numa_usages", "numaUsages", NUMAMetricInfo),
    )


def _dec_extensions(v: object, path: str) -> JSON:
    d = obj(v, path)
    if set(d) == {"Object"}:  # Go's form: ExtensionsMap's only field under a literal "Object" key
        return {} if d["Object"] is None else json_object(d["Object"], join(path, "Object"))
    return json_object(d, path)


@dataclass(slots=True)
class PodMetricInfo(Model):
    """An item of ``status.podsMetric``; ``extensions`` is the free-form object (None = absent)."""

    name: str = ""
    namespace: str = ""
    pod_usage: ResourceMap = field(default_factory=ResourceMap)
    priority: PriorityClass = PriorityClass.NONE
    qos: QoSClass = QoSClass.NONE
    extensions: JSON | None = None

    _FIELDS = (
        str_field("name", "name"),
        str_field("namespace", "namespace"),
        struct("pod_usage", "podUsage", ResourceMap),
        enum_field("priority", "priority", PriorityClass),
        enum_field("qos", "qos", QoSClass),
        Field("extensions", "extensions", _dec_extensions, lambda e: {"Object": copy.deepcopy(e)}, OPTIONAL),
    )


@dataclass(slots=True)
class HostApplicationMetricInfo(Model):
    """An item of ``status.hostApplicationMetric`` (priority and QoS copied from the NodeSLO spec)."""

    name: str = ""
    usage: ResourceMap = field(default_factory=ResourceMap)
    priority: PriorityClass = PriorityClass.NONE
    qos: QoSClass = QoSClass.NONE

    _FIELDS = (
        str_field("name", "name"),
        struct("usage", "usage", ResourceMap),
        enum_field("priority", "priority", PriorityClass),
        enum_field("qos", "qos", QoSClass),
    )


@dataclass(slots=True)
class ReclaimableMetric(Model):
    """``status.prodReclaimableMetric``: Prod resources predicted reclaimable."""

    resource: ResourceMap = field(default_factory=ResourceMap)

    _FIELDS = (struct("resource", "resource", ResourceMap),)


@dataclass(slots=True)
class PeakMetric(Model):
    """``status.prodPeakMetric``: predicted peak of Prod usage (system included, margin applied)."""

    resource: ResourceMap = field(default_factory=ResourceMap)

    _FIELDS = (struct("resource", "resource", ResourceMap),)


@dataclass(slots=True)
class NodeMetricStatus(Model):
    """NodeMetric ``status``. Built with the defaults it carries an empty prodReclaimableMetric, as the
    koordlet always writes one; None there means the object has none (e.g. freshly created)."""

    update_time: datetime | None = None
    node_metric: NodeMetricInfo | None = None
    pods_metric: list[PodMetricInfo] = field(default_factory=list)
    host_application_metric: list[HostApplicationMetricInfo] = field(default_factory=list)
    prod_reclaimable_metric: ReclaimableMetric | None = field(default_factory=ReclaimableMetric)
    prod_peak_metric: PeakMetric | None = None

    _FIELDS = (
        Field("update_time", "updateTime", parse_time, format_time, OPTIONAL),
        struct("node_metric", "nodeMetric", NodeMetricInfo, OPTIONAL),
        items("pods_metric", "podsMetric", PodMetricInfo),
        items("host_application_metric", "hostApplicationMetric", HostApplicationMetricInfo),
        struct("prod_reclaimable_metric", "prodReclaimableMetric", ReclaimableMetric, OPTIONAL),
        struct("prod_peak_metric", "prodPeakMetric", PeakMetric, OPTIONAL),
    )


# --- spec ------------------------------------------------------------------------------------------
@dataclass(slots=True)
class AggregatePolicy(Model):
    """``nodeAggregatePolicy``: the windows of the aggregated usages, in order."""

    durations: list[Duration] = field(default_factory=list)

    _FIELDS = (Field("durations", "durations", list_of(parse_duration), lambda ds: [str(x) for x in ds]),)


@dataclass(slots=True)
class NodeMetricCollectPolicy(Model):
    """``spec.metricCollectPolicy``; every field optional (None = not set, the agent defaults it)."""

    aggregate_duration_seconds: int | None = None
    report_interval_seconds: int | None = None
    node_aggregate_policy: AggregatePolicy | None = None
    node_memory_collect_policy: MemoryCollectPolicy | None = None

    _FIELDS = (
        int_field("aggregate_duration_seconds", "aggregateDurationSeconds", INT64_RANGE, OPTIONAL),
        int_field("report_interval_seconds", "reportIntervalSeconds", INT64_RANGE, OPTIONAL),
        struct("node_aggregate_policy", "nodeAggregatePolicy", AggregatePolicy, OPTIONAL),
        enum_field("node_memory_collect_policy", "nodeMemoryCollectPolicy", MemoryCollectPolicy, OPTIONAL),
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
    """SPEC §2.1 defaults: 300 s aggregation, 60 s reports, windows [5m, 10m, 30m], usageWithoutPageCache."""
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=DEFAULT_AGGREGATE_DURATION_SECONDS,
        report_interval_seconds=DEFAULT_REPORT_INTERVAL_SECONDS,
        node_aggregate_policy=AggregatePolicy(list(DEFAULT_AGGREGATE_DURATIONS)),
        node_memory_collect_policy=DEFAULT_MEMORY_COLLECT_POLICY,
    )


@dataclass(slots=True)
class NodeMetricSpec(Model):
    """NodeMetric ``spec``, written by koord-manager."""

    collect_policy: NodeMetricCollectPolicy | None = None

    _FIELDS = (struct("collect_policy", "metricCollectPolicy", NodeMetricCollectPolicy, OPTIONAL),)


def _empty_status() -> NodeMetricStatus:
    return NodeMetricStatus(prod_reclaimable_metric=None)


@dataclass(slots=True)
class NodeMetric(Model):
    """A whole NodeMetric object (cluster-scoped, name = node name); ``metadata`` is kept verbatim.
    A default NodeMetric has an empty status (``{}``), like the object koord-manager creates."""

    metadata: JSON = field(default_factory=dict)
    spec: NodeMetricSpec = field(default_factory=NodeMetricSpec)
    status: NodeMetricStatus = field(default_factory=_empty_status)
    api_version: str = c.SLO_API_VERSION
    kind: str = c.NODE_METRIC_KIND

    _FIELDS = (
        Field("api_version", "apiVersion", constant(c.SLO_API_VERSION)),
        Field("kind", "kind", constant(c.NODE_METRIC_KIND)),
        Field("metadata", "metadata", json_object, copy.deepcopy, ALWAYS),
        struct("spec", "spec", NodeMetricSpec),
        struct("status", "status", NodeMetricStatus),
    )

    @property
    def name(self) -> str:
        """The node name (``metadata.name``)."""
        name = self.metadata.get("name", "")
        return name if isinstance(name, str) else ""
