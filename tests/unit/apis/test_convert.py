"""apis.convert: dict ⇄ dataclass ⇄ protobuf for NodeMetric, lossless both ways."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apis import convert
from apis.duration import Duration
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
    NodeMetricStatus,
    NUMAMetricInfo,
    PeakMetric,
    PodMetricInfo,
    ReclaimableMetric,
    ResourceMap,
    default_collect_policy,
)
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Format, Quantity
from proto.koord.v1 import metrichub_pb2 as pb
from tests.unit.apis.test_nodemetric import full_nodemetric_dict


def _wire(msg: pb.NodeMetricReport) -> pb.NodeMetricReport:
    """Through bytes, as gRPC would carry it."""
    return pb.NodeMetricReport.FromString(msg.SerializeToString())


def test_full_nodemetric_dict_proto_bytes_round_trip() -> None:
    d = full_nodemetric_dict()
    nm = convert.nodemetric_from_dict(d)
    msg = _wire(convert.nodemetric_to_report(nm))
    assert msg.node_name == "node-1"
    back = convert.nodemetric_from_report(msg, metadata=d["metadata"])
    assert back == nm
    assert convert.nodemetric_to_dict(back) == d
    # composed helpers
    assert convert.report_to_nodemetric_dict(_wire(convert.nodemetric_dict_to_report(d)), d["metadata"]) == d
    assert convert.status_proto_to_dict(convert.status_dict_to_proto(d["status"])) == d["status"]


def test_full_proto_carries_every_field() -> None:
    msg = convert.nodemetric_dict_to_report(full_nodemetric_dict())
    st_ = msg.status
    assert st_.update_time.seconds == int(datetime(2026, 11, 22, 2, 16, 47, tzinfo=UTC).timestamp())
    assert st_.node_metric.node_usage.resources["kubernetes.io/batch-cpu"] == "12k"
    assert json.loads(st_.node_metric.node_usage.devices_json)[0]["id"] == "GPU-7c6c2a8e"
    assert [a.duration.ToTimedelta() for a in st_.node_metric.aggregated_node_usages] == [
        timedelta(minutes=5),
        timedelta(minutes=10),
        timedelta(minutes=30),
    ]
    assert dict(st_.node_metric.aggregated_node_usages[2].usage["p99"].resources) == {}
    assert [n.numa_node_id for n in st_.node_metric.numa_usages] == [0, 1]
    assert [(p.name, p.priority, p.qos) for p in st_.pods_metric] == [
        ("batch-job-0", "koord-batch", "BE"),
        ("nginx-7d9c", "koord-prod", "LS"),
        ("web-static", "", ""),
    ]
    assert not st_.pods_metric[0].HasField("extensions_json")
    assert json.loads(st_.pods_metric[2].extensions_json) == {}
    assert [h.name for h in st_.host_application_metric] == ["nginx-host", "node-exporter"]
    assert st_.prod_reclaimable_metric.resource.resources["cpu"] == "1500m"
    assert st_.prod_peak_metric.resource.resources["memory"] == "12Gi"
    pol = msg.collect_policy
    assert (pol.aggregate_duration_seconds, pol.report_interval_seconds) == (300, 60)
    assert pol.node_memory_collect_policy == "usageWithoutPageCache"


def test_update_time_keeps_microseconds_in_proto_and_seconds_in_dict() -> None:
    t = datetime(2026, 11, 22, 2, 16, 47, 123456, tzinfo=UTC)
    msg = convert.status_to_proto(NodeMetricStatus(update_time=t))
    assert (msg.update_time.seconds, msg.update_time.nanos) == (int(t.timestamp()), 123456000)
    back = convert.status_from_proto(msg)
    assert back.update_time == t and back.update_time.tzinfo is UTC
    assert back.to_dict()["updateTime"] == "2026-11-22T02:16:47Z"
    east = t.astimezone(timezone(timedelta(hours=9)))
    assert (
        convert.status_from_proto(convert.status_to_proto(NodeMetricStatus(update_time=east))).update_time
        == t
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        convert.status_to_proto(NodeMetricStatus(update_time=datetime(2026, 1, 1)))


def test_presence_is_kept() -> None:
    empty = NodeMetricStatus(prod_reclaimable_metric=None)
    msg = convert.status_to_proto(empty)
    for name in ("update_time", "node_metric", "prod_reclaimable_metric", "prod_peak_metric"):
        assert not msg.HasField(name)
    assert convert.status_from_proto(msg) == empty
    default = convert.status_to_proto(NodeMetricStatus())
    assert default.HasField("prod_reclaimable_metric") and not default.HasField("prod_peak_metric")
    assert convert.status_from_proto(default) == NodeMetricStatus()
    # None and empty stay apart for devices, extensions and the aggregate policy
    for rm in (ResourceMap(), ResourceMap(devices=[])):
        assert convert.resource_map_from_proto(convert.resource_map_to_proto(rm)) == rm
    for pod in (PodMetricInfo(name="a"), PodMetricInfo(name="a", extensions={})):
        status = NodeMetricStatus(pods_metric=[pod])
        assert convert.status_from_proto(convert.status_to_proto(status)) == status
    for pol in (NodeMetricCollectPolicy(), NodeMetricCollectPolicy(node_aggregate_policy=AggregatePolicy())):
        assert convert.collect_policy_from_proto(convert.collect_policy_to_proto(pol)) == pol
    zero = NodeMetricCollectPolicy(aggregate_duration_seconds=0, report_interval_seconds=0)
    assert convert.collect_policy_from_proto(convert.collect_policy_to_proto(zero)) == zero


def test_report_round_trip_and_spec_absence() -> None:
    status = NodeMetricStatus(
        update_time=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), node_metric=NodeMetricInfo()
    )
    for policy in (None, default_collect_policy()):
        msg = _wire(convert.report_to_proto("node-7", status, policy))
        assert msg.HasField("collect_policy") is (policy is not None)
        report = convert.report_from_proto(msg)
        assert report == convert.Report("node-7", status, policy)
    nm = convert.nodemetric_from_report(convert.report_to_proto("node-7", status))
    assert nm.metadata == {"name": "node-7"} and nm.spec.collect_policy is None
    assert nm.to_dict()["spec"] == {}
    # an unset status is an empty one
    assert convert.report_from_proto(pb.NodeMetricReport(node_name="x")).status == NodeMetricStatus(
        prod_reclaimable_metric=None
    )


def test_quantities_travel_as_canonical_strings() -> None:
    rm = ResourceMap(
        resources={
            "kubernetes.io/batch-cpu": Quantity.from_int(12000),
            "cpu": Quantity.from_milli(2500),
            "memory": Quantity.from_int(3006477107, Format.BINARY_SI),
            "kubernetes.io/batch-memory": Quantity.from_int(1536 * 1024**2, Format.BINARY_SI),
        }
    )
    msg = convert.resource_map_to_proto(rm)
    assert dict(msg.resources) == {
        "kubernetes.io/batch-cpu": "12k",
        "cpu": "2500m",
        "memory": "3006477107",
        "kubernetes.io/batch-memory": "1536Mi",
    }
    assert convert.resource_map_from_proto(msg) == rm


def _set_devices(rm: pb.ResourceMap, text: str) -> None:
    rm.devices_json = text


def _bad_memory_policy(m: pb.NodeMetricReport) -> None:
    m.collect_policy.node_memory_collect_policy = "all"


BAD_PROTO: list[tuple[Callable[[pb.NodeMetricReport], object], str]] = [
    (
        lambda m: m.status.node_metric.node_usage.resources.__setitem__("cpu", "x1"),
        "status.nodeMetric.nodeUsage.resources.cpu",
    ),
    (lambda m: m.status.pods_metric.add(qos="GOLD"), "status.podsMetric[0].qos"),
    (lambda m: m.status.pods_metric.add(priority="koord-x"), "status.podsMetric[0].priority"),
    (lambda m: m.status.pods_metric.add(extensions_json="[1]"), "status.podsMetric[0].extensions"),
    (lambda m: m.status.host_application_metric.add(qos="?"), "status.hostApplicationMetric[0].qos"),
    (
        lambda m: _set_devices(m.status.prod_peak_metric.resource, "{"),
        "status.prodPeakMetric.resource.devices",
    ),
    (
        lambda m: _set_devices(m.status.prod_peak_metric.resource, "[1]"),
        "status.prodPeakMetric.resource.devices[0]",
    ),
    (
        lambda m: m.status.node_metric.aggregated_node_usages.add().usage["max"].SetInParent(),
        "status.nodeMetric.aggregatedNodeUsages[0].usage",
    ),
    (_bad_memory_policy, "spec.metricCollectPolicy.nodeMemoryCollectPolicy"),
]


@pytest.mark.parametrize(("mutate", "path"), BAD_PROTO, ids=[p for _, p in BAD_PROTO])
def test_bad_proto_content_names_the_json_path(
    mutate: Callable[[pb.NodeMetricReport], object], path: str
) -> None:
    msg = pb.NodeMetricReport(node_name="n")
    mutate(msg)
    with pytest.raises(NodeMetricError) as info:
        convert.report_from_proto(msg)
    assert info.value.path == path


# --- hypothesis ---------------------------------------------------------------------------------------
_text = st.text(st.characters(codec="utf-8"), max_size=8)
_json_scalar = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _text
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_json_obj = st.dictionaries(_text, _json, max_size=3)
_quantity = st.one_of(
    st.integers(0, 10**8).map(Quantity.from_milli),
    st.integers(0, 2**45).map(lambda v: Quantity.from_int(v, Format.BINARY_SI)),
    st.integers(-(10**12), 10**12).map(Quantity.from_int),
    st.sampled_from(["12k", "1.5Gi", "1e3", "0.5", "100n", "7E"]).map(Quantity.parse),
)
_names = st.sampled_from(
    ["cpu", "memory", "kubernetes.io/batch-cpu", "kubernetes.io/batch-memory", "nvidia.com/gpu"]
)
_rm = st.builds(
    ResourceMap, st.dictionaries(_names, _quantity, max_size=4), st.none() | st.lists(_json_obj, max_size=2)
)
_duration = st.integers(-(2**63) + 1, 2**63 - 1).map(Duration)
_agg = st.builds(
    AggregatedUsage, st.dictionaries(st.sampled_from(list(AggregationType)), _rm, max_size=5), _duration
)
_time = st.datetimes(
    min_value=datetime(1, 1, 2),
    max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-7))]),
)
_node_info = st.builds(
    NodeMetricInfo,
    _rm,
    st.lists(_agg, max_size=3),
    _rm,
    st.lists(_agg, max_size=2),
    st.lists(st.builds(NUMAMetricInfo, st.integers(-(2**31), 2**31 - 1), _rm, _rm), max_size=2),
)
_pod = st.builds(
    PodMetricInfo,
    _text,
    _text,
    _rm,
    st.sampled_from(list(PriorityClass)),
    st.sampled_from(list(QoSClass)),
    st.none() | _json_obj,
)
_host = st.builds(
    HostApplicationMetricInfo,
    _text,
    _rm,
    st.sampled_from(list(PriorityClass)),
    st.sampled_from(list(QoSClass)),
)
_status = st.builds(
    NodeMetricStatus,
    st.none() | _time,
    st.none() | _node_info,
    st.lists(_pod, max_size=3),
    st.lists(_host, max_size=2),
    st.none() | st.builds(ReclaimableMetric, _rm),
    st.none() | st.builds(PeakMetric, _rm),
)
_policy = st.builds(
    NodeMetricCollectPolicy,
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.integers(-(2**63), 2**63 - 1),
    st.none() | st.builds(AggregatePolicy, st.lists(_duration, max_size=3)),
    st.none() | st.sampled_from(list(MemoryCollectPolicy)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(status=_status, policy=st.none() | _policy, node=_text)
def test_hypothesis_dataclass_proto_round_trip(
    status: NodeMetricStatus, policy: NodeMetricCollectPolicy | None, node: str
) -> None:
    report = convert.report_from_proto(_wire(convert.report_to_proto(node, status, policy)))
    assert report == convert.Report(node, status, policy)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(status=_status, policy=st.none() | _policy)
def test_hypothesis_canonical_dict_round_trip(
    status: NodeMetricStatus, policy: NodeMetricCollectPolicy | None
) -> None:
    # to_dict output re-read once is canonical (quantity formats settle, time drops sub-seconds) ...
    nm = NodeMetric(metadata={"name": "n"}, status=status)
    nm.spec.collect_policy = policy
    canonical = NodeMetric.from_dict(json.loads(json.dumps(nm.to_dict()))).to_dict()
    # ... and then survives dict → dataclass → dict and dict → dataclass → proto → bytes → dataclass → dict
    assert NodeMetric.from_dict(canonical).to_dict() == canonical
    msg = _wire(convert.nodemetric_dict_to_report(canonical))
    assert convert.report_to_nodemetric_dict(msg, canonical["metadata"]) == canonical
