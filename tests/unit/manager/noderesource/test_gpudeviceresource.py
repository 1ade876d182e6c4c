"""The GPUDeviceResource plugin (docs/rules/manager.md#gpu-device-resources), worked by hand: a node of 4
cards of 16Gi with minor 2 unhealthy gets 300 / 300 / 48Gi / 300; no Device (or no healthy GPU) removes
every GPU name; a vendor other than nvidia gets no ``koordinator.sh/gpu`` (and an old one stays); labels
are copied, never removed; sums keep the first card's quantity format; the write conditions."""

from __future__ import annotations

import re
from typing import Any

import pytest

from apis.device import DeviceError
from apis.kubeobjects import Node
from manager.noderesource.plugins.gpudeviceresource import (
    RESET_MESSAGE,
    RESOURCE_NAMES,
    GPUResult,
    calculate,
    label_changes,
    need_sync,
    need_sync_meta,
    prepare,
)

GI = 1024**3
VENDOR = "node.koordinator.sh/gpu-vendor"
MODEL = "node.koordinator.sh/gpu-model"
DRIVER = "node.koordinator.sh/gpu-driver-version"
LABELS = {VENDOR: "nvidia", MODEL: "Tesla-V100-SXM2-16GB", DRIVER: "535.104.05"}


def card(
    minor: int, healthy: bool = True, memory: str = "16Gi", extra: dict[str, str] | None = None
) -> dict[str, Any]:
    resources = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": memory,
                 "koordinator.sh/gpu-memory-ratio": "100", **(extra or {})}  # fmt: skip
    return {"type": "gpu", "minor": minor, "health": healthy, "resources": resources}


def device(cards: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "n1"}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": meta,
            "spec": {"devices": cards}}  # fmt: skip


def node(extra: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Node:
    res = {"cpu": "32", "memory": "128Gi", "pods": "110", **(extra or {})}
    return {"metadata": {"name": "n1", "labels": {"zone": "a", **(labels or {})}},
            "status": {"capacity": dict(res), "allocatable": dict(res)}}  # fmt: skip


def allocatable(n: Node) -> dict[str, Any]:
    return dict(n["status"]["allocatable"])


FOUR_ONE_UNHEALTHY = device([card(0), card(1), card(2, healthy=False), card(3)], LABELS)


def test_four_cards_one_unhealthy_sum_the_three_healthy_ones() -> None:
    result = calculate(node(), FOUR_ONE_UNHEALTHY)
    assert result is not None
    # 3 healthy cards: gpu-core 3 × 100, gpu-memory 3 × 16Gi = 48Gi (51539607552 bytes), ratio 3 × 100;
    # koordinator.sh/gpu = Σ gpu-core (vendor nvidia)
    out = prepare(node(), result)
    want = {"koordinator.sh/gpu": "300", "koordinator.sh/gpu-core": "300",
            "koordinator.sh/gpu-memory": "48Gi", "koordinator.sh/gpu-memory-ratio": "300"}  # fmt: skip
    assert allocatable(out) == {"cpu": "32", "memory": "128Gi", "pods": "110", **want}
    assert out["status"]["capacity"] == out["status"]["allocatable"]
    assert 48 * GI == 51539607552 == 3 * 16 * GI
    assert out["metadata"]["labels"] == {"zone": "a", **LABELS}
    assert result.resets == ()
    assert "koordinator.sh/gpu.shared" not in allocatable(out)  # the feature gate is off by default


def test_the_input_node_is_not_mutated() -> None:
    n = node()
    result = calculate(n, FOUR_ONE_UNHEALTHY)
    assert result is not None
    prepare(n, result)
    assert n == node()


def test_shared_resource_behind_the_gate_is_100_per_healthy_card() -> None:
    result = calculate(node(), FOUR_ONE_UNHEALTHY, sync_shared=True)
    assert result is not None
    assert allocatable(prepare(node(), result))["koordinator.sh/gpu.shared"] == "300"


@pytest.mark.parametrize(
    "dev",
    [
        None,
        device([card(0, healthy=False), card(1, healthy=False)], LABELS),
        device([{"type": "rdma", "minor": 0, "health": True, "resources": {"koordinator.sh/rdma": "100"}}]),
        device([]),
    ],
    ids=["no-device", "all-unhealthy", "no-gpu", "empty"],
)
def test_no_device_or_no_healthy_gpu_removes_every_gpu_name(dev: dict[str, Any] | None) -> None:
    old = {"koordinator.sh/gpu": "400", "koordinator.sh/gpu-core": "400", "koordinator.sh/gpu-memory": "64Gi",
           "koordinator.sh/gpu-memory-ratio": "400", "koordinator.sh/gpu.shared": "400",
           "huawei.com/npu-core": "40", "nvidia.com/gpu": "4"}  # fmt: skip
    result = calculate(node(old, LABELS), dev)
    assert result == GPUResult(resets=RESOURCE_NAMES, message=RESET_MESSAGE)
    out = prepare(node(old, LABELS), result)
    # nvidia.com/gpu is the device plugin's: not one of the plugin's names, so it stays; labels stay too
    assert allocatable(out) == {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "4"}
    assert out["status"]["capacity"] == allocatable(out)
    assert out["metadata"]["labels"] == {"zone": "a", **LABELS}


def test_reset_names_are_upstreams_list() -> None:
    assert RESOURCE_NAMES == (
        "koordinator.sh/gpu", "koordinator.sh/gpu-core", "huawei.com/npu-core", "huawei.com/npu-cpu",
        "huawei.com/npu-dvpp", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio",
        "koordinator.sh/gpu.shared",
    )  # fmt: skip


def test_a_vendor_other_than_nvidia_gets_no_koord_gpu_and_an_old_one_stays() -> None:
    labels = {VENDOR: "huawei", MODEL: "Ascend-910"}
    dev = device([card(0), card(1)], labels)
    result = calculate(node(), dev)
    assert result is not None
    assert "koordinator.sh/gpu" not in result.resources
    out = prepare(node(), result)
    assert "koordinator.sh/gpu" not in allocatable(out)
    assert allocatable(out)["koordinator.sh/gpu-core"] == "200"
    assert out["metadata"]["labels"] == {"zone": "a", **labels}  # no driver label on the Device: none set
    # a koordinator.sh/gpu written earlier is neither set nor reset: it stays as it was
    stale = prepare(node({"koordinator.sh/gpu": "400"}), result)
    assert allocatable(stale)["koordinator.sh/gpu"] == "400"


def test_an_unlabelled_device_counts_as_nvidia_and_sets_no_label() -> None:
    result = calculate(node(), device([card(0), card(1)]))
    assert result is not None
    out = prepare(node(), result)
    assert allocatable(out)["koordinator.sh/gpu"] == "200"
    assert out["metadata"]["labels"] == {"zone": "a"}


def test_sums_keep_the_first_cards_format_and_only_known_names_are_written() -> None:
    # bytes as plain numbers stay plain: 2 × 17179869184 = 34359738368
    plain = calculate(node(), device([card(0, memory="17179869184"), card(1, memory="16Gi")]))
    assert plain is not None
    assert str(plain.resources["koordinator.sh/gpu-memory"]) == "34359738368"
    binary = calculate(node(), device([card(0, memory="16Gi"), card(1, memory="17179869184")]))
    assert binary is not None
    assert str(binary.resources["koordinator.sh/gpu-memory"]) == "32Gi"
    # a name the cards list but the plugin does not own is summed, not written
    one = {"nvidia.com/gpu": "1"}
    extra = calculate(node(), device([card(0, extra=one), card(1, extra=one)]))
    assert extra is not None
    assert str(extra.resources["nvidia.com/gpu"]) == "2"
    assert "nvidia.com/gpu" not in allocatable(prepare(node(), extra))


def test_a_node_without_allocatable_gets_nothing() -> None:
    assert calculate({"metadata": {"name": "n1"}, "status": {}}, FOUR_ONE_UNHEALTHY) is None


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"type": "gpu", "health": "yes"}, "device.spec.devices[1].health='yes'"),
        (
            {"type": "gpu", "health": True, "resources": {"koordinator.sh/gpu-core": "abc"}},
            "device.spec.devices[1].resources[koordinator.sh/gpu-core]='abc'",
        ),
    ],
)
def test_a_device_that_does_not_decode_names_the_field(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(DeviceError, match=re.escape(field)):
        calculate(node(), device([card(0), bad]))


def test_need_sync_on_a_big_enough_move_or_a_name_that_comes_or_goes() -> None:
    before = node({"koordinator.sh/gpu-core": "400", "koordinator.sh/gpu-memory": "64Gi"})
    # 400 → 300: |300000 − 400000| = 100000 milli > 400000 × 0.1 = 40000
    assert need_sync(
        before, node({"koordinator.sh/gpu-core": "300", "koordinator.sh/gpu-memory": "64Gi"}), 0.1
    )
    # 64Gi → 65Gi moves 1Gi, under 6.4Gi: not by itself
    assert not need_sync(
        before, node({"koordinator.sh/gpu-core": "400", "koordinator.sh/gpu-memory": "65Gi"}), 0.1
    )
    assert need_sync(before, node({"koordinator.sh/gpu-core": "400"}), 0.1)  # gpu-memory vanished
    assert need_sync(node(), node({"koordinator.sh/gpu-memory-ratio": "100"}), 0.1)  # appeared
    assert not need_sync(node({"nvidia.com/gpu": "4"}), node(), 0.1)  # not one of the plugin's names


def test_need_sync_meta_names_the_first_label_that_differs() -> None:
    assert need_sync_meta(node(), node(labels=LABELS)) == f"gpu device label {VENDOR} changed"
    upgraded = {**LABELS, DRIVER: "550.54.15"}
    assert need_sync_meta(node(labels=LABELS), node(labels=upgraded)) == f"gpu device label {DRIVER} changed"
    assert need_sync_meta(node(labels=LABELS), node(labels={**LABELS, "zone": "b"})) == ""
    assert need_sync_meta(node(), node(labels={MODEL: ""})) == ""  # absent reads as "", as a Go map


def test_label_changes_are_the_labels_that_differ() -> None:
    result = GPUResult(labels={**LABELS, DRIVER: "550.54.15"})
    assert label_changes(node(labels=LABELS), result) == {DRIVER: "550.54.15"}
    assert label_changes(node(labels={**LABELS, DRIVER: "550.54.15"}), result) == {}
