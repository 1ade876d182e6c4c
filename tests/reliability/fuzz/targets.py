"""The fuzz targets, shared by tests/reliability/fuzz/test_fuzz.py (a bounded run in every test session)
and `bench/fuzz.py` (long runs). A target is a strategy and a check: the check feeds one drawn input to
product code and fails (AssertionError, or the unexpected exception itself) when the code raises anything
but its documented errors or breaks a round-trip property. The documented errors:

- quantities: `QuantityError` (apis/quantity.py);
- `slo-controller-config`: none — every problem is a `ConfigKeyError` in the returned list, and a
  rejected key keeps its last good value (docs/configuration.md#how-a-key-is-loaded);
- node and pod annotations: none — an unparsable annotation is ignored (docs/rules/koordlet.md,
  docs/rules/manager.md#the-node-reservation-annotation, docs/rules/scheduler.md#inputs-per-node);
- NodeMetric objects: `NodeMetricError` (apis/nodemetric.py);
- MetricHub reports: protobuf's `DecodeError` for the wire format and `NodeMetricError` for the check
  (docs/rules/manager.md#metrichub-limits), the very refusal of its oracle (tests/oracles/reportcheck.py);
  what the hub accepts every consumer decodes alike;
- scenario files: `ValueError` (docs/simulate.md#input-errors).

Imports: the standard library, google.protobuf, apis, agent, manager, scheduler, koord, proto.koord.v1
and tests.reliability.fuzz, tests.oracles (test code).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import strategies as st

from agent.podmeta import pod_meta
from agent.qosmanager import cgroupreconcile, cpuburst, cpuset_policy, evictplan, resctrlqos
from agent.system.podcgroup import CgroupDriver
from apis import constants as c
from apis import convert, device, numa, qos
from apis.gojson import encode, validate
from apis.kubeobjects import Node, Pod
from apis.nodemetric import NodeMetric, NodeMetricError
from apis.nodeslo import NodeSLOSpec, ResourceQOSStrategy
from apis.quantity import Quantity, QuantityError, parse_resource_list
from apis.reportcheck import check_report, checked_item, reason_of
from apis.reportlimits import JSON_TOO_DEEP, JSON_TOO_LARGE
from apis.sloconfig import (
    ConfigKeyError,
    SLOControllerConfig,
    default_colocation_strategy,
    node_colocation_enabled,
    node_colocation_strategy,
    node_metric_collect_policy,
    node_slo_spec,
    parse_slo_controller_config,
)
from koord.simulate import KINDS, simulate_scenario
from manager.metrichub.ingest import parse_report
from manager.noderesource import prepare
from manager.noderesource import resources as noderesources
from manager.noderesource.plugins import batchresource
from proto.koord.v1 import metrichub_pb2 as pb
from scheduler.plugins.deviceshare.plugin import DeviceShare
from scheduler.plugins.loadaware import profile
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs
from scheduler.plugins.loadaware.estimator import Estimator
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from tests.oracles.reportcheck import check_report as check_report_oracle
from tests.reliability.fuzz import objects, strategies, wire


@dataclass(frozen=True)
class Target:
    name: str
    strategy: st.SearchStrategy[Any]
    check: Callable[[Any], None]
    known: Callable[[Any], bool] | None = None
    """Inputs of a known, reported failure not fixed yet (the tests pin it with a strict xfail)."""


# --- quantities ------------------------------------------------------------------------------------------
def check_quantity(raw: Any) -> None:
    try:
        q = Quantity.parse(raw) if isinstance(raw, str) else Quantity.from_json(raw)
    except QuantityError:
        return
    text = str(q)
    back = Quantity.parse(text)
    assert back == q, f"{raw!r} prints as {text!r}, which parses as {back!r}"
    assert str(back) == text, f"canonical text {text!r} is not a fixed point: {back}"
    assert Quantity.from_json(q.to_json()) == q
    if isinstance(raw, str):
        assert Quantity.from_json(raw) == q
        assert parse_resource_list({"cpu": raw}) == {"cpu": q}
    exact = q.as_fraction() * 1000
    milli = -((-exact.numerator) // exact.denominator) if exact >= 0 else exact.numerator // exact.denominator
    assert q.milli_value() == max(-(2**63 - 1), min(milli, 2**63 - 1))
    q.value(), float(q), q + q, q - q, -q, hash(q)  # none may raise


# --- slo-controller-config -------------------------------------------------------------------------------
SLO_KEYS = {
    c.COLOCATION_CONFIG_KEY: "colocation",
    c.RESOURCE_THRESHOLD_CONFIG_KEY: "resource_threshold",
    c.RESOURCE_QOS_CONFIG_KEY: "resource_qos",
    c.CPU_BURST_CONFIG_KEY: "cpu_burst",
    c.SYSTEM_CONFIG_KEY: "system",
    c.HOST_APPLICATION_CONFIG_KEY: "host_application",
    c.CPU_NORMALIZATION_CONFIG_KEY: "cpu_normalization",
    c.RESOURCE_AMPLIFICATION_CONFIG_KEY: "resource_amplification",
}
_SLO_DOCS = strategies.slo_key_documents()
slo_data = st.fixed_dictionaries(
    {}, optional={**_SLO_DOCS, "unknown-key": strategies.short_text}
) | st.dictionaries(st.sampled_from(sorted(SLO_KEYS)), strategies.json_text(strategies.json_any), max_size=3)


@st.composite
def _edited(draw: st.DrawFn, before: dict[str, str]) -> dict[str, str]:
    """``before`` with some of its JSON documents edited: how an operator's update looks."""
    data = dict(before)
    for key in draw(st.lists(st.sampled_from(sorted(before)), unique=True)):
        if data[key].count("[") + data[key].count("{") > 100:
            continue  # a deeply nested text: copying it recurses too deep (it is in the data as it is)
        try:
            doc = json.loads(data[key])
        except (ValueError, RecursionError):
            continue
        data[key] = json.dumps(draw(wire.mutated(doc)))
    return data


@st.composite
def slo_cases(draw: st.DrawFn) -> tuple[dict[str, str] | None, dict[str, str], str, Node]:
    """(the ConfigMap data in force or None, its update, a key to break, a node)."""
    before = draw(st.none() | slo_data)
    data = draw(_edited(before)) if before and draw(st.booleans()) else draw(slo_data)
    return before, data, draw(st.sampled_from(sorted(SLO_KEYS))), draw(objects.nodes())


def check_sloconfig(case: tuple[dict[str, str] | None, dict[str, str], str, Node]) -> None:
    before, data, broken_key, node = case
    previous = None if before is None else parse_slo_controller_config(before)[0]
    cfg, errors = parse_slo_controller_config(data, previous)
    assert isinstance(cfg, SLOControllerConfig)
    assert all(isinstance(e, ConfigKeyError) and e.key in data for e in errors), errors
    _assert_keep_last_good(data, previous, cfg, errors)
    assert parse_slo_controller_config(data, cfg)[0] == cfg, "loading the same data again changed it"
    # docs/configuration.md#how-a-key-is-loaded: one bad key never blocks the others
    other, _ = parse_slo_controller_config({**data, broken_key: "{"}, previous)
    for key, attr in SLO_KEYS.items():
        if key != broken_key:
            assert getattr(other, attr) == getattr(cfg, attr), f"breaking {broken_key} changed {key}"
    labels, annotations = node["metadata"]["labels"], node["metadata"]["annotations"]
    strategy = node_colocation_strategy(cfg, labels, annotations)
    node_colocation_enabled(cfg, labels, annotations)
    node_metric_collect_policy(strategy).to_dict()
    spec = node_slo_spec(cfg, labels, annotations)
    assert validate(spec) == [], "the manager would write a NodeSLO its CRD refuses"
    json.dumps(spec.to_dict())


def _assert_keep_last_good(
    data: dict[str, str], previous: SLOControllerConfig | None, cfg: SLOControllerConfig, errors: list[Any]
) -> None:
    """docs/configuration.md#how-a-key-is-loaded: a rejected key keeps its previous value (its default on
    the first load); an accepted key is valid, each invalid field at the fallback its error names: the
    last good (else default) value at the same path, or, in a node entry, the cluster strategy's."""
    base = previous if previous is not None else SLOControllerConfig()
    for key, attr in SLO_KEYS.items():
        if key not in data:
            continue
        if any(e.key == key and e.rejected for e in errors):
            assert getattr(cfg, attr) == getattr(base, attr), f"rejected {key} did not keep its last value"
            if key == c.COLOCATION_CONFIG_KEY:
                assert cfg.colocation_error
            continue
        assert validate(getattr(cfg, attr)) == [], f"{key} accepted with invalid fields"
        last = base
        if key == c.COLOCATION_CONFIG_KEY and not (previous is not None and previous.colocation_available):
            last = SLOControllerConfig()  # no last good colocation strategy: the defaults
        now, before = encode(getattr(cfg, attr)), encode(getattr(last, attr))
        cluster = now.get("clusterStrategy", now)
        for e in errors:
            if e.key != key or "field falls back" not in str(e):
                continue
            entry = _NODE_ENTRY.match(e.field)
            if "falls back to the cluster strategy" in str(e):  # a node entry's field
                assert entry is not None, e
                got, want = _at(now, e.field), _at(cluster, e.field[entry.end() :])
            else:  # the last good or default value at the same path (host applications: node entries too)
                got, want = _at(now, e.field), _at(before, e.field)
            assert got == want, f"{key} {e.field}: {got!r} in force, not the fallback {want!r}"


_NODE_ENTRY = re.compile(r"(nodeStrategies|nodeConfigs)\[\d+\]\.")
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_ABSENT = object()


def _at(doc: Any, path: str) -> Any:
    """The value at a JSON path (``a.b[0].c``) of encoded JSON; _ABSENT where there is none."""
    for name, index in _STEP.findall(path):
        if name:
            doc = doc.get(name, _ABSENT) if isinstance(doc, dict) else _ABSENT
        else:
            doc = doc[int(index)] if isinstance(doc, list) and int(index) < len(doc) else _ABSENT
    return doc


# --- annotations and labels the daemons parse ------------------------------------------------------------
ESTIMATOR = Estimator(
    LoadAwareSchedulingArgs(allow_customize_estimation=True), ("cpu", "memory", c.BATCH_CPU, c.BATCH_MEMORY)
)
LOADAWARE = LoadAwareSchedulingArgs()
ITEMS = (noderesources.ResourceItem(c.BATCH_CPU, 4000), noderesources.ResourceItem(c.BATCH_MEMORY, 2**30))
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
COLOCATION = dataclasses.replace(default_colocation_strategy(), enable=True)
NODE_METRIC = {
    "metadata": {"name": "node-1"},
    "status": {
        "updateTime": "2026-11-22T11:59:30Z",
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "2", "memory": "4Gi"}}},
    },
}


@st.composite
def annotation_cases(draw: st.DrawFn) -> tuple[Node, tuple[Pod, ...]]:
    node = draw(objects.nodes())
    return node, tuple(draw(objects.pods(f"u{i}")) for i in range(draw(st.integers(0, 3))))


def check_annotations(case: tuple[Node, tuple[Pod, ...]]) -> None:
    node, pods = case
    before = copy.deepcopy(case)
    _parse_annotations(node, pods)
    assert case == before, "a parser changed the object it read (an informer's cached object)"


def _parse_annotations(node: Node, pods: tuple[Pod, ...]) -> None:
    cpuset_policy.reserved_cpus(node)
    cpuset_policy.annotation_reserved_milli(node)
    cpuset_policy.system_exclusive_cpus(node)
    cpuset_policy.cpu_manager_policy(node)
    cpuset_policy.lse_cpus(pods)
    cgroupreconcile._normalization_ratio(node)
    noderesources.node_reserved(node)
    prepare.cpu_normalization_ratio(node)
    prepared = prepare.prepare_node_status(node, ITEMS)
    batch = batchresource.calculate(COLOCATION, node, list(pods), NODE_METRIC, NOW)
    origin = prepared["annotations"][c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE]
    for text in (origin, batchresource.explain_annotation(batch)):  # written compact with sorted keys
        assert json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")) == text
    profile.node_profile(LOADAWARE, ESTIMATOR.resources, node)
    profile.node_capacity(ESTIMATOR.resources, node)
    slo = NodeSLOSpec(resource_qos_strategy=ResourceQOSStrategy())
    for pod in pods:
        meta = pod_meta(pod, CgroupDriver.CGROUPFS)
        cpuset_policy.pod_cpuset(pod)
        cpuset_policy.pod_has_cpu_allocation(pod)
        cpuburst.pod_burst_config(pod, None)
        cgroupreconcile.batch_specs(pod)
        cgroupreconcile.pod_memory_qos(pod, slo)
        evictplan.eviction_allowed(pod, "BEMemoryEvict")
        evictplan.generic_key(meta)
        resctrlqos.pod_group(meta, ResourceQOSStrategy())
        qos.qos_class_with_default(pod)
        qos.priority_class_with_default(pod)
        ESTIMATOR.estimate_or_empty(pod)
        ESTIMATOR.deadline(pod, 1e9)
        _parse_topology_annotations(pod)
    node_annotations = (node.get("metadata") or {}).get("annotations") or {}
    numa.node_reservation_reserved_cpus(node_annotations)  # undecodable → no reserved CPUs
    with contextlib.suppress(ValueError):  # NodeNUMAResource: "invalid CPU amplification ratio"
        numa.amplification_ratios(node_annotations)


def _parse_topology_annotations(pod: Pod) -> None:
    """The CPU and device annotations: a reader may refuse (ValueError, which its callers catch) but
    never raise anything else; the plugins following assigned pods never raise at all."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    for parse in (numa.parse_resource_status, numa.parse_resource_spec, numa.parse_numa_topology_spec):
        with contextlib.suppress(ValueError):
            parse(ann)
    with contextlib.suppress(ValueError):
        device.parse_device_allocations(ann.get(device.ANNOTATION_DEVICE_ALLOCATED))
    assigned = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": "node-1"}}
    for plugin in (NodeNUMAResource(), DeviceShare()):
        plugin.on_pod_add(assigned)  # type: ignore[arg-type]
        plugin.on_pod_delete(assigned)  # type: ignore[arg-type]


# --- NodeMetric objects ----------------------------------------------------------------------------------
def check_nodemetric(raw: Any) -> None:
    try:
        nm = NodeMetric.from_dict(raw)
    except NodeMetricError:
        return
    canonical = NodeMetric.from_dict(json.loads(json.dumps(nm.to_dict()))).to_dict()
    assert NodeMetric.from_dict(canonical).to_dict() == canonical, "the canonical form is not stable"
    msg = pb.NodeMetricReport.FromString(convert.nodemetric_dict_to_report(canonical).SerializeToString())
    try:
        back = convert.report_to_nodemetric_dict(msg, canonical.get("metadata"))
    except NodeMetricError as e:  # the hub's limits are tighter than the CRD's (apis/reportlimits.py)
        assert reason_of(e) in (JSON_TOO_LARGE, JSON_TOO_DEEP) or "characters" in str(e), e
        return
    assert back == canonical, "dict → proto → bytes → dict changed the NodeMetric"


# --- MetricHub reports -----------------------------------------------------------------------------------
def check_report_bytes(raw: bytes) -> None:
    try:
        msg = parse_report(raw)
    except DecodeError:
        return
    try:
        oracle = check_report_oracle(msg, wire.RECEIVED_NS, len(raw))  # the whole report decoded
    except NodeMetricError as e:
        try:
            check_report(msg, wire.RECEIVED_NS, len(raw))
        except NodeMetricError as refused:
            assert (reason_of(refused), str(refused)) == (reason_of(e), str(e)), "not the oracle's refusal"
            return
        raise AssertionError(f"the hub accepts a report its oracle refuses: {e}") from None
    check_report(msg, wire.RECEIVED_NS, len(raw))  # what the hub accepts
    received = Timestamp()
    received.FromNanoseconds(wire.RECEIVED_NS)
    stored = pb.RawNodeMetricItem(revision=1, report=raw, received_time=received).SerializeToString()
    item = pb.NodeMetricItem.FromString(stored)  # what a consumer reads back from the hub
    consumer = checked_item(item)
    assert consumer == oracle, "a consumer decodes an accepted report differently from the hub"
    json.dumps(consumer.to_dict())  # the NodeResource controller reads the dict form


# Timestamp's valid range (google/protobuf/timestamp.proto): 0001-01-01 to 9999-12-31, nanos 0..999999999.
_MIN_SECONDS, _MAX_SECONDS = -62_135_596_800, 253_402_300_799


def invalid_update_time(raw: bytes) -> bool:
    """The report parses and its status.updateTime is outside Timestamp's valid range (the hub's check
    once let protobuf's ValueError through for such a time)."""
    try:
        msg = parse_report(raw)
    except DecodeError:
        return False
    ts = msg.status.update_time
    in_range = _MIN_SECONDS <= ts.seconds <= _MAX_SECONDS and 0 <= ts.nanos <= 999_999_999
    return msg.status.HasField("update_time") and not in_range


# --- scenario files --------------------------------------------------------------------------------------
def check_scenario(scenario: Any) -> None:
    try:
        result = simulate_scenario(scenario)
    except ValueError:
        return
    json.dumps(result, sort_keys=True)  # `koord simulate` prints it


def _target(
    name: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    known: Callable[[Any], bool] | None = None,
) -> Target:
    # deferred: a failure report names the strategy by this short repr, not by its whole tree
    return Target(name, st.deferred(lambda: strategy), check, known)


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _target("quantity", strategies.quantity_texts | strategies.quantity_json, check_quantity),
        _target("sloconfig", slo_cases(), check_sloconfig),
        _target("annotations", annotation_cases(), check_annotations),
        _target("nodemetric", wire.nodemetric_dicts, check_nodemetric),
        _target("hub_report", wire.report_bytes, check_report_bytes),
        *(_target(f"scenario_{kind}", wire.scenarios(kind), check_scenario) for kind in sorted(KINDS)),
    )
}
