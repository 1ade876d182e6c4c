"""BatchResource / MidResource pure calculation: helpers (cpuset, rounding, reservation, degrade), terms,
the explain annotation, docs/rules/manager.md#a-pod-without-a-metric-counts-its-request, and property tests
that every output is a non-negative integer."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apis.cpuset import CPUSetError, parse_cpuset
from apis.nodemetric import NodeMetric
from apis.sloconfig_merge import default_colocation_strategy
from apis.sloconfig_types import ColocationStrategy
from manager.noderesource.plugins import batchresource, midresource
from manager.noderesource.resources import (
    NANO,
    annotation_reserved,
    is_degraded,
    milli,
    multiply_milli,
    multiply_value,
    pod_infos,
    value,
)

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
GI = 1 << 30


def node(cpu: str = "32", mem: str = "128Gi", annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "annotations": annotations or {}},
        "status": {"capacity": {"cpu": cpu, "memory": mem}, "allocatable": {"cpu": "31", "memory": "124Gi"}},
    }


def pod(name: str, cpu: str, mem: str, cls: str = "koord-prod", phase: str = "Running") -> dict[str, Any]:
    return {
        "metadata": {"namespace": "default", "name": name, "labels": {"koordinator.sh/priority-class": cls}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        "status": {"phase": phase},
    }


def metric(pods: list[tuple[str, str, str]] | None = None, update: datetime | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1"},
        "status": {
            "updateTime": (update or NOW - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": "12", "memory": "40Gi"}},
                "systemUsage": {"resources": {"cpu": "1500m", "memory": "6Gi"}},
            },
            "podsMetric": [
                {
                    "namespace": "default",
                    "name": n,
                    "priority": "koord-prod",
                    "podUsage": {"resources": {"cpu": c, "memory": m}},
                }
                for n, c, m in (pods or [])
            ],
        },
    }


def strategy(**kw: Any) -> ColocationStrategy:
    from dataclasses import replace

    return replace(default_colocation_strategy(), **kw)


WORKED_PODS = [pod("a", "8", "16Gi"), pod("b", "4", "8Gi")]


# --- helpers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "count"),
    [("", 0), ("0-5", 6), ("0,2,4-5", 4), ("5-3", 0), ("3,3,1-3", 3), ("+1", 1), ("4096", 1)],
)
def test_cpuset_counts(text: str, count: int) -> None:
    assert len(parse_cpuset(text)) == count


@pytest.mark.parametrize("text", ["x", "1,", " 1", "-1", "1-2-3", "4097", "0-4097", "1,,2"])
def test_cpuset_rejects(text: str) -> None:
    with pytest.raises(CPUSetError):
        parse_cpuset(text)


def test_rounding_is_away_from_zero() -> None:
    assert milli(1) == 1 and milli(-1) == -1 and milli(10**6) == 1
    assert value(NANO + 1) == 2 and value(-NANO - 1) == -2 and value(0) == 0
    assert value(10**40) == 2**63 - 1  # saturates like Go


def test_multiply_truncates_like_go() -> None:
    assert multiply_milli(32 * NANO, 0.4) == 12800 * 10**6
    assert multiply_value(128 * GI * NANO, 0.35) == 48103633715 * NANO
    assert multiply_milli(NANO // 1000 * 7, 0.5) == 3 * 10**6  # int64(7*0.5)=3


def test_reservation_annotation() -> None:
    key = "node.koordinator.sh/reservation"
    r = annotation_reserved(
        node(annotations={key: '{"resources":{"cpu":"2","memory":"1Gi"},"reservedCPUs":"0-3"}'})
    )
    assert (r.milli_cpu, r.memory_bytes) == (4000, GI)
    assert annotation_reserved(node(annotations={key: "not json"})).cpu == 0
    assert (
        annotation_reserved(node(annotations={key: '{"resources":{"cpu":"2"},"reservedCPUs":"a"}'})).cpu == 0
    )
    assert annotation_reserved(node(annotations={key: '["list"]'})).memory == 0


def test_degrade_boundaries() -> None:
    upd = NOW - timedelta(minutes=15)
    assert not is_degraded(metric(update=upd), NOW, 15)
    assert is_degraded(metric(update=upd - timedelta(seconds=1)), NOW, 15)
    assert is_degraded(None, NOW, 15)
    assert is_degraded({"status": {"updateTime": "garbage"}}, NOW, 15)


# --- batch -----------------------------------------------------------------------------------------------
def test_worked_example_terms_and_explain() -> None:
    r = batchresource.calculate(strategy(), node(), WORKED_PODS, metric([("a", "3", "10Gi")]), NOW)
    assert r.value_of("kubernetes.io/batch-cpu") == 10700
    assert r.value_of("kubernetes.io/batch-memory") == 63565515981
    t = r.terms
    assert t is not None
    assert t.safety_margin.explain() == {"cpu": 12800, "memory": 48103633715}
    assert t.node_reserved.explain() == {"cpu": 1000, "memory": 4 * GI}
    assert t.hp_used.explain() == {"cpu": 7000, "memory": 18 * GI}
    assert t.hp_request.explain() == {"cpu": 12000, "memory": 24 * GI}
    # docs/rules/manager.md#a-pod-without-a-metric-counts-its-request:
    # B (no metric) counts its request in HPMaxUsedReq: 8000 + 4000 (upstream: 8000 only)
    assert t.hp_max_used_req.explain() == {"cpu": 12000, "memory": 24 * GI}
    doc = json.loads(batchresource.explain_annotation(r))
    for k in (
        "capacity",
        "safetyMargin",
        "nodeReserved",
        "systemUsed",
        "systemUsedOrReserved",
        "HPRequest",
        "HPUsed",
    ):
        assert k in doc
    assert (
        doc["HPMaxUsedReq"]["cpu"] == 12000 and doc["cpuPolicy"] == "usage" and doc["result"]["cpu"] == 10700
    )
    assert "batchAllocatable[CPU(Milli-Core)]:10700" in r.message
    assert batchresource.ANNOTATION_BATCH_RESOURCE_EXPLAIN == "node.koordinator.sh/batch-resource-explain"


def test_degraded_result_message() -> None:
    r = batchresource.calculate(strategy(), node(), WORKED_PODS, None, NOW)
    assert r.terms is None and r.reset
    assert (
        r.message == "degrade node resource because of abnormal nodeMetric, reason: degradedByBatchResource"
    )
    assert [(i.name, i.value, i.reset) for i in r.items] == [
        ("kubernetes.io/batch-cpu", None, True),
        ("kubernetes.io/batch-memory", None, True),
    ]
    assert json.loads(batchresource.explain_annotation(r))["reason"] == "degradedByBatchResource"


def test_policies_and_fallbacks() -> None:
    nm = metric([("a", "3", "10Gi")])
    cpu_req = batchresource.calculate(strategy(cpu_calculate_policy="request"), node(), WORKED_PODS, nm, NOW)
    assert cpu_req.terms is not None and cpu_req.terms.cpu_policy == "usage"
    assert cpu_req.value_of("kubernetes.io/batch-cpu") == 10700
    unknown = batchresource.calculate(strategy(memory_calculate_policy="other"), node(), WORKED_PODS, nm, NOW)
    assert unknown.value_of("kubernetes.io/batch-memory") == 63565515981
    unset = batchresource.calculate(ColocationStrategy(), node(), WORKED_PODS, nm, NOW)  # all defaults
    assert unset.value_of("kubernetes.io/batch-cpu") == 10700


def test_nodemetric_dataclass_equals_dict_and_pod_infos_equal_pods() -> None:
    nm = metric([("a", "3", "10Gi")])
    as_dict = batchresource.calculate(strategy(), node(), WORKED_PODS, nm, NOW)
    as_obj = batchresource.calculate(strategy(), node(), WORKED_PODS, NodeMetric.from_dict(nm), NOW)
    infos = batchresource.calculate(strategy(), node(), pod_infos(WORKED_PODS), nm, NOW)
    assert as_dict.items == as_obj.items == infos.items


def test_invalid_quantity_raises() -> None:
    with pytest.raises(ValueError):
        batchresource.calculate(strategy(), node(cpu="lots"), WORKED_PODS, metric(), NOW)


# --- mid -------------------------------------------------------------------------------------------------
def test_mid_static_dynamic_and_degrade() -> None:
    nm = metric([("a", "3", "10Gi")])
    static = midresource.calculate(
        strategy(mid_reclaim_mode="static", mid_static_cpu_reserved_percent=10), node(), WORKED_PODS, nm, NOW
    )
    assert (
        static.value_of("kubernetes.io/mid-cpu") == 3200 and static.value_of("kubernetes.io/mid-memory") == 0
    )
    nm["status"]["prodReclaimableMetric"] = {"resource": {"resources": {"cpu": "4", "memory": "16Gi"}}}
    dyn = midresource.calculate(strategy(), node(), WORKED_PODS, nm, NOW)
    assert (dyn.value_of("kubernetes.io/mid-cpu"), dyn.value_of("kubernetes.io/mid-memory")) == (
        4000,
        16 * GI,
    )
    assert json.loads(midresource.explain_annotation(dyn))["prodReclaimable"] == {
        "cpu": 4000,
        "memory": 16 * GI,
    }
    gone = midresource.calculate(strategy(), node(), WORKED_PODS, None, NOW)
    assert gone.reset and gone.reason == "degradedByMidResource"


# --- properties ------------------------------------------------------------------------------------------
quantities = st.integers(min_value=0, max_value=10**6).map(lambda m: f"{m}m")
mems = st.integers(min_value=0, max_value=2**40).map(str)
policies = st.sampled_from(["usage", "request", "maxUsageRequest", "bogus"])


@settings(max_examples=150, deadline=None)
@given(
    cap_cpu=quantities,
    cap_mem=mems,
    sys_cpu=quantities,
    sys_mem=mems,
    pods=st.lists(st.tuples(quantities, mems, quantities, mems, st.booleans()), max_size=6),
    cpu_policy=policies,
    mem_policy=policies,
    reclaim=st.integers(min_value=0, max_value=150),
    cap_pct=st.one_of(st.none(), st.integers(min_value=0, max_value=200)),
    mid_pct=st.integers(min_value=0, max_value=100),
)
def test_outputs_never_negative(
    cap_cpu: str,
    cap_mem: str,
    sys_cpu: str,
    sys_mem: str,
    pods: list[tuple[str, str, str, str, bool]],
    cpu_policy: str,
    mem_policy: str,
    reclaim: int,
    cap_pct: int | None,
    mid_pct: int,
) -> None:
    n = node(cap_cpu, cap_mem)
    nm = metric([(f"p{i}", uc, um) for i, (_, _, uc, um, has) in enumerate(pods) if has])
    nm["status"]["nodeMetric"]["systemUsage"]["resources"] = {"cpu": sys_cpu, "memory": sys_mem}
    nm["status"]["prodReclaimableMetric"] = {"resource": {"resources": {"cpu": sys_cpu, "memory": sys_mem}}}
    plist = [pod(f"p{i}", rc, rm) for i, (rc, rm, _, _, _) in enumerate(pods)]
    s = strategy(
        cpu_calculate_policy=cpu_policy,
        memory_calculate_policy=mem_policy,
        cpu_reclaim_threshold_percent=reclaim,
        memory_reclaim_threshold_percent=reclaim,
        batch_cpu_threshold_percent=cap_pct,
        batch_memory_threshold_percent=cap_pct,
        mid_unallocated_percent=mid_pct,
    )
    for r in (batchresource.calculate(s, n, plist, nm, NOW), midresource.calculate(s, n, plist, nm, NOW)):
        for item in r.items:
            assert isinstance(item.value, int) and item.value >= 0
        assert r.terms is not None and r.terms.result.cpu >= 0 and r.terms.result.memory >= 0
