"""apis.nodemetric: Go's JSON form of NodeMetric, validation errors, defaults, and the CRD schema."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from apis.crds import node_metric_crd
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
    NodeMetricSpec,
    NodeMetricStatus,
    NUMAMetricInfo,
    PeakMetric,
    PodMetricInfo,
    ReclaimableMetric,
    ResourceMap,
    default_collect_policy,
    format_time,
    parse_time,
)
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Format, Quantity
from tests.samples import full_nodemetric_dict

CRD_PATH = Path(__file__).resolve().parents[3] / "deploy" / "crds" / "slo.koordinator.sh_nodemetrics.yaml"


# --- round trip and the Go serialisation facts ------------------------------------------------------
def test_full_nodemetric_round_trips_exactly() -> None:
    d = full_nodemetric_dict()
    nm = NodeMetric.from_dict(d)
    assert nm.to_dict() == d
    assert nm.name == "node-1"
    assert d == full_nodemetric_dict()  # input untouched
    # JSON text form too, with Go's sorted map keys inside resource lists
    text = json.dumps(nm.to_dict())
    assert NodeMetric.from_dict(json.loads(text)).to_dict() == d
    assert list(nm.to_dict()["status"]["nodeMetric"]["nodeUsage"]["resources"]) == sorted(
        d["status"]["nodeMetric"]["nodeUsage"]["resources"]
    )


def test_parsed_values() -> None:
    nm = NodeMetric.from_dict(full_nodemetric_dict())
    st = nm.status
    assert st.update_time == datetime(2026, 11, 22, 2, 16, 47, tzinfo=UTC)
    assert st.node_metric is not None
    res = st.node_metric.node_usage.resources
    assert res["kubernetes.io/batch-cpu"].value() == 12000
    assert res["cpu"].milli_value() == 2500
    assert res["memory"].value() == 3006477107
    assert st.node_metric.aggregated_node_usages[2].duration == Duration.parse("30m")
    assert st.node_metric.aggregated_node_usages[2].usage[AggregationType.P99] == ResourceMap()
    assert st.pods_metric[0].priority is PriorityClass.BATCH and st.pods_metric[0].qos is QoSClass.BE
    assert st.pods_metric[1].extensions == {"vendor.io/score": 3, "vendor.io/tags": ["a", "b"], "nested": {}}
    assert st.pods_metric[2].extensions == {}
    assert st.pods_metric[0].extensions is None
    assert nm.spec.collect_policy == default_collect_policy()


def test_structs_are_never_dropped() -> None:
    assert ResourceMap().to_dict() == {}
    assert NodeMetricInfo().to_dict() == {"nodeUsage": {}, "systemUsage": {}}
    assert PodMetricInfo().to_dict() == {"podUsage": {}}
    assert HostApplicationMetricInfo().to_dict() == {"usage": {}}
    assert AggregatedUsage().to_dict() == {"duration": "0s"}
    assert NUMAMetricInfo().to_dict() == {"numaNodeID": 0, "nodeUsage": {}, "systemUsage": {}}
    assert ReclaimableMetric().to_dict() == {"resource": {}}


def test_empty_lists_and_strings_are_omitted() -> None:
    rm = ResourceMap(resources={}, devices=[])
    assert rm.to_dict() == {}
    status = NodeMetricStatus(node_metric=NodeMetricInfo(), pods_metric=[], host_application_metric=[])
    assert status.to_dict() == {
        "nodeMetric": {"nodeUsage": {}, "systemUsage": {}},
        "prodReclaimableMetric": {"resource": {}},
    }
    assert AggregatePolicy().to_dict() == {}
    assert PodMetricInfo(priority=PriorityClass.NONE, qos=QoSClass.NONE).to_dict() == {"podUsage": {}}


def test_prod_reclaimable_always_present_and_peak_omitted() -> None:
    assert NodeMetricStatus().to_dict() == {"prodReclaimableMetric": {"resource": {}}}
    with_peak = NodeMetricStatus(prod_peak_metric=PeakMetric())
    assert with_peak.to_dict()["prodPeakMetric"] == {"resource": {}}
    # an object that never had one (e.g. just created by the manager) stays without one
    assert NodeMetricStatus.from_dict({}).prod_reclaimable_metric is None
    assert NodeMetricStatus.from_dict({}).to_dict() == {}


def test_default_nodemetric_is_what_the_manager_creates() -> None:
    nm = NodeMetric(metadata={"name": "node-9"})
    assert nm.to_dict() == {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": "node-9"},
        "spec": {},
        "status": {},
    }
    # the API server may return no status at all
    assert NodeMetric.from_dict({"metadata": {"name": "node-9"}}).to_dict() == nm.to_dict()


def test_numa_node_id_always_written() -> None:
    d = NUMAMetricInfo(numa_node_id=0).to_dict()
    assert "numaNodeID" in d and d["numaNodeID"] == 0


def test_extensions_forms() -> None:
    pod = PodMetricInfo(name="p", extensions={"k": {"v": 1}})
    assert pod.to_dict()["extensions"] == {"Object": {"k": {"v": 1}}}
    plain = PodMetricInfo.from_dict({"name": "p", "extensions": {"k": {"v": 1}}})
    wrapped = PodMetricInfo.from_dict({"name": "p", "extensions": {"Object": {"k": {"v": 1}}}})
    assert plain == wrapped == pod
    assert PodMetricInfo.from_dict({"extensions": {"Object": None}}).extensions == {}
    assert "extensions" not in PodMetricInfo(name="p").to_dict()


def test_quantities_are_canonical_strings() -> None:
    rm = ResourceMap(
        resources={
            "kubernetes.io/batch-cpu": Quantity.from_int(12000),
            "kubernetes.io/mid-cpu": Quantity.from_int(10700),
            "cpu": Quantity.from_milli(2500),
            "memory": Quantity.from_int(8 * 1024**3, Format.BINARY_SI),
        }
    )
    assert rm.to_dict() == {
        "resources": {
            "cpu": "2500m",
            "kubernetes.io/batch-cpu": "12k",
            "kubernetes.io/mid-cpu": "10700",
            "memory": "8Gi",
        }
    }
    # bare JSON numbers are quantity literals, as in Go
    assert ResourceMap.from_dict({"resources": {"kubernetes.io/batch-cpu": 12000}}).to_dict() == {
        "resources": {"kubernetes.io/batch-cpu": "12k"}
    }


def test_durations_accept_short_form_and_emit_go_form() -> None:
    pol = NodeMetricCollectPolicy.from_dict(
        {"nodeAggregatePolicy": {"durations": ["5m", "1h", "90s", "1.5s"]}}
    )
    assert pol.to_dict() == {"nodeAggregatePolicy": {"durations": ["5m0s", "1h0m0s", "1m30s", "1.5s"]}}
    assert AggregatedUsage.from_dict({"duration": "10m"}).to_dict() == {"duration": "10m0s"}


def test_update_time_rfc3339_seconds() -> None:
    t = datetime(2026, 11, 22, 2, 16, 47, 987654, tzinfo=UTC)
    assert format_time(t) == "2026-11-22T02:16:47Z"
    assert NodeMetricStatus(update_time=t).to_dict()["updateTime"] == "2026-11-22T02:16:47Z"
    other_zone = t.astimezone(timezone(timedelta(hours=8)))
    assert format_time(other_zone) == "2026-11-22T02:16:47Z"
    assert parse_time("2026-11-22T10:16:47+08:00") == datetime(2026, 11, 22, 2, 16, 47, tzinfo=UTC)
    assert parse_time("2026-11-22T02:16:47.123456789Z") == datetime(
        2026, 11, 22, 2, 16, 47, 123456, tzinfo=UTC
    )
    assert parse_time("2026-11-22T02:16:47Z").tzinfo is UTC
    with pytest.raises(ValueError, match="timezone-aware"):
        format_time(datetime(2026, 11, 22))
    assert NodeMetricStatus.from_dict({"updateTime": None}).update_time is None
    assert format_time(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)) == "0999-01-02T03:04:05Z"
    assert parse_time("0999-01-02T03:04:05Z") == datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_go_map_key_order() -> None:
    agg = AggregatedUsage(usage={AggregationType.P99: ResourceMap(), AggregationType.AVG: ResourceMap()})
    assert list(agg.to_dict()["usage"]) == ["avg", "p99"]


def test_unknown_keys_are_ignored_like_go() -> None:
    d = {"status": {"somethingNew": 1, "podsMetric": [{"name": "a", "future": True}]}}
    assert NodeMetric.from_dict(d).status.pods_metric == [PodMetricInfo(name="a")]


def test_collect_policy_defaults() -> None:
    p = default_collect_policy()
    assert p.to_dict() == {
        "aggregateDurationSeconds": 300,
        "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache",
    }
    assert default_collect_policy() is not p and default_collect_policy() == p
    partial = NodeMetricCollectPolicy(report_interval_seconds=30, node_aggregate_policy=AggregatePolicy())
    merged = partial.with_defaults()
    assert merged.report_interval_seconds == 30
    assert merged.aggregate_duration_seconds == 300
    assert merged.node_aggregate_policy == AggregatePolicy(
        [Duration.parse("5m"), Duration.parse("10m"), Duration.parse("30m")]
    )
    assert merged.node_memory_collect_policy is MemoryCollectPolicy.USAGE_WITHOUT_PAGE_CACHE
    own = NodeMetricCollectPolicy(
        node_aggregate_policy=AggregatePolicy([Duration.parse("1m")])
    ).with_defaults()
    assert own.node_aggregate_policy == AggregatePolicy([Duration.parse("1m")])
    assert NodeMetricSpec().to_dict() == {}


# --- validation errors name the path ----------------------------------------------------------------
def _set(d: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    d = copy.deepcopy(d)
    node: Any = d
    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = value
    return d


BAD_INPUTS = [
    ("status.podsMetric[1].qos", "XX"),
    ("status.podsMetric[0].priority", "koord-gold"),
    ("status.nodeMetric.nodeUsage.resources.cpu", "abc"),
    ("status.nodeMetric.nodeUsage.resources.memory", True),
    ("status.nodeMetric.aggregatedNodeUsages[1].duration", "5 minutes"),
    ("status.nodeMetric.aggregatedSystemUsages[0].usage", {"max": {}}),
    ("status.nodeMetric.numaUsages[1].numaNodeID", 2**31),
    ("status.nodeMetric.numaUsages[0].numaNodeID", "0"),
    ("status.nodeMetric.nodeUsage.devices", [1, 2]),
    ("status.nodeMetric.systemUsage", []),
    ("status.updateTime", "yesterday"),
    ("status.updateTime", "2026-13-01T00:00:00Z"),
    ("status.podsMetric", {"name": "x"}),
    ("status.podsMetric[2].extensions", ["x"]),
    ("status.hostApplicationMetric[0].name", 7),
    ("status.prodPeakMetric.resource.resources.cpu", "1.5.5"),
    ("spec.metricCollectPolicy.reportIntervalSeconds", "60"),
    ("spec.metricCollectPolicy.aggregateDurationSeconds", 300.0),
    ("spec.metricCollectPolicy.aggregateDurationSeconds", 2**63),
    ("spec.metricCollectPolicy.nodeMemoryCollectPolicy", "usageWithColdPageCache"),
    ("spec.metricCollectPolicy.nodeAggregatePolicy.durations", ["5m", "forever"]),
    ("apiVersion", "slo.koordinator.sh/v1"),
    ("kind", "NodeSLO"),
    ("metadata", "node-1"),
]


@pytest.mark.parametrize(("path", "value"), BAD_INPUTS, ids=[f"{p}={v!r}" for p, v in BAD_INPUTS])
def test_bad_input_names_path_and_value(path: str, value: Any) -> None:
    d = _set(full_nodemetric_dict(), path, value)
    with pytest.raises(NodeMetricError) as info:
        NodeMetric.from_dict(d)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.path.startswith(path), (err.path, path)
    assert str(err).startswith(err.path + ":")
    assert repr(value)[:20] in str(err) or repr(err.value)[:20] in str(err)


def test_top_level_must_be_an_object() -> None:
    with pytest.raises(NodeMetricError, match="expected an object"):
        NodeMetric.from_dict([])
    with pytest.raises(NodeMetricError) as info:
        NodeMetricStatus.from_dict({"podsMetric": [{"qos": "bad"}]}, "status")
    assert info.value.path == "status.podsMetric[0].qos"


# --- the CRD ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    with CRD_PATH.open() as f:
        loaded = yaml.safe_load(f)
    assert isinstance(loaded, dict)
    return loaded


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def test_crd_file_matches_generated(crd: dict[str, Any]) -> None:
    assert crd == node_metric_crd()


def test_go_field_order_and_sloconfig_share_the_policy_types() -> None:
    from apis.sloconfig_types import ColocationStrategy

    assert list(NodeMetric().to_dict()) == ["apiVersion", "kind", "metadata", "spec", "status"]
    strategy = ColocationStrategy.from_dict({"metricAggregatePolicy": {"durations": ["1m"]}})
    assert type(strategy.metric_aggregate_policy) is AggregatePolicy
    assert strategy.metric_aggregate_policy == AggregatePolicy([Duration.parse("1m")])


def test_null_items_are_rejected() -> None:
    for path in ("status.podsMetric[0]", "status.nodeMetric.nodeUsage.devices[0]"):
        with pytest.raises(NodeMetricError) as info:
            NodeMetric.from_dict(_set(full_nodemetric_dict(), path, None))
        assert info.value.path == path


def test_crd_identity(crd: dict[str, Any]) -> None:
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "nodemetrics.slo.koordinator.sh"
    spec = crd["spec"]
    assert spec["group"] == "slo.koordinator.sh"
    assert spec["scope"] == "Cluster"
    assert spec["names"] == {
        "kind": "NodeMetric",
        "listKind": "NodeMetricList",
        "plural": "nodemetrics",
        "singular": "nodemetric",
    }
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}
    columns = {c["jsonPath"]: c for c in version["additionalPrinterColumns"]}
    assert columns[".status.updateTime"]["type"] == "date"
    assert columns[".status.nodeMetric.nodeUsage.resources.cpu"]["type"] == "string"
    assert columns[".status.nodeMetric.nodeUsage.resources.memory"]["type"] == "string"
    assert columns[".metadata.creationTimestamp"]["name"] == "Age"


def _structural_problems(node: Any, path: str) -> list[str]:
    """Kubernetes 1.20 structural-schema rules that matter here: every node typed (or int-or-string),
    no CEL, properties and additionalProperties not combined."""
    problems: list[str] = []
    if not isinstance(node, dict):
        return [f"{path}: not a schema object"]
    if "x-kubernetes-validations" in node:
        problems.append(f"{path}: x-kubernetes-validations needs Kubernetes 1.25+")
    if "type" not in node and not node.get("x-kubernetes-int-or-string"):
        problems.append(f"{path}: no type")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{path}: properties and additionalProperties together")
    if node.get("x-kubernetes-int-or-string"):
        branches = node.get("anyOf", [])
        if branches and branches != [{"type": "integer"}, {"type": "string"}]:
            problems.append(f"{path}: int-or-string anyOf must be exactly integer|string")
    for key, sub in node.get("properties", {}).items():
        problems += _structural_problems(sub, f"{path}.{key}")
    if isinstance(node.get("additionalProperties"), dict):
        problems += _structural_problems(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        problems += _structural_problems(node["items"], f"{path}[]")
    return problems


def test_crd_schema_is_structural(crd: dict[str, Any]) -> None:
    assert _structural_problems(_schema(crd), "") == []


def _check(value: Any, schema: dict[str, Any], path: str, out: list[str]) -> None:
    """Validate a JSON value against an OpenAPI v3 schema node, collecting problems."""
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            out.append(f"{path}: {value!r} is not int-or-string")
        elif isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: {value!r} does not match the quantity pattern")
        return
    typ = schema.get("type")
    if typ == "object":
        if not isinstance(value, dict):
            out.append(f"{path}: {value!r} is not an object")
            return
        if schema.get("x-kubernetes-preserve-unknown-fields") and "properties" not in schema:
            return
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key in schema.get("required", []):
            if key not in value:
                out.append(f"{path}.{key}: required")
        for key, sub in value.items():
            if key in props:
                _check(sub, props[key], f"{path}.{key}", out)
            elif isinstance(extra, dict):
                _check(sub, extra, f"{path}.{key}", out)
            elif path != ".metadata":  # metadata is checked by the API server itself
                out.append(f"{path}.{key}: not declared in the schema")
    elif typ == "array":
        if not isinstance(value, list):
            out.append(f"{path}: {value!r} is not an array")
            return
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]", out)
    elif typ == "string":
        if not isinstance(value, str):
            out.append(f"{path}: {value!r} is not a string")
        elif schema.get("format") == "date-time":
            try:
                parse_time(value)
            except ValueError:
                out.append(f"{path}: {value!r} is not a date-time")
    elif typ == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{path}: {value!r} is not an integer")
        elif schema.get("format") == "int32" and not -(2**31) <= value < 2**31:
            out.append(f"{path}: {value!r} overflows int32")
    else:
        out.append(f"{path}: unexpected schema type {typ!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} not in enum {schema['enum']}")


def test_full_nodemetric_matches_crd_schema(crd: dict[str, Any]) -> None:
    problems: list[str] = []
    _check(full_nodemetric_dict(), _schema(crd), "", problems)
    assert problems == []
    # defaults, manager-created objects and empty structs are valid too
    for obj in (
        NodeMetric(metadata={"name": "n"}).to_dict(),
        NodeMetric(spec=NodeMetricSpec(default_collect_policy()), status=NodeMetricStatus()).to_dict(),
    ):
        _check(obj, _schema(crd), "", problems)
    assert problems == []


def test_schema_walker_catches_undeclared_and_mistyped_fields(crd: dict[str, Any]) -> None:
    d = full_nodemetric_dict()
    d["status"]["nodeMetric"]["bogus"] = 1
    d["status"]["podsMetric"][0]["qos"] = "GOLD"
    d["status"]["nodeMetric"]["numaUsages"][0]["numaNodeID"] = "0"
    d["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] = "60"
    del d["status"]["nodeMetric"]["numaUsages"][1]["numaNodeID"]
    problems: list[str] = []
    _check(d, _schema(crd), "", problems)
    assert problems == [
        ".spec.metricCollectPolicy.reportIntervalSeconds: '60' is not an integer",
        ".status.nodeMetric.numaUsages[0].numaNodeID: '0' is not an integer",
        ".status.nodeMetric.numaUsages[1].numaNodeID: required",
        ".status.nodeMetric.bogus: not declared in the schema",
        ".status.podsMetric[0].qos: 'GOLD' not in enum ['LSE', 'LSR', 'LS', 'BE', 'SYSTEM', '']",
    ]


def test_crd_enums_match_the_types(crd: dict[str, Any]) -> None:
    status = _schema(crd)["properties"]["status"]["properties"]
    pod = status["podsMetric"]["items"]["properties"]
    assert pod["priority"]["enum"] == [p.value for p in PriorityClass]
    assert pod["qos"]["enum"] == [q.value for q in QoSClass]
    policy = _schema(crd)["properties"]["spec"]["properties"]["metricCollectPolicy"]["properties"]
    assert policy["nodeMemoryCollectPolicy"]["enum"] == [m.value for m in MemoryCollectPolicy]
