"""apis.nodemetric_kinds: the decoding shortcuts for podsMetric, ResourceMaps, aggregated usage maps and
metadata give exactly what the generic Go-JSON decoder gives — the same values, types, formats and the
same errors — on generated documents, well-formed or not, decoded from scratch or into an existing
NodeMetric; and they are what decodes a NodeMetric as reporters write it.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import random
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis import gojson
from apis.duration import Duration
from apis.gojson import decode_into
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import DurationKind, ObjectKind
from apis.nodemetric import (
    RESOURCE_MAP,
    AggregatedUsage,
    AggregatePolicy,
    NodeMetric,
    NodeMetricError,
    NodeMetricStatus,
    PodMetricInfo,
    ResourceMap,
)
from apis.nodemetric_kinds import JsonObjectKind, PodsMetricKind, ResourceMapKind, UsageMapKind, WindowKind
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Format, Quantity
from bench.nodemetric_decode import koordlet_nodemetric, scale_driver_nodemetric
from bench.nodemetric_decode import main as bench_main
from tests.samples import full_nodemetric_dict


@contextlib.contextmanager
def generic_only() -> Iterator[None]:
    """Every shortcut off: the kinds decode as the plain gojson kinds they extend."""
    with (
        mock.patch.object(ResourceMapKind, "fast", lambda self, raw: None),
        mock.patch.object(PodsMetricKind, "decode", ListKind.decode),
        mock.patch.object(UsageMapKind, "decode", MapKind.decode),
        mock.patch.object(JsonObjectKind, "decode", ObjectKind.decode),
        mock.patch.object(WindowKind, "decode", DurationKind.decode),
    ):
        yield


def exact(x: Any) -> Any:
    """A comparable form that tells apart what == does not: quantity formats, enum members from their
    strings, key order, container types."""
    if isinstance(x, Quantity):
        return ("Quantity", x._m, x._e, x.format)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x), tuple((f.name, exact(getattr(x, f.name))) for f in dataclasses.fields(x)))
    if isinstance(x, dict):
        return (type(x), tuple((type(k), k, exact(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(exact(v) for v in x))
    return (type(x), x)


def outcome(doc: Any, base: NodeMetric | None) -> Any:
    try:
        if base is None:
            return exact(NodeMetric.from_dict(doc))
        result, errs = decode_into(copy.deepcopy(base), doc)
        return exact(result), [(e.path, repr(e.value), e.message, e.fatal) for e in errs]
    except NodeMetricError as e:
        return ("error", e.path, repr(e.value), str(e))


# --- generated documents -----------------------------------------------------------------------------
good_quantities = st.sampled_from(["1", "250m", "1Gi", "3006477107", "12k", "0", "1536Mi", "7Ei", "10E"])
quantities = good_quantities | st.one_of(
    st.sampled_from([" 2Ki ", "1.5", "-1", "1e3", "", "x", "1Kib", "٣"]),
    st.integers(-(2**64), 2**64),
    st.floats(),
    st.none(),
    st.booleans(),
    st.just([]),
    st.just({}),
)
names = st.sampled_from(["cpu", "memory", "kubernetes.io/batch-cpu"]) | st.text(max_size=2)
good_resource_maps = st.dictionaries(names, good_quantities, max_size=3).map(lambda r: {"resources": r})
# A well-formed map with one odd quantity.
near_good_resource_maps = st.tuples(good_resource_maps, names, quantities).map(
    lambda t: {"resources": {**t[0]["resources"], t[1]: t[2]}}
)
resource_maps: st.SearchStrategy[Any] = (
    good_resource_maps
    | near_good_resource_maps
    | st.just({})
    | st.dictionaries(names, quantities, max_size=3).map(lambda r: {"resources": r})
    | st.dictionaries(
        st.sampled_from(["resources", "Resources", "RESOURCES", "devices", "other"]),
        st.one_of(
            st.dictionaries(names, good_quantities, max_size=2),
            st.none(),
            st.just([{"id": "g"}]),
            st.just("x"),
        ),
        max_size=3,
    )
    | st.sampled_from([None, "bad", [], 3])
)
strings = st.sampled_from(["", "web", "nginx-7d9c"]) | st.none() | st.integers(0, 2) | st.just(["a"])
priorities = st.sampled_from([p.value for p in PriorityClass] + ["koord-gold", "PROD", None, 1])
qos_classes: st.SearchStrategy[Any] = st.sampled_from([q.value for q in QoSClass] + ["ls", None, []])
good_pods = st.fixed_dictionaries(
    {"name": st.sampled_from(["a", "b-1"]), "namespace": st.sampled_from(["default", "web"])},
    optional={
        "podUsage": good_resource_maps,
        "priority": st.sampled_from([p.value for p in PriorityClass]),
        "qos": st.sampled_from([q.value for q in QoSClass]),
    },
)
odd_fields = {
    "name": strings,
    "namespace": strings,
    "podUsage": resource_maps,
    "priority": priorities,
    "qos": qos_classes,
    "extensions": st.sampled_from([None, {}, {"Object": {"k": [1]}}, {"k": 1}, "x"]),
    "Name": strings,
    "QOS": qos_classes,
    "junk": strings,
}
# A well-formed pod with one field changed or added: what a shortcut must hand on, or may read.
near_good_pods = st.builds(
    lambda pod, key, data: {**pod, key: data.draw(odd_fields[key])},
    good_pods,
    st.sampled_from(sorted(odd_fields)),
    st.data(),
)
pods = good_pods | near_good_pods | st.fixed_dictionaries({}, optional=odd_fields)
pod_lists: st.SearchStrategy[Any] = (
    st.tuples(st.lists(good_pods, max_size=2), near_good_pods).map(lambda t: [*t[0], t[1]])
    | st.lists(pods | st.sampled_from([None, "x", 1]), max_size=4)
    | st.sampled_from([None, "x", {}])
)
agg_keys = st.sampled_from(["avg", "p50", "p90", "p95", "p99", "AVG", "p42", ""])
usage_maps: st.SearchStrategy[Any] = (
    st.tuples(st.dictionaries(agg_keys, good_resource_maps, max_size=3), agg_keys, resource_maps).map(
        lambda t: {**t[0], t[1]: t[2]}
    )
    | st.dictionaries(agg_keys, resource_maps, max_size=4)
    | st.sampled_from([None, "x", []])
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)
metadata = st.dictionaries(
    st.sampled_from(["name", "labels", "managedFields", "uid"]), json_values, max_size=4
) | (st.sampled_from([None, "x", {"name": "n", "labels": ("a", "b")}, {"name": "n", "when": {1, 2}}]))
documents = st.fixed_dictionaries(
    {
        "metadata": metadata,
        "status": st.fixed_dictionaries(
            {},
            optional={
                "podsMetric": pod_lists,
                "nodeMetric": st.fixed_dictionaries(
                    {},
                    optional={
                        "nodeUsage": resource_maps,
                        "systemUsage": resource_maps,
                        "aggregatedNodeUsages": st.lists(
                            st.fixed_dictionaries({"usage": usage_maps, "duration": st.just("5m0s")}),
                            max_size=2,
                        ),
                    },
                ),
                "prodReclaimableMetric": st.fixed_dictionaries({}, optional={"resource": resource_maps}),
            },
        ),
    }
)
windows = st.sampled_from(["5m0s", "5m", "10m0s", "1h", "", "x", "-1s", "1.5h", "1d", "9" * 40 + "s"]) | (
    st.none() | st.integers(-1, 1) | st.text(max_size=4)
)
BASES = [None, NodeMetric(), NodeMetric.from_dict(full_nodemetric_dict())]


@settings(max_examples=60, deadline=None)
@given(documents, st.sampled_from(BASES))
def test_shortcuts_decode_as_the_generic_decoder(doc: dict[str, Any], base: NodeMetric | None) -> None:
    fast = outcome(doc, base)
    with generic_only():
        generic = outcome(doc, base)
    assert fast == generic


@settings(max_examples=60, deadline=None)
@given(
    st.lists(good_pods, max_size=5),
    st.dictionaries(agg_keys.filter(lambda k: k.islower()), good_resource_maps),
)
def test_shortcuts_decode_well_formed_reports_as_the_generic_decoder(
    rows: list[dict[str, Any]], usage: dict[str, Any]
) -> None:
    usage = {k: v for k, v in usage.items() if k in ("avg", "p50", "p90", "p95", "p99")}
    doc = {"status": {"podsMetric": rows, "nodeMetric": {"aggregatedNodeUsages": [{"usage": usage}]}}}
    fast = outcome(doc, None)
    with generic_only():
        assert fast == outcome(doc, None)


def _kind(cls: type[Any], attr: str) -> Any:
    return {f.name: f.metadata[gojson.SPEC_KEY].kind for f in dataclasses.fields(cls)}[attr]


FULL = NodeMetric.from_dict(full_nodemetric_dict()).status
KINDS: dict[
    str, tuple[Any, st.SearchStrategy[Any], list[Any]]
] = {  # each shortcut kind: what it decodes, and values to decode into
    "podsMetric": (
        _kind(NodeMetricStatus, "pods_metric"),
        pod_lists,
        [[], [], None, [PodMetricInfo()], FULL.pods_metric],
    ),
    "resourceMap": (RESOURCE_MAP, resource_maps, [None, ResourceMap(), FULL.pods_metric[0].pod_usage]),
    "usage": (
        _kind(AggregatedUsage, "usage"),
        usage_maps,
        [{}, None, FULL.node_metric.aggregated_node_usages[0].usage if FULL.node_metric else None],
    ),
    "metadata": (_kind(NodeMetric, "metadata"), metadata, [{}, {"name": "old"}]),
    "window": (_kind(AggregatedUsage, "duration"), windows, [Duration(0), Duration.parse("1m")]),
    "windows": (
        _kind(AggregatePolicy, "durations"),
        st.lists(windows, max_size=3) | windows,
        [[], [Duration.parse("1m")]],
    ),
}


@pytest.mark.parametrize("name", sorted(KINDS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_each_shortcut_gives_the_generic_value_and_every_error(name: str, data: st.DataObject) -> None:
    kind, raws, olds = KINDS[name]
    raw = data.draw(raws)
    old = data.draw(st.sampled_from(olds))

    def run() -> Any:
        errs: list[Any] = []
        value = kind.decode(copy.deepcopy(old), raw, "x", errs)
        return exact(value), [(e.path, repr(e.value), e.message, e.fatal) for e in errs]

    fast = run()
    with generic_only():
        assert fast == run()


GOOD_POD = {
    "name": "a",
    "namespace": "web",
    "podUsage": {"resources": {"cpu": "250m", "memory": "1Gi"}},
    "priority": "koord-prod",
    "qos": "LS",
}
ODD_VALUES: list[Any] = [None, "", "x", 0, 1, 1.5, True, [], ["a"], {}, " 1Gi", "koord-gold", "ls", "1 GB"]
ODD_MAPS: list[Any] = [{"resources": {"cpu": v}} for v in ODD_VALUES] + [
    {"Resources": {"cpu": "1"}},
    {"resources": None},
    {"devices": []},
    {"resources": {}, "x": 1},
    None,
    "x",
]


def _both(kind: Any, old: Any, raw: Any) -> None:
    def run() -> Any:
        errs: list[Any] = []
        value = kind.decode(copy.deepcopy(old), raw, "x", errs)
        return exact(value), [(e.path, repr(e.value), e.message, e.fatal) for e in errs]

    fast = run()
    with generic_only():
        assert fast == run(), raw


@pytest.mark.parametrize("field", [*GOOD_POD, "extensions", "Name", "QOS", "junk"])
def test_a_pod_with_one_odd_field_decodes_as_the_generic_decoder(field: str) -> None:
    kind = _kind(NodeMetricStatus, "pods_metric")
    for odd in [*ODD_VALUES, *ODD_MAPS]:
        for old in ([], [PodMetricInfo()]):
            _both(kind, old, [GOOD_POD, {**GOOD_POD, field: odd}])
        _both(kind, [], [GOOD_POD, {k: v for k, v in GOOD_POD.items() if k != field}])


def test_maps_with_one_odd_entry_decode_as_the_generic_decoder() -> None:
    usage = _kind(AggregatedUsage, "usage")
    good = GOOD_POD["podUsage"]
    for odd in ODD_MAPS:
        for old in (None, ResourceMap(), ResourceMap(resources={"cpu": Quantity("1")})):
            _both(RESOURCE_MAP, old, odd)
        for key in ("p90", "P90", "p42", ""):
            _both(usage, {}, {"avg": good, key: odd})


# --- the shortcuts are taken for what reporters write ---------------------------------------------------
def _report(n: int) -> dict[str, Any]:
    doc = full_nodemetric_dict()
    doc["status"]["podsMetric"] = [
        {
            "name": f"pod-{i}",
            "namespace": "default",
            "podUsage": {"resources": {"cpu": f"{100 + i}m", "memory": str(1_000_000 + i)}},
            "priority": "koord-prod",
            "qos": "LS",
        }
        for i in range(n)
    ]
    return doc


def test_a_report_decodes_without_the_generic_struct_decoder_for_pods_and_resource_maps() -> None:
    decoded: list[type[Any]] = []
    real = gojson._decode_struct

    def spy(cls: type[Any], *args: Any) -> Any:
        decoded.append(cls)
        return real(cls, *args)

    doc = _report(3)
    with mock.patch.object(gojson, "_decode_struct", spy):
        nm = NodeMetric.from_dict(doc)
    assert PodMetricInfo not in decoded
    # Only the ResourceMaps with devices (nodeUsage) take the generic decoder.
    assert decoded.count(ResourceMap) == 1
    pod = nm.status.pods_metric[2]
    assert pod == PodMetricInfo(
        name="pod-2",
        namespace="default",
        pod_usage=ResourceMap(resources={"cpu": Quantity("102m"), "memory": Quantity("1000002")}),
        priority=PriorityClass.PROD,
        qos=QoSClass.LS,
    )
    assert (
        pod.priority is PriorityClass.PROD and pod.pod_usage.resources["memory"].format is Format.DECIMAL_SI
    )
    with generic_only():
        assert exact(NodeMetric.from_dict(doc)) == exact(nm)


def test_resource_map_shortcut_reads_the_reporters_form() -> None:
    assert RESOURCE_MAP.fast({"resources": {"cpu": "1500m", "memory": "2Gi"}}) == ResourceMap(
        resources={"cpu": Quantity.from_milli(1500), "memory": Quantity.from_int(2 << 30, Format.BINARY_SI)}
    )
    assert RESOURCE_MAP.fast({}) == ResourceMap()
    # Anything else is the generic decoder's.
    odd: list[dict[str, Any]] = [
        {"Resources": {}},
        {"resources": {"cpu": "x"}},
        {"resources": None},
        {"devices": []},
    ]
    for raw in odd:
        assert RESOURCE_MAP.fast(raw) is None


# --- errors still name the field and the value ------------------------------------------------------------
@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        ("cpu", "12 cores", "status.podsMetric[1].podUsage.resources.cpu"),
        ("priority", "koord-gold", "status.podsMetric[1].priority"),
        ("qos", "ls", "status.podsMetric[1].qos"),
        ("name", 7, "status.podsMetric[1].name"),
    ],
)
def test_a_bad_pod_field_is_named_with_its_value(where: str, value: Any, path: str) -> None:
    doc = _report(3)
    pod = doc["status"]["podsMetric"][1]
    if where == "cpu":
        pod["podUsage"]["resources"]["cpu"] = value
    else:
        pod[where] = value
    with pytest.raises(NodeMetricError) as info:
        NodeMetric.from_dict(doc)
    assert info.value.path == path and info.value.value == value
    assert path in str(info.value) and repr(value) in str(info.value)


def test_a_bad_aggregated_usage_is_named_with_its_value() -> None:
    doc = _report(1)
    doc["status"]["nodeMetric"]["aggregatedNodeUsages"][0]["usage"]["p90"]["resources"]["memory"] = "1 GB"
    with pytest.raises(NodeMetricError) as info:
        NodeMetric.from_dict(doc)
    assert info.value.path == "status.nodeMetric.aggregatedNodeUsages[0].usage.p90.resources.memory"
    assert info.value.value == "1 GB"


# --- metadata ---------------------------------------------------------------------------------------------
def test_metadata_is_an_independent_copy() -> None:
    doc = _report(0)
    doc["metadata"]["managedFields"] = [{"manager": "koordlet", "fieldsV1": {"f:status": {".": {}}}}]
    nm = NodeMetric.from_dict(doc)
    assert nm.metadata == doc["metadata"]
    nm.metadata["managedFields"][0]["fieldsV1"]["f:status"]["x"] = 1
    nm.metadata["labels"]["new"] = "label"
    assert doc["metadata"] == full_nodemetric_dict()["metadata"] | {
        "managedFields": [{"manager": "koordlet", "fieldsV1": {"f:status": {".": {}}}}]
    }
    # Values that are not plain JSON are copied as copy.deepcopy copies them.
    odd: dict[str, Any] = {"name": "n", "labels": ("a", "b"), "when": {1, 2}}
    got: dict[str, Any] = dict(NodeMetric.from_dict({"metadata": odd}).metadata)
    assert got == odd and got["when"] is not odd["when"]


# --- the benchmark's reports (bench/nodemetric_decode.py) ---------------------------------------------------
def test_the_benchmarks_reports_decode_as_built_and_as_the_generic_decoder() -> None:
    doc, built = koordlet_nodemetric(random.Random(7), 3, 20, managed_fields=True)
    nm = NodeMetric.from_dict(doc)
    assert nm == built
    with generic_only():
        assert exact(NodeMetric.from_dict(doc)) == exact(nm)
    small = scale_driver_nodemetric(random.Random(7), 3, 20)
    fast = exact(NodeMetric.from_dict(small))
    with generic_only():
        assert exact(NodeMetric.from_dict(small)) == fast


def test_the_benchmark_prints_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--pods", "3", "--nodes", "2", "--seconds", "0.2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pods_per_nodemetric"] == 3
    assert result["decode_us_median"] > 0 and result["decodes_per_s"] > 0 and result["samples"] > 0
    with pytest.raises(SystemExit):
        bench_main(["--seconds", "31"])
