"""A pod's GPU allocation → what its containers get (docs/rules/koordlet-gpu.md#container): upstream's
environment (``NVIDIA_VISIBLE_DEVICES``, the HAMi-core extras) and the device-cgroup rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.topology.gpuhook import (
    DeviceRule,
    GPUHookError,
    Mount,
    container_gpu_spec,
    device_cgroup_rules,
    gpu_allocation,
)
from apis.device import DeviceError

ANN = "scheduling.koordinator.sh/device-allocated"


def _pod(alloc: Any = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    annotations = {} if alloc is None else {ANN: alloc if isinstance(alloc, str) else json.dumps(alloc)}
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations, "labels": labels or {}}}


def _gpus(*items: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"gpu": [{"minor": m, "resources": r} for m, r in items]}


WHOLE = {
    "koordinator.sh/gpu-core": "100",
    "koordinator.sh/gpu-memory-ratio": "100",
    "koordinator.sh/gpu-memory": "16Gi",
}
HALF = {
    "koordinator.sh/gpu-core": "50",
    "koordinator.sh/gpu-memory-ratio": "50",
    "koordinator.sh/gpu-memory": "8Gi",
}


def test_visible_devices_in_annotation_order() -> None:
    spec = container_gpu_spec(_pod(_gpus((1, WHOLE), (0, WHOLE))))
    assert spec is not None
    assert dict(spec.env) == {"NVIDIA_VISIBLE_DEVICES": "1,0"}
    assert spec.mounts == ()


def test_no_gpu_allocation() -> None:
    assert container_gpu_spec(_pod()) is None
    assert (
        container_gpu_spec(_pod({"rdma": [{"minor": 0, "resources": {"koordinator.sh/rdma": "100"}}]}))
        is None
    )
    assert container_gpu_spec(_pod({"gpu": []})) is None
    assert gpu_allocation(_pod("")) == ()


def test_bad_annotation_names_it() -> None:
    with pytest.raises(DeviceError, match="device-allocated: invalid JSON"):
        gpu_allocation(_pod("{not json"))
    with pytest.raises(DeviceError, match=r"gpu\[0\]\.minor='one'"):
        gpu_allocation(_pod({"gpu": [{"minor": "one", "resources": {}}]}))


def test_hami_core_shared_card() -> None:
    spec = container_gpu_spec(_pod(_gpus((2, HALF)), {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}))
    assert spec is not None
    assert dict(spec.env) == {
        "NVIDIA_VISIBLE_DEVICES": "2",
        "CUDA_DEVICE_MEMORY_LIMIT": str(8 * 1024**3),  # 8Gi in bytes
        "CUDA_DEVICE_SM_LIMIT": "50",
        "LD_PRELOAD": "/usr/local/vgpu/libvgpu.so",
    }
    assert spec.mounts == (
        Mount("/usr/local/vgpu/libvgpu.so", "/usr/local/vgpu/libvgpu.so"),
        Mount("/tmp/vgpulock", "/tmp/vgpulock"),
    )


def test_hami_core_whole_card_and_errors() -> None:
    hami = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
    whole = container_gpu_spec(_pod(_gpus((0, WHOLE)), hami))
    assert whole is not None and dict(whole.env) == {"NVIDIA_VISIBLE_DEVICES": "0"}
    no_core = container_gpu_spec(
        _pod(_gpus((0, {"koordinator.sh/gpu-memory-ratio": "25", "koordinator.sh/gpu-memory": "4Gi"})), hami)
    )
    assert no_core is not None and "CUDA_DEVICE_SM_LIMIT" not in no_core.env
    with pytest.raises(GPUHookError, match="gpu memory ratio not found in gpu resource"):
        container_gpu_spec(_pod(_gpus((0, {"koordinator.sh/gpu-core": "50"})), hami))
    with pytest.raises(GPUHookError, match="gpu memory not found in gpu resource"):
        container_gpu_spec(_pod(_gpus((0, {"koordinator.sh/gpu-memory-ratio": "50"})), hami))


def test_device_cgroup_rules() -> None:
    devices = gpu_allocation(_pod(_gpus((3, WHOLE), (1, WHOLE))))
    rules = device_cgroup_rules(devices, uvm_major=510)
    assert rules is not None
    assert [r.text() for r in rules.allow] == [
        "c 195:1 rw",
        "c 195:3 rw",
        "c 195:255 rw",  # /dev/nvidiactl
        "c 510:0 rw",  # /dev/nvidia-uvm
        "c 510:1 rw",  # /dev/nvidia-uvm-tools
    ]
    assert rules.keep == frozenset({254})  # /dev/nvidia-modeset left as it is
    without_uvm = device_cgroup_rules(devices, uvm_major=None)
    assert without_uvm is not None and [r.minor for r in without_uvm.allow] == [1, 3, 255]
    assert device_cgroup_rules((), 510) is None
    assert DeviceRule("c", 195, None, "rw").text() == "c 195:* rw"
