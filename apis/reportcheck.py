"""The one check of a NodeMetricReport, applied by the MetricHub when a report arrives (it refuses a
report that fails) and by every consumer when it decodes one (it skips that node): both call
`check_report`, so the hub never stores what a consumer would refuse
(docs/rules/manager.md#metrichub-limits).

A report passes when it is at most MAX_REPORT_BYTES long, names its node with a DNS-1123 subdomain,
carries an update time at most MAX_FUTURE_SKEW_SECONDS after the time the hub received it, and decodes
in full (apis.convert: quantities, enums, JSON text within its size and depth limits). The time rule is
stated against the hub's receive time, which travels with every item (`received_time`), so a consumer
applies it exactly as the hub did, whatever its own clock says.

"Decodes in full" is proven without decoding when it can be (`_decodes`); apis.convert decodes the
report only when it cannot, and then names the bad field, so every refusal keeps its reason and text
and the decoder stays the one statement of what decodes. The proof reads the report through a *flat
view* (below): the status parsed once more, by protobuf, into a few lists (every priority, every
quantity text of every pod) instead of ~60 nested messages visited one Python call at a time. The
quantities are checked all at once (apis.quantity_plain.all_plain), enum names against the enums' own
tables, JSON by apis.reportlimits' bounded reader.
Imports: apis (convert, nodemetric, qos, quantity, reportlimits), google.protobuf, proto.koord.v1
(protobuf only). Pure, no I/O.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError

from apis.convert import nodemetric_from_report
from apis.nodemetric import AggregationType, MemoryCollectPolicy, NodeMetric, NodeMetricError
from apis.qos import PriorityClass, QoSClass
from apis.quantity_plain import all_plain
from apis.reportlimits import (
    MAX_REPORT_BYTES,
    TOO_LARGE,
    ReportError,
    check_node_name,
    check_update_time,
    load_json,
    reason_of,
)
from proto.koord.v1 import metrichub_pb2 as pb

__all__ = ["NodeMetricError", "ReportError", "check_report", "checked_item", "reason_of"]

# The names apis.convert finds in the enums' tables (`_enum`), so the same answers.
_PRIORITIES: Final = frozenset(PriorityClass._value2member_map_)
_QOS: Final = frozenset(QoSClass._value2member_map_)
_AGGREGATIONS: Final = frozenset(AggregationType._value2member_map_)
_MEMORY_POLICIES: Final = frozenset(MemoryCollectPolicy._value2member_map_)
# The empty name is a priority and a QoS class: a field proto3 leaves off the wire needs no look-up.
assert "" in _PRIORITIES and "" in _QOS
# Timestamp's valid range: within it, apis.convert's datetime arithmetic cannot overflow.
_MIN_SECONDS: Final = -62_135_596_800  # 0001-01-01T00:00:00Z
_MAX_SECONDS: Final = 253_402_300_799  # 9999-12-31T23:59:59Z


def check_report(msg: pb.NodeMetricReport, received_ns: int, size: int | None = None) -> None:
    """Returns when the report passes; NodeMetricError otherwise (`reason_of(e)` names the rule: a
    ReportError's reason, or INVALID_FIELD for a field apis.convert cannot decode). `size` is its
    length on the wire when known (else computed); `received_ns` the hub's receive time in
    nanoseconds since the epoch."""
    length = msg.ByteSize() if size is None else size
    if length > MAX_REPORT_BYTES:
        raise ReportError(TOO_LARGE, "", f"report of {length} bytes (at most {MAX_REPORT_BYTES})", length)
    check_node_name(msg.node_name)
    if msg.status.HasField("update_time"):
        # Plain arithmetic, not Timestamp.ToNanoseconds(), which raises ValueError outside Timestamp's
        # range: such a time is refused below as a field apis.convert cannot decode.
        ts = msg.status.update_time
        check_update_time(ts.seconds * 1_000_000_000 + ts.nanos, received_ns)
    if not _decodes(msg):
        nodemetric_from_report(msg)  # raises NodeMetricError naming the field, or finds none


def checked_item(item: pb.NodeMetricItem) -> NodeMetric:
    """A consumer's check of one hub item (check_report against the item's own receive time), and the
    report decoded as a NodeMetric."""
    check_report(item.report, item.received_time.ToNanoseconds())
    return nodemetric_from_report(item.report)


# --- the flat view -----------------------------------------------------------------------------------
# A view message reads the report's wire format with the report's field numbers, but every message field
# is singular and every string field repeated. Protobuf merges the occurrences of a singular message
# field and concatenates repeated ones, so parsing a status as a view gathers, say, the priorities of all
# pods into one list, and the quantities of all pods' maps into another. A view field is a view's name
# (a singular message) or _STRING (repeated); numbered as in the real message, a map entry's key 1 and
# value 2. Fields a view leaves out (names, durations, numbers) are unknown to it and skipped.
_STRING: Final = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
_VIEWS: Final[dict[str, tuple[Descriptor | None, dict[str, str | int]]]] = {
    "Quantities": (None, {"value": _STRING}),  # the entries of map<string, string> resources
    "Maps": (pb.ResourceMap.DESCRIPTOR, {"resources": "Quantities", "devices_json": _STRING}),
    "UsageEntries": (None, {"key": _STRING, "value": "Maps"}),  # map<string, ResourceMap> usage
    "Aggregated": (pb.AggregatedUsage.DESCRIPTOR, {"usage": "UsageEntries"}),
    "Numa": (pb.NUMAMetricInfo.DESCRIPTOR, {"node_usage": "Maps", "system_usage": "Maps"}),
    "Node": (
        pb.NodeMetricInfo.DESCRIPTOR,
        {
            "node_usage": "Maps",
            "system_usage": "Maps",
            "aggregated_node_usages": "Aggregated",
            "aggregated_system_usages": "Aggregated",
            "numa_usages": "Numa",
        },
    ),
    "Pod": (
        pb.PodMetricInfo.DESCRIPTOR,
        {"pod_usage": "Maps", "priority": _STRING, "qos": _STRING, "extensions_json": _STRING},
    ),
    "App": (pb.HostApplicationMetricInfo.DESCRIPTOR, {"usage": "Maps", "priority": _STRING, "qos": _STRING}),
    "Reclaimable": (pb.ReclaimableMetric.DESCRIPTOR, {"resource": "Maps"}),
    "Peak": (pb.PeakMetric.DESCRIPTOR, {"resource": "Maps"}),
    "Status": (
        pb.NodeMetricStatus.DESCRIPTOR,
        {
            "node_metric": "Node",
            "pods_metric": "Pod",
            "host_application_metric": "App",
            "prod_reclaimable_metric": "Reclaimable",
            "prod_peak_metric": "Peak",
        },
    ),
}


def _status_view() -> Any:
    """The view class of a status, built from _VIEWS (a dynamic class: its fields are read as Any)."""
    file = descriptor_pb2.FileDescriptorProto(name="koord/reportcheck/views.proto", package="reportview")
    file.syntax = "proto3"
    for view_name, (real, fields) in _VIEWS.items():
        view = file.message_type.add(name=view_name)
        for field, kind in fields.items():
            number = {"key": 1, "value": 2}[field] if real is None else real.fields_by_name[field].number
            if isinstance(kind, str):
                view.field.add(
                    name=field, number=number, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    type_name=f".reportview.{kind}", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                )  # fmt: skip
            else:
                view.field.add(
                    name=field,
                    number=number,
                    type=kind,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("reportview.Status"))


_StatusView: Final = _status_view()


def _json_is(texts: Any, kind: type[list[object]] | type[dict[str, object]]) -> bool:
    """True when every text is JSON of `kind` within apis.reportlimits' bounds (a list only of objects)."""
    for text in texts:
        try:
            value = load_json(text, "")
        except NodeMetricError:
            return False
        if not isinstance(value, kind) or (kind is list and not all(isinstance(v, dict) for v in value)):
            return False
    return True


def _decodes(msg: pb.NodeMetricReport) -> bool:
    """True when apis.convert decodes every field of `msg` without an error; False when one may fail.

    The status is serialised once (canonically: every map entry carries its key and its value, even
    empty ones, tests/unit/apis/test_reportcheck.py holds it) and parsed as the flat view. A string
    proto3 leaves off the wire is empty: the empty priority and QoS are valid, and no map key or
    quantity is ever left off."""
    status = msg.status
    if status.HasField("update_time"):
        ts = status.update_time
        if not (_MIN_SECONDS <= ts.seconds <= _MAX_SECONDS and 0 <= ts.nanos <= 999_999_999):
            return False
    policy = msg.collect_policy
    if (
        policy.HasField("node_memory_collect_policy")
        and policy.node_memory_collect_policy not in _MEMORY_POLICIES
    ):
        return False
    try:
        view = _StatusView.FromString(status.SerializeToString())
    except DecodeError:  # not expected (the view reads what the real message wrote): let the decoder judge
        return False
    node, pods, apps = view.node_metric, view.pods_metric, view.host_application_metric
    node_aggregated, system_aggregated = (
        node.aggregated_node_usages.usage,
        node.aggregated_system_usages.usage,
    )
    if not (
        {*node_aggregated.key, *system_aggregated.key} <= _AGGREGATIONS
        and {*pods.priority, *apps.priority} <= _PRIORITIES
        and {*pods.qos, *apps.qos} <= _QOS
        and _json_is(pods.extensions_json, dict)
    ):
        return False
    numa = node.numa_usages
    quantities: list[str] = []
    for rm in (
        node.node_usage, node.system_usage, node_aggregated.value, system_aggregated.value, numa.node_usage,
        numa.system_usage, pods.pod_usage, apps.usage, view.prod_reclaimable_metric.resource,
        view.prod_peak_metric.resource,
    ):  # fmt: skip
        if rm.devices_json and not _json_is(rm.devices_json, list):
            return False
        quantities += rm.resources.value
    return all_plain(quantities)
