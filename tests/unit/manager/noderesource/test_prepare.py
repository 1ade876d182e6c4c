"""prepare_node_status / prepare_node / need_sync / disabled_reset: deletes, cpu normalization, rounding,
originExtendedAllocatable, thirdPartyAllocations, the anti-churn threshold; inputs are never mutated."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from manager.noderesource.prepare import disabled_reset, need_sync, prepare_node, prepare_node_status
from manager.noderesource.resources import ResourceItem

BC, BM, MC, MM = (
    "kubernetes.io/batch-cpu",
    "kubernetes.io/batch-memory",
    "kubernetes.io/mid-cpu",
    "kubernetes.io/mid-memory",
)


def node(alloc: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    base = {"cpu": "32", "memory": "128Gi"}
    return {
        "metadata": {"name": "n1", "annotations": dict(annotations or {})},
        "spec": {"unschedulable": False},
        "status": {
            "capacity": {**base, **(alloc or {})},
            "allocatable": {**base, **(alloc or {})},
            "phase": "x",
        },
    }


def test_items_written_reset_and_none_deleted() -> None:
    n = node({BC: "5k", MC: "1", MM: "1Gi"})
    before = copy.deepcopy(n)
    out = prepare_node_status(
        n,
        [
            ResourceItem(BC, 12000),
            ResourceItem(BM, 1 << 30),
            ResourceItem(MC, None),
            ResourceItem(MM, 7, reset=True),
        ],
    )
    assert n == before  # not mutated
    assert out["allocatable"][BC] == "12k" and out["capacity"][BC] == "12k"
    assert out["allocatable"][BM] == "1Gi"
    assert MC not in out["allocatable"] and MM not in out["capacity"]
    assert out["allocatable"]["cpu"] == "32"
    origin = json.loads(out["annotations"]["node.koordinator.sh/originExtendedAllocatable"])
    assert origin == {"resources": {BC: "12k", BM: "1Gi"}}


def test_cpu_normalization_multiplies_and_rounds_up() -> None:
    ann = {"node.koordinator.sh/cpu-normalization-ratio": "1.33"}
    out = prepare_node_status(node(annotations=ann), [ResourceItem(BC, 10701), ResourceItem(BM, 10)])
    # MultiplyMilliQuant: int64(10701000*1.33)=14232330 milli -> Value() rounds up -> 14233
    assert out["allocatable"][BC] == "14233"
    assert out["allocatable"][BM] == "10"  # memory untouched
    assert (
        prepare_node_status(node(), [ResourceItem(BC, 100)], cpu_normalization=2.0)["allocatable"][BC]
        == "200"
    )
    bad = {"node.koordinator.sh/cpu-normalization-ratio": "fast"}
    assert prepare_node_status(node(annotations=bad), [ResourceItem(BC, 100)])["allocatable"][BC] == "100"


def test_third_party_allocations_subtracted_and_floored() -> None:
    allocs = {
        "allocations": [
            {"name": "x", "priority": "koord-batch", "resources": {BC: "3000", BM: "2Gi"}},
            {"name": "y", "priority": "koord-batch", "resources": {BC: 1000}},
            {"name": "z", "priority": "koord-mid", "resources": {BC: "9k"}},
        ]
    }
    ann = {"node.koordinator.sh/thirdPartyAllocations": json.dumps(allocs)}
    out = prepare_node_status(node(annotations=ann), [ResourceItem(BC, 10000), ResourceItem(BM, 1 << 30)])
    assert out["allocatable"][BC] == "6k"
    assert out["allocatable"][BM] == "0"  # 1Gi - 2Gi floored at 0
    origin = json.loads(out["annotations"]["node.koordinator.sh/originExtendedAllocatable"])
    assert origin["resources"] == {BC: "10k", BM: "1Gi"}  # before subtraction
    garbage = {"node.koordinator.sh/thirdPartyAllocations": "{oops"}
    assert (
        prepare_node_status(node(annotations=garbage), [ResourceItem(BC, 10000)])["allocatable"][BC] == "10k"
    )


def test_reset_records_zero_origin_and_does_not_resurrect() -> None:
    ann = {
        "node.koordinator.sh/thirdPartyAllocations": json.dumps(
            {"allocations": [{"name": "x", "priority": "koord-batch", "resources": {BC: "1"}}]}
        )
    }
    out = prepare_node_status(
        node({BC: "5k"}, ann), [ResourceItem(BC, None, True), ResourceItem(BM, None, True)]
    )
    assert BC not in out["allocatable"] and BC not in out["capacity"]
    origin = json.loads(out["annotations"]["node.koordinator.sh/originExtendedAllocatable"])
    assert origin == {"resources": {BC: "0", BM: "0"}}


def test_mid_only_items_leave_batch_annotation_alone() -> None:
    out = prepare_node_status(node(), [ResourceItem(MC, 2000)])
    assert out["allocatable"][MC] == "2k"
    assert "node.koordinator.sh/originExtendedAllocatable" not in out["annotations"]


def test_prepare_node_copy_keeps_other_fields() -> None:
    n = node()
    new = prepare_node(n, [ResourceItem(BC, 1)], extra_annotations={"a": "b"})
    assert new["spec"] is n["spec"] and new["status"]["phase"] == "x"
    assert new["metadata"]["annotations"]["a"] == "b" and "a" not in n["metadata"]["annotations"]
    assert new["status"]["allocatable"][BC] == "1" and BC not in n["status"]["allocatable"]


def test_need_sync() -> None:
    old = node({BC: "10000", BM: "10Gi"})
    assert not need_sync(old, copy.deepcopy(old), 0.1)
    assert not need_sync(old, node({BC: "11000", BM: "10Gi"}), 0.1)  # |1000| > 1000 is false
    assert need_sync(old, node({BC: "11001", BM: "10Gi"}), 0.1)
    assert need_sync(old, node({BC: "8999", BM: "10Gi"}), 0.1)
    assert need_sync(old, node({BC: "10000"}), 0.1)  # disappeared
    assert need_sync(old, node({BC: "10000", BM: "10Gi", MC: "0"}), 0.1)  # appeared (even at 0)
    assert not need_sync(node({MC: "0"}), node({MC: "0"}), 0.1)
    assert need_sync(node({MM: "1Gi"}), node({MM: "2Gi"}), 0.5)
    assert need_sync(node({MM: "1Gi"}), node({MM: "bad"}), 0.5)
    assert not need_sync(node({"cpu": "1"}), node({"cpu": "2"}), 0.1)  # only batch/mid matter


def test_disabled_reset() -> None:
    r = disabled_reset()
    assert r.message == "node colocation is disabled in Config, reason: DisableInConfig"
    assert {i.name for i in r.items} == {BC, BM, MC, MM} and all(i.reset for i in r.items)
    out = prepare_node_status(node({BC: "1", BM: "1", MC: "1", MM: "1"}), r.items)
    assert not ({BC, BM, MC, MM} & set(out["allocatable"]))


@settings(max_examples=200, deadline=None)
@given(
    cpu=st.integers(min_value=0, max_value=10**9),
    mem=st.integers(min_value=0, max_value=2**50),
    used_cpu=st.integers(min_value=0, max_value=10**9),
    ratio=st.floats(min_value=0, max_value=10, allow_nan=False),
)
def test_prepared_values_never_negative(cpu: int, mem: int, used_cpu: int, ratio: float) -> None:
    ann = {
        "node.koordinator.sh/cpu-normalization-ratio": repr(ratio),
        "node.koordinator.sh/thirdPartyAllocations": json.dumps(
            {
                "allocations": [
                    {"name": "x", "priority": "koord-batch", "resources": {BC: str(used_cpu), BM: "1Gi"}}
                ]
            }
        ),
    }
    out = prepare_node_status(node(annotations=ann), [ResourceItem(BC, cpu), ResourceItem(BM, mem)])
    from apis.quantity import Quantity

    for name in (BC, BM):
        q = Quantity.parse(out["allocatable"][name])
        assert q.value() >= 0 and q.as_fraction().denominator == 1
        assert out["capacity"][name] == out["allocatable"][name]
