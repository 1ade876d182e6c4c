"""The Device object built from GPU records (docs/rules/koordlet-gpu.md#device-object) and the "changed"
rule and merge patch of its reporter (docs/rules/koordlet-gpu.md#reporting). Expected objects are
written out by hand from the rules."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from agent.system.gpu import GPU, GPUInventory
from agent.topology.device import build_device, device_changed, device_patch, gpu_labels, gpu_model

GI = 1024**3
TOPO0 = {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"}
NOW = "2026-11-27T21:00:00Z"
LATER = "2026-11-27T21:05:00Z"


def _gpu(minor: int, **kw: Any) -> GPU:
    base: dict[str, Any] = {
        "index": minor,
        "uuid": f"GPU-{minor}",
        "minor": minor,
        "model": "NVIDIA A100-SXM4-80GB",
        "memory_total_bytes": 80 * GI,
        "bus_id": f"0000:{0x3B + minor:02x}:00.0",
        "numa_node": minor // 2,
        "pcie_id": f"pci0000:{0x3A + minor:02x}",
    }
    base.update(kw)
    return GPU(**base)


def test_one_card_exactly() -> None:
    obj = build_device("node-a", "uid-1", GPUInventory((_gpu(0),), "535.104.05"), NOW)
    assert obj == {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {
            "name": "node-a",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": "node-a",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "labels": {
                "node.koordinator.sh/gpu-vendor": "nvidia",
                "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
                "node.koordinator.sh/gpu-driver-version": "535.104.05",
            },
        },
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": "GPU-0",
                    "minor": 0,
                    "health": True,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory": "80Gi",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                    "topology": {
                        "socketID": -1,
                        "nodeID": 0,
                        "pcieID": "pci0000:3a",
                        "busID": "0000:3b:00.0",
                    },
                }
            ]
        },
    }


def test_four_cards_sorted_by_minor_memory_binary_si_topology_when_known() -> None:
    gpus = (
        _gpu(3, memory_total_bytes=15109 * 1024**2),  # 15109 MiB: printed "15109Mi"
        _gpu(1, memory_total_bytes=123456789),  # not a multiple of 1024: plain digits
        _gpu(0, numa_node=-1),  # NUMA node unknown: no topology
        _gpu(2, pcie_id=""),  # PCIe root unknown: no topology
    )
    devices = build_device("n", "u", GPUInventory(gpus, "535"), NOW)["spec"]["devices"]
    assert [d["minor"] for d in devices] == [0, 1, 2, 3]
    assert [d["resources"]["koordinator.sh/gpu-memory"] for d in devices] == [
        "80Gi",
        "123456789",
        "80Gi",
        "15109Mi",
    ]
    assert ["topology" in d for d in devices] == [False, True, False, True]
    assert devices[3]["topology"] == {
        "socketID": -1,
        "nodeID": 1,
        "pcieID": "pci0000:3d",
        "busID": "0000:3e:00.0",
    }


def test_unhealthy_card_has_no_capacity_flag_and_a_condition() -> None:
    sick = _gpu(
        1, healthy=False, health_reason="Xid79", health_message="Xid error detected on device, error code: 79"
    )
    nameless = _gpu(2, healthy=False)
    devices = build_device("n", "u", GPUInventory((_gpu(0), sick, nameless), "535"), NOW)["spec"]["devices"]
    assert [d["health"] for d in devices] == [True, False, False]
    assert "conditions" not in devices[0]
    assert devices[1]["conditions"] == [
        {
            "type": "Healthy",
            "status": "False",
            "lastTransitionTime": NOW,
            "reason": "Xid79",
            "message": "Xid error detected on device, error code: 79",
        }
    ]
    assert (devices[2]["conditions"][0]["reason"], devices[2]["conditions"][0]["message"]) == (
        "Unknown",
        "device is unhealthy",
    )


def test_model_label() -> None:
    assert gpu_model(["NVIDIA A100-SXM4-80GB"] * 2) == "A100-SXM4-80GB"
    assert gpu_model(["Tesla T4"]) == "Tesla-T4"
    assert gpu_model(["NVIDIA GeForce RTX 2080 Ti"]) == "GeForce-RTX-2080-Ti"
    assert gpu_model(["Tesla T4", "Tesla V100-SXM2-16GB"]) == ""  # mixed models: none
    assert gpu_model(["", ""]) == ""
    assert gpu_model([]) == ""


def test_labels() -> None:
    t4 = _gpu(0, model="Tesla T4")
    assert gpu_labels(GPUInventory()) is None
    assert gpu_labels(GPUInventory((t4,), "")) == {"node.koordinator.sh/gpu-vendor": "nvidia"}
    mixed = GPUInventory((t4, _gpu(1)), "535")
    assert gpu_labels(mixed) == {"node.koordinator.sh/gpu-vendor": "nvidia"}


def test_node_without_cards_still_gets_a_device() -> None:
    obj = build_device("n", "u", GPUInventory(), NOW)
    assert obj["spec"] == {}
    assert "labels" not in obj["metadata"]


def _server_copy(obj: dict[str, Any]) -> dict[str, Any]:
    current = copy.deepcopy(obj)
    current["metadata"]["resourceVersion"] = "42"
    current["metadata"]["uid"] = "dev-uid"
    return current


def test_changed() -> None:
    inv = GPUInventory((_gpu(0), _gpu(1, healthy=False, health_reason="Xid79")), "535")
    desired = build_device("n", "u", inv, LATER)
    current = _server_copy(build_device("n", "u", inv, NOW))
    # Same cards; only the condition time would differ, and an unchanged status keeps the old time.
    assert not device_changed(desired, current)
    # The same quantity written another way is no change.
    current["spec"]["devices"][0]["resources"]["koordinator.sh/gpu-memory"] = str(80 * GI)
    assert not device_changed(desired, current)
    # Devices in another order are no change (both sides sorted by type, minor).
    current["spec"]["devices"].reverse()
    assert not device_changed(desired, current)

    edits: list[Callable[[dict[str, Any]], object]] = [
        lambda o: o["metadata"]["labels"].update({"extra": "x"}),
        lambda o: o["metadata"].update({"annotations": {"someone": "else"}}),
        lambda o: o["spec"]["devices"][0].update({"health": False}),
        lambda o: o["spec"]["devices"][0]["resources"].update({"koordinator.sh/gpu-core": "50"}),
        lambda o: o["spec"]["devices"].pop(),
        lambda o: o["spec"].update({"devices": [{"minor": "zero"}]}),  # undecodable: rewritten
    ]
    for edit in edits:
        changed = _server_copy(build_device("n", "u", inv, NOW))
        edit(changed)
        assert device_changed(desired, changed)


def test_condition_status_change_is_a_change() -> None:
    healthy = GPUInventory((_gpu(0),), "535")
    sick = GPUInventory((_gpu(0, healthy=False),), "535")
    assert device_changed(
        build_device("n", "u", sick, LATER), _server_copy(build_device("n", "u", healthy, NOW))
    )


def test_patch() -> None:
    inv = GPUInventory((_gpu(0, healthy=False, health_reason="Xid79"),), "535")
    old = GPUInventory((_gpu(0, healthy=False, health_reason="Xid79"), _gpu(1, model="Tesla T4")), "")
    current = _server_copy(build_device("n", "u", old, NOW))
    current["metadata"]["labels"]["team"] = "ml"
    current["metadata"]["annotations"] = {"note": "x"}
    patch = device_patch(build_device("n", "u", inv, LATER), current)
    assert patch == {
        "metadata": {
            "labels": {
                "team": None,
                "node.koordinator.sh/gpu-vendor": "nvidia",
                "node.koordinator.sh/gpu-model": "A100-SXM4-80GB",
                "node.koordinator.sh/gpu-driver-version": "535",
            },
            "annotations": {"note": None},
        },
        "spec": {
            "devices": [
                {
                    "type": "gpu",
                    "id": "GPU-0",
                    "minor": 0,
                    "health": False,
                    "resources": {
                        "koordinator.sh/gpu-core": "100",
                        "koordinator.sh/gpu-memory": "80Gi",
                        "koordinator.sh/gpu-memory-ratio": "100",
                    },
                    "topology": {
                        "socketID": -1,
                        "nodeID": 0,
                        "pcieID": "pci0000:3a",
                        "busID": "0000:3b:00.0",
                    },
                    # status unchanged: the current transition time is kept
                    "conditions": [
                        {
                            "type": "Healthy",
                            "status": "False",
                            "lastTransitionTime": NOW,
                            "reason": "Xid79",
                            "message": "device is unhealthy",
                        }
                    ],
                }
            ]
        },
    }


def test_patch_to_no_devices_removes_the_list() -> None:
    current = _server_copy(build_device("n", "u", GPUInventory((_gpu(0),), "535"), NOW))
    patch = device_patch(build_device("n", "u", GPUInventory(), NOW), current)
    assert patch["spec"] == {"devices": None}
    assert patch["metadata"]["labels"] == {
        "node.koordinator.sh/gpu-vendor": None,
        "node.koordinator.sh/gpu-model": None,
        "node.koordinator.sh/gpu-driver-version": None,
    }
