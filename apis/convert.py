"""NodeMetric conversions: JSON dict ⇄ dataclass (apis.nodemetric) ⇄ protobuf (proto.koord.v1).

The only module that knows all three forms. Conversions are lossless: dataclass → proto → dataclass
is the identity (quantities travel as canonical strings and compare by value, ``updateTime`` keeps
its microseconds as Timestamp nanos, durations keep nanoseconds, device lists and pod extensions
travel as JSON text with None/empty kept apart), and a canonical dict (one ``to_dict`` wrote)
survives dict → dataclass → proto → bytes → proto → dataclass → dict unchanged. The dict form itself
keeps Go's second precision for ``updateTime``. Malformed protobuf content (bad quantity strings,
unknown priority/QoS, invalid JSON text) raises NodeMetricError with the JSON path of the field, as
does content beyond apis.reportlimits (JSON text too long or too deep, a quantity string too long).
Imports: the standard library, apis.{nodemetric,duration,kubeobjects,qos,quantity,reportlimits} and the
generated proto.koord.v1.metrichub_pb2 (protobuf only, never grpc). Pure, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TypeVar, cast

from google.protobuf.duration_pb2 import Duration as PbDuration
from google.protobuf.timestamp_pb2 import Timestamp

from apis.duration import Duration
from apis.kubeobjects import ObjectMeta
from apis.nodemetric import (
    AggregatedUsage,
    AggregatePolicy,
    AggregationType,
    HostApplicationMetricInfo,
    MemoryCollectPolicy,
    NodeMetric,
    NodeMetricCollectPolicy,
    NodeMetricError,
    NodeMetricInfo,
    NodeMetricSpec,
    NodeMetricStatus,
    NUMAMetricInfo,
    PeakMetric,
    PodMetricInfo,
    ReclaimableMetric,
    ResourceMap,
)
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Quantity, QuantityError
from apis.reportlimits import MAX_QUANTITY_CHARS, load_json
from proto.koord.v1 import metrichub_pb2 as pb

E = TypeVar("E", PriorityClass, QoSClass, MemoryCollectPolicy, AggregationType)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Report(NamedTuple):
    """A decoded NodeMetricReport."""

    node_name: str
    status: NodeMetricStatus
    collect_policy: NodeMetricCollectPolicy | None


# --- dict ⇄ dataclass ---------------------------------------------------------------------------------
def nodemetric_from_dict(d: Mapping[str, Any]) -> NodeMetric:
    """A NodeMetric object (as the API returns it) as a dataclass; raises NodeMetricError."""
    return NodeMetric.from_dict(d)


def nodemetric_to_dict(nm: NodeMetric) -> dict[str, Any]:
    """A NodeMetric as the JSON object Go would write."""
    return nm.to_dict()


def status_from_dict(d: Mapping[str, Any], path: str = "status") -> NodeMetricStatus:
    """A NodeMetric ``status`` object as a dataclass; raises NodeMetricError."""
    return NodeMetricStatus.from_dict(d, path)


def status_to_dict(status: NodeMetricStatus) -> dict[str, Any]:
    """A status as the JSON object Go would write."""
    return status.to_dict()


# --- scalar helpers ---------------------------------------------------------------------------------
def _time_to_proto(t: datetime, out: Timestamp) -> None:
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"updateTime must be timezone-aware, got naive {t!r}")
    delta = t - _EPOCH
    out.seconds = delta.days * 86_400 + delta.seconds
    out.nanos = delta.microseconds * 1_000


def _time_from_proto(ts: Timestamp, path: str) -> datetime:
    try:
        return _EPOCH + timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1_000)
    except OverflowError:
        raise NodeMetricError(path, "timestamp out of range", (ts.seconds, ts.nanos)) from None


def _duration_to_proto(d: Duration) -> PbDuration:
    out = PbDuration()
    out.FromNanoseconds(d.nanoseconds)
    return out


def _enum(cls: type[E], value: str, path: str) -> E:
    member = cls._value2member_map_.get(value)  # cls(value) without its exception machinery
    if member is None:
        raise NodeMetricError(path, f"must be one of {[m.value for m in cls]}", value)
    return cast(E, member)


def _dump_json(v: object) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _load_json(text: str, path: str, kind: type[list[Any]] | type[dict[str, Any]]) -> Any:
    v = load_json(text, path)  # bounded in size and depth (apis.reportlimits)
    if not isinstance(v, kind):
        raise NodeMetricError(path, f"expected a JSON {'array' if kind is list else 'object'}", text)
    return v


# --- ResourceMap and friends ------------------------------------------------------------------------
def resource_map_to_proto(rm: ResourceMap) -> pb.ResourceMap:
    """A ResourceMap with its quantities as canonical strings and its devices as JSON text."""
    out = pb.ResourceMap(resources={name: str(q) for name, q in rm.resources.items()})
    if rm.devices is not None:
        out.devices_json = _dump_json(rm.devices)
    return out


def resource_map_from_proto(msg: pb.ResourceMap, path: str = "resourceMap") -> ResourceMap:
    """The inverse of resource_map_to_proto; raises NodeMetricError on a bad quantity or JSON."""
    resources: dict[str, Quantity] = {}
    parse, texts = Quantity.parse, msg.resources
    for name in sorted(texts):  # faster than sorting the map's items
        text = texts[name]
        try:
            if len(text) > MAX_QUANTITY_CHARS:
                raise QuantityError(f"longer than {MAX_QUANTITY_CHARS} characters")
            resources[name] = parse(text)
        except QuantityError as e:
            raise NodeMetricError(f"{path}.resources.{name}", f"invalid quantity: {e}", text[:80]) from None
    devices: list[dict[str, Any]] | None = None
    if msg.HasField("devices_json"):
        devices = _load_json(msg.devices_json, f"{path}.devices", list)
        for i, item in enumerate(devices):
            if not isinstance(item, dict):
                raise NodeMetricError(f"{path}.devices[{i}]", "expected an object", item)
    return ResourceMap(resources, devices)


def _aggregated_to_proto(a: AggregatedUsage) -> pb.AggregatedUsage:
    out = pb.AggregatedUsage(duration=_duration_to_proto(a.duration))
    for key, rm in a.usage.items():
        out.usage[str(key)].CopyFrom(resource_map_to_proto(rm))
    return out


def _aggregated_from_proto(msg: pb.AggregatedUsage, path: str) -> AggregatedUsage:
    usage = {
        _enum(AggregationType, key, f"{path}.usage"): resource_map_from_proto(
            msg.usage[key], f"{path}.usage.{key}"
        )
        for key in sorted(msg.usage)
    }
    return AggregatedUsage(usage, Duration(msg.duration.ToNanoseconds()))


def _numa_to_proto(n: NUMAMetricInfo) -> pb.NUMAMetricInfo:
    return pb.NUMAMetricInfo(
        numa_node_id=n.numa_node_id,
        node_usage=resource_map_to_proto(n.node_usage),
        system_usage=resource_map_to_proto(n.system_usage),
    )


def _numa_from_proto(msg: pb.NUMAMetricInfo, path: str) -> NUMAMetricInfo:
    return NUMAMetricInfo(
        msg.numa_node_id,
        resource_map_from_proto(msg.node_usage, f"{path}.nodeUsage"),
        resource_map_from_proto(msg.system_usage, f"{path}.systemUsage"),
    )


def _node_info_to_proto(n: NodeMetricInfo) -> pb.NodeMetricInfo:
    return pb.NodeMetricInfo(
        node_usage=resource_map_to_proto(n.node_usage),
        aggregated_node_usages=[_aggregated_to_proto(a) for a in n.aggregated_node_usages],
        system_usage=resource_map_to_proto(n.system_usage),
        aggregated_system_usages=[_aggregated_to_proto(a) for a in n.aggregated_system_usages],
        numa_usages=[_numa_to_proto(x) for x in n.numa_usages],
    )


T = TypeVar("T")
M = TypeVar("M")


def _items(msgs: Any, path: str, conv: Callable[[M, str], T]) -> list[T]:
    return [conv(m, f"{path}[{i}]") for i, m in enumerate(msgs)]


def _node_info_from_proto(msg: pb.NodeMetricInfo, path: str) -> NodeMetricInfo:
    return NodeMetricInfo(
        node_usage=resource_map_from_proto(msg.node_usage, f"{path}.nodeUsage"),
        aggregated_node_usages=_items(
            msg.aggregated_node_usages, f"{path}.aggregatedNodeUsages", _aggregated_from_proto
        ),
        system_usage=resource_map_from_proto(msg.system_usage, f"{path}.systemUsage"),
        aggregated_system_usages=_items(
            msg.aggregated_system_usages, f"{path}.aggregatedSystemUsages", _aggregated_from_proto
        ),
        numa_usages=_items(msg.numa_usages, f"{path}.numaUsages", _numa_from_proto),
    )


def _pod_to_proto(p: PodMetricInfo) -> pb.PodMetricInfo:
    out = pb.PodMetricInfo(
        name=p.name,
        namespace=p.namespace,
        pod_usage=resource_map_to_proto(p.pod_usage),
        priority=str(p.priority),
        qos=str(p.qos),
    )
    if p.extensions is not None:
        out.extensions_json = _dump_json(p.extensions)
    return out


def _pod_from_proto(msg: pb.PodMetricInfo, path: str) -> PodMetricInfo:
    return PodMetricInfo(
        name=msg.name,
        namespace=msg.namespace,
        pod_usage=resource_map_from_proto(msg.pod_usage, f"{path}.podUsage"),
        priority=_enum(PriorityClass, msg.priority, f"{path}.priority"),
        qos=_enum(QoSClass, msg.qos, f"{path}.qos"),
        extensions=(
            _load_json(msg.extensions_json, f"{path}.extensions", dict)
            if msg.HasField("extensions_json")
            else None
        ),
    )


def _host_app_to_proto(h: HostApplicationMetricInfo) -> pb.HostApplicationMetricInfo:
    return pb.HostApplicationMetricInfo(
        name=h.name, usage=resource_map_to_proto(h.usage), priority=str(h.priority), qos=str(h.qos)
    )


def _host_app_from_proto(msg: pb.HostApplicationMetricInfo, path: str) -> HostApplicationMetricInfo:
    return HostApplicationMetricInfo(
        name=msg.name,
        usage=resource_map_from_proto(msg.usage, f"{path}.usage"),
        priority=_enum(PriorityClass, msg.priority, f"{path}.priority"),
        qos=_enum(QoSClass, msg.qos, f"{path}.qos"),
    )


# --- status, collect policy, report -----------------------------------------------------------------
def status_to_proto(status: NodeMetricStatus) -> pb.NodeMetricStatus:
    """A NodeMetric status as its protobuf message (presence kept for every optional part)."""
    out = pb.NodeMetricStatus(
        pods_metric=[_pod_to_proto(p) for p in status.pods_metric],
        host_application_metric=[_host_app_to_proto(h) for h in status.host_application_metric],
    )
    if status.update_time is not None:
        _time_to_proto(status.update_time, out.update_time)
    if status.node_metric is not None:
        out.node_metric.CopyFrom(_node_info_to_proto(status.node_metric))
    if status.prod_reclaimable_metric is not None:
        out.prod_reclaimable_metric.resource.CopyFrom(
            resource_map_to_proto(status.prod_reclaimable_metric.resource)
        )
    if status.prod_peak_metric is not None:
        out.prod_peak_metric.resource.CopyFrom(resource_map_to_proto(status.prod_peak_metric.resource))
    return out


def status_from_proto(msg: pb.NodeMetricStatus, path: str = "status") -> NodeMetricStatus:
    """The inverse of status_to_proto; raises NodeMetricError naming the JSON path of a bad field."""
    reclaim, peak = msg.prod_reclaimable_metric, msg.prod_peak_metric
    return NodeMetricStatus(
        update_time=_time_from_proto(msg.update_time, f"{path}.updateTime")
        if msg.HasField("update_time")
        else None,
        node_metric=(
            _node_info_from_proto(msg.node_metric, f"{path}.nodeMetric")
            if msg.HasField("node_metric")
            else None
        ),
        pods_metric=_items(msg.pods_metric, f"{path}.podsMetric", _pod_from_proto),
        host_application_metric=_items(
            msg.host_application_metric, f"{path}.hostApplicationMetric", _host_app_from_proto
        ),
        prod_reclaimable_metric=(
            ReclaimableMetric(
                resource_map_from_proto(reclaim.resource, f"{path}.prodReclaimableMetric.resource")
            )
            if msg.HasField("prod_reclaimable_metric")
            else None
        ),
        prod_peak_metric=(
            PeakMetric(resource_map_from_proto(peak.resource, f"{path}.prodPeakMetric.resource"))
            if msg.HasField("prod_peak_metric")
            else None
        ),
    )


def collect_policy_to_proto(policy: NodeMetricCollectPolicy) -> pb.NodeMetricCollectPolicy:
    """A collect policy as its protobuf message (unset fields stay unset)."""
    out = pb.NodeMetricCollectPolicy()
    if policy.aggregate_duration_seconds is not None:
        out.aggregate_duration_seconds = policy.aggregate_duration_seconds
    if policy.report_interval_seconds is not None:
        out.report_interval_seconds = policy.report_interval_seconds
    if policy.node_aggregate_policy is not None:
        out.node_aggregate_policy.SetInParent()
        out.node_aggregate_policy.durations.extend(
            _duration_to_proto(d) for d in policy.node_aggregate_policy.durations
        )
    if policy.node_memory_collect_policy is not None:
        out.node_memory_collect_policy = str(policy.node_memory_collect_policy)
    return out


def collect_policy_from_proto(
    msg: pb.NodeMetricCollectPolicy, path: str = "spec.metricCollectPolicy"
) -> NodeMetricCollectPolicy:
    """The inverse of collect_policy_to_proto; raises NodeMetricError on an unknown memory policy."""
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=(
            msg.aggregate_duration_seconds if msg.HasField("aggregate_duration_seconds") else None
        ),
        report_interval_seconds=msg.report_interval_seconds
        if msg.HasField("report_interval_seconds")
        else None,
        node_aggregate_policy=(
            AggregatePolicy([Duration(d.ToNanoseconds()) for d in msg.node_aggregate_policy.durations])
            if msg.HasField("node_aggregate_policy")
            else None
        ),
        node_memory_collect_policy=(
            _enum(MemoryCollectPolicy, msg.node_memory_collect_policy, f"{path}.nodeMemoryCollectPolicy")
            if msg.HasField("node_memory_collect_policy")
            else None
        ),
    )


def report_to_proto(
    node_name: str, status: NodeMetricStatus, collect_policy: NodeMetricCollectPolicy | None = None
) -> pb.NodeMetricReport:
    """What an agent pushes to the hub: its node name, status and the collect policy it used."""
    out = pb.NodeMetricReport(node_name=node_name, status=status_to_proto(status))
    if collect_policy is not None:
        out.collect_policy.CopyFrom(collect_policy_to_proto(collect_policy))
    return out


def report_from_proto(msg: pb.NodeMetricReport) -> Report:
    """The inverse of report_to_proto; an unset status decodes as an empty one."""
    policy = collect_policy_from_proto(msg.collect_policy) if msg.HasField("collect_policy") else None
    return Report(msg.node_name, status_from_proto(msg.status), policy)


def nodemetric_to_report(nm: NodeMetric) -> pb.NodeMetricReport:
    """A NodeMetric as a report: metadata.name, status and spec.metricCollectPolicy."""
    return report_to_proto(nm.name, nm.status, nm.spec.collect_policy)


def nodemetric_from_report(msg: pb.NodeMetricReport, metadata: ObjectMeta | None = None) -> NodeMetric:
    """A NodeMetric built from a report; metadata defaults to ``{"name": <node name>}``."""
    node_name, status, policy = report_from_proto(msg)
    meta: ObjectMeta = metadata.copy() if metadata is not None else {"name": node_name}
    return NodeMetric(metadata=meta, spec=NodeMetricSpec(policy), status=status)


# --- dict ⇄ proto (composed of the above) -----------------------------------------------------------
def status_dict_to_proto(d: Mapping[str, Any]) -> pb.NodeMetricStatus:
    """A status JSON object straight to protobuf; raises NodeMetricError."""
    return status_to_proto(status_from_dict(d))


def status_proto_to_dict(msg: pb.NodeMetricStatus) -> dict[str, Any]:
    """A status message straight to the JSON object Go would write."""
    return status_from_proto(msg).to_dict()


def nodemetric_dict_to_report(d: Mapping[str, Any]) -> pb.NodeMetricReport:
    """A NodeMetric JSON object as a report (metadata other than the name is not carried)."""
    return nodemetric_to_report(nodemetric_from_dict(d))


def report_to_nodemetric_dict(msg: pb.NodeMetricReport, metadata: ObjectMeta | None = None) -> dict[str, Any]:
    """A report as a NodeMetric JSON object (see nodemetric_from_report for ``metadata``)."""
    return nodemetric_from_report(msg, metadata).to_dict()
