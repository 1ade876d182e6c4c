"""What a pod's GPU allocation means for its containers (docs/rules/koordlet-gpu.md#container), from the
``scheduling.koordinator.sh/device-allocated`` annotation the scheduler wrote:

* the environment upstream's runtime hook (``gpu env inject``, PreCreateContainer) adds to every container:
  ``NVIDIA_VISIBLE_DEVICES`` = the allocated minors in allocation order joined by ``,``, and for pods
  labelled ``koordinator.sh/gpu-isolation-provider: HAMi-core`` with a shared card (memory ratio < 100) the
  HAMi-core limits, ``LD_PRELOAD`` and its two bind mounts. koord has no runtime hook (containerd 1.6: no
  NRI), so this is data for docs, simulation and a future hook; nothing applies it;
* the device-cgroup rules koord can enforce on cgroup v1 (agent.qosmanager.gpudevices applies them): the
  allocated ``/dev/nvidia<minor>`` (char 195:minor), ``/dev/nvidiactl`` (195:255) and, when its major is
  known, ``/dev/nvidia-uvm`` and ``/dev/nvidia-uvm-tools`` (minors 0 and 1) readable and writable; every
  other NVIDIA card (195:*) not, ``/dev/nvidia-modeset`` (195:254) left as it is.

Pure. Imports: standard library, apis.{device,pod}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.device import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    DeviceAllocationEntry,
    DeviceError,
    parse_device_allocations,
)
from apis.pod import pod_annotations, pod_labels

__all__ = [
    "GPU_ALLOC_ENV",
    "HAMI_CORE_LIBRARY",
    "NVIDIA_MAJOR",
    "DeviceCgroupRules",
    "DeviceRule",
    "GPUContainerSpec",
    "GPUHookError",
    "Mount",
    "container_gpu_spec",
    "device_cgroup_rules",
    "gpu_allocation",
]

GPU_ALLOC_ENV: Final = "NVIDIA_VISIBLE_DEVICES"
LABEL_GPU_ISOLATION_PROVIDER: Final = "koordinator.sh/gpu-isolation-provider"
HAMI_CORE: Final = "HAMi-core"
HAMI_CORE_LIBRARY: Final = "/usr/local/vgpu/libvgpu.so"
"""Upstream's ``--hami-core-library-directory-path`` default."""
HAMI_LOCK_DIR: Final = "/tmp/vgpulock"
NVIDIA_MAJOR: Final = 195
NVIDIACTL_MINOR: Final = 255
NVIDIA_MODESET_MINOR: Final = 254
UVM_MINORS: Final = (0, 1)  # nvidia-uvm, nvidia-uvm-tools


class GPUHookError(ValueError):
    """The allocation cannot be turned into container settings (upstream's hook fails the container)."""


@dataclass(frozen=True, slots=True)
class Mount:
    destination: str
    source: str
    type: str = "bind"
    options: tuple[str, ...] = ("rbind",)


@dataclass(frozen=True, slots=True)
class GPUContainerSpec:
    env: Mapping[str, str]
    mounts: tuple[Mount, ...] = ()


def gpu_allocation(pod: Mapping[str, Any]) -> tuple[DeviceAllocationEntry, ...]:
    """The pod's GPU entries in annotation order (``()``: no GPU allocated). A malformed annotation
    raises ``DeviceError`` naming the annotation and the bad part."""
    raw = pod_annotations(pod).get(ANNOTATION_DEVICE_ALLOCATED)
    if raw is None:
        return ()
    if not isinstance(raw, str):
        raise DeviceError(f"{ANNOTATION_DEVICE_ALLOCATED}={raw!r}: expected a JSON string")
    return tuple(parse_device_allocations(raw).get(GPU) or ())


def container_gpu_spec(
    pod: Mapping[str, Any], hami_library: str = HAMI_CORE_LIBRARY
) -> GPUContainerSpec | None:
    """Upstream's ``InjectContainerGPUEnv`` for any container of ``pod``; None without a GPU allocation.
    Raises ``DeviceError`` (bad annotation) or ``GPUHookError`` (HAMi-core without the needed resources)."""
    devices = gpu_allocation(pod)
    if not devices:
        return None
    env = {GPU_ALLOC_ENV: ",".join(str(d.minor) for d in devices)}
    mounts: tuple[Mount, ...] = ()
    if pod_labels(pod).get(LABEL_GPU_ISOLATION_PROVIDER) == HAMI_CORE:
        first = devices[0].resources
        ratio = first.get(GPU_MEMORY_RATIO)
        if ratio is None:
            raise GPUHookError("gpu memory ratio not found in gpu resource")
        if ratio < 100:
            memory = first.get(GPU_MEMORY)
            if memory is None:
                raise GPUHookError("gpu memory not found in gpu resource")
            env["CUDA_DEVICE_MEMORY_LIMIT"] = str(memory)
            if GPU_CORE in first:
                env["CUDA_DEVICE_SM_LIMIT"] = str(first[GPU_CORE])
            env["LD_PRELOAD"] = hami_library
            mounts = (Mount(hami_library, hami_library), Mount(HAMI_LOCK_DIR, HAMI_LOCK_DIR))
    return GPUContainerSpec(env, mounts)


# --- device cgroup rules --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, order=True)
class DeviceRule:
    """One devices-cgroup line: ``<kind> <major|*>:<minor|*> <access>`` (None = ``*``)."""

    kind: str
    major: int | None
    minor: int | None
    access: str

    def text(self) -> str:
        major = "*" if self.major is None else str(self.major)
        minor = "*" if self.minor is None else str(self.minor)
        return f"{self.kind} {major}:{minor} {self.access}"


@dataclass(frozen=True, slots=True)
class DeviceCgroupRules:
    """The wanted device access of a container with GPUs: ``allow`` readable and writable; every other
    char device of major ``NVIDIA_MAJOR`` not, except the minors in ``keep`` (left as they are)."""

    allow: tuple[DeviceRule, ...]
    keep: frozenset[int] = field(default_factory=frozenset)

    def allowed(self, major: int, minor: int) -> bool:
        return any(r.major == major and r.minor == minor for r in self.allow)


def device_cgroup_rules(
    devices: tuple[DeviceAllocationEntry, ...], uvm_major: int | None
) -> DeviceCgroupRules | None:
    """The rules for a container of a pod allocated ``devices`` (None: no GPU, nothing to enforce)."""
    if not devices:
        return None
    minors = sorted({d.minor for d in devices} | {NVIDIACTL_MINOR})
    allow = [DeviceRule("c", NVIDIA_MAJOR, m, "rw") for m in minors]
    if uvm_major is not None:
        allow += [DeviceRule("c", uvm_major, m, "rw") for m in UVM_MINORS]
    return DeviceCgroupRules(tuple(allow), frozenset({NVIDIA_MODESET_MINOR}))
