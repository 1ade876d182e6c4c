"""Bounded fuzz runs of every target in tests/reliability/fuzz/targets.py (the same targets `bench/fuzz.py`
runs at length): product code given quantities, `slo-controller-config` data, node and pod annotations,
NodeMetric objects, MetricHub report bytes and scenario files of every kind raises nothing but its
documented errors and keeps its round trips. Also the regressions the fuzzing found, pinned as plain
examples, and the reproducer of a failure of the hub's report check it found (fixed).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from apis import constants as c
from apis import device, numa
from apis.kubeobjects import Node, Pod
from apis.reportcheck import NodeMetricError, check_report
from koord.simulate import KINDS, simulate_scenario
from manager.metrichub.ingest import parse_report
from tests.reliability.fuzz import targets
from tests.reliability.fuzz.budget import EXAMPLES, SCENARIO_EXAMPLES, fuzz_settings
from tests.reliability.fuzz.targets import TARGETS, Target

pytestmark = pytest.mark.fuzz


def _fuzz(target: Target, examples: int = EXAMPLES) -> None:
    """Runs ``target`` for ``examples`` examples; inputs of a known, reported failure (``Target.known``)
    are left out: a strict xfail of its reproducer pins it until it is fixed."""

    def check(value: Any) -> None:
        if target.known is None or not target.known(value):
            target.check(value)

    fuzz_settings(examples)(given(target.strategy)(check))()


def test_quantities() -> None:
    _fuzz(TARGETS["quantity"])


def test_slo_controller_config_keeps_last_good_per_key() -> None:
    _fuzz(TARGETS["sloconfig"])


def test_annotations_the_daemons_parse() -> None:
    _fuzz(TARGETS["annotations"])


def test_nodemetric_objects() -> None:
    _fuzz(TARGETS["nodemetric"])


def test_hub_reports_are_accepted_or_refused_cleanly_and_decode_alike() -> None:
    _fuzz(TARGETS["hub_report"])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_scenario_files(kind: str) -> None:
    _fuzz(TARGETS[f"scenario_{kind}"], SCENARIO_EXAMPLES)


# --- regressions found by the fuzzing ----------------------------------------------------------------------
DEEP = ("[" * 5000, '{"a":' * 5000 + "1" + "}" * 5000, '{"policy": ' + "[" * 1500 + "]" * 1500 + "}")
NODE_KEYS = (
    c.ANNOTATION_NODE_RESERVATION,
    c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    c.ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    c.ANNOTATION_THIRD_PARTY_ALLOCATIONS,
    c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE,
    numa.ANNOTATION_RESOURCE_AMPLIFICATION_RATIO,
)
POD_KEYS = (
    c.ANNOTATION_EVICTION_POLICY,
    c.ANNOTATION_POD_CPU_BURST,
    c.ANNOTATION_POD_MEMORY_QOS,
    c.ANNOTATION_RESOURCE_STATUS,
    c.ANNOTATION_EXTENDED_RESOURCE_SPEC,
    numa.ANNOTATION_RESOURCE_SPEC,
    numa.ANNOTATION_NUMA_TOPOLOGY_SPEC,
    device.ANNOTATION_DEVICE_ALLOCATED,
)


@pytest.mark.parametrize("text", DEEP, ids=("list", "object", "field"))
@pytest.mark.parametrize("key", NODE_KEYS + POD_KEYS)
def test_annotations_nested_too_deep_to_parse_are_ignored(key: str, text: str) -> None:
    """JSON nested past the parser's recursion limit (a few KB, well within an annotation's size) once
    raised RecursionError from every annotation parser: one pod could stop the node's evictions."""
    node: Node = {
        "metadata": {"name": "node-1", "labels": {}, "annotations": {}},
        "status": {"capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"}},
    }
    pod: Pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {c.LABEL_POD_QOS: "BE"}},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }
    (node if key in NODE_KEYS else pod)["metadata"]["annotations"] = {key: text}
    targets.check_annotations((node, (pod,)))


def test_a_huge_cpu_normalization_ratio_saturates() -> None:
    annotations = {c.ANNOTATION_CPU_NORMALIZATION_RATIO: "1e308"}  # int(inf) raised OverflowError
    node: Node = {
        "metadata": {"name": "n", "labels": {}, "annotations": annotations},
        "status": {"capacity": {}, "allocatable": {}},
    }
    targets.check_annotations((node, ()))


def test_a_profile_scenario_with_a_pod_namespace_of_the_wrong_type_is_refused() -> None:
    pod = {"metadata": {"name": "p", "namespace": {}}, "spec": {"containers": [{"name": "c"}]}}
    with pytest.raises(ValueError, match=r"pod\.metadata\.namespace"):  # was TypeError: unhashable type
        simulate_scenario({"kind": "ColocationProfile", "pod": pod})
    targets.check_scenario({"kind": "ColocationProfile", "pod": pod})


# --- a failure the fuzzer found, fixed --------------------------------------------------------------------
# status.updateTime.seconds = -2^63: protobuf reads it, Timestamp.ToNanoseconds() refused it with a ValueError
# that the hub's check let through (the Report call failed with UNKNOWN instead of INVALID_ARGUMENT).
UPDATE_TIME_OUT_OF_RANGE = (
    b"\n\x010\r\x00\x00\x00\x00\x12\r\n\x0b\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"
)


def test_a_report_with_an_out_of_range_update_time_is_refused_cleanly() -> None:
    assert targets.invalid_update_time(UPDATE_TIME_OUT_OF_RANGE)
    targets.check_report_bytes(UPDATE_TIME_OUT_OF_RANGE)  # refused with a NodeMetricError, which it accepts
    with pytest.raises(NodeMetricError, match="updateTime"):
        check_report(parse_report(UPDATE_TIME_OUT_OF_RANGE), 0)
