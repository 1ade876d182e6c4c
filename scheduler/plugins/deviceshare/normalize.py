"""Normalising a pod's device request (docs/rules/scheduler-deviceshare.md#normalise): the pod's
requests split by device type, each checked against the allowed name combinations and rewritten into the
names the allocator works with (``nvidia.com/gpu: 1`` → ``gpu-core: 100, gpu-memory-ratio: 100``).
Messages are upstream's exactly.
Imports: the standard library, apis (device, quantity).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from apis.device import (
    AMD_GPU,
    DEVICE_TYPES,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    HYGON_DCU,
    KOORD_FPGA,
    KOORD_GPU,
    KOORD_RDMA,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    NVIDIA_GPU,
    RESOURCE_NAMES,
)
from apis.quantity import Quantity

ERR_EMPTY: Final = "pod request should not be empty"
# values above 100 must be whole devices (docs/rules/scheduler-deviceshare.md#normalise)
PERCENTAGE_NAMES: Final = frozenset({KOORD_GPU, KOORD_RDMA, KOORD_FPGA})
WHOLE_CARDS: Final = (NVIDIA_GPU, AMD_GPU, HYGON_DCU)

Values = Mapping[str, int]


class InvalidDeviceRequestError(ValueError):
    """A request PreFilter rejects as UnschedulableAndUnresolvable; the message is upstream's."""


def _percentage(v: int) -> bool:
    """≤ 100, or a whole number of devices."""
    return not (v > 100 and v % 100 != 0)


def _gpu_percentage(r: Values) -> bool:
    return all(_percentage(r[n]) for n in (GPU_CORE, GPU_MEMORY_RATIO) if n in r)


def _gpu_shared(r: Values) -> bool:
    shared = r[GPU_SHARED]
    # each of core and ratio splits evenly over the shared cards, at most one card's worth each
    return all(r[n] % shared == 0 and r[n] // shared <= 100 for n in (GPU_CORE, GPU_MEMORY_RATIO) if n in r)


def _npu_shared(r: Values) -> bool:
    return r[GPU_SHARED] <= 1 and r.get(NPU_DVPP, 0) <= 100


def _always(r: Values) -> bool:
    return True


# name set → its check (docs/rules/scheduler-deviceshare.md#normalise); any other set is invalid
COMBINATIONS: Final[Mapping[frozenset[str], Callable[[Values], bool]]] = {
    frozenset({NVIDIA_GPU}): _always,
    frozenset({AMD_GPU}): _always,
    frozenset({HYGON_DCU}): _always,
    frozenset({KOORD_GPU}): _always,
    frozenset({GPU_MEMORY}): _gpu_percentage,
    frozenset({GPU_MEMORY_RATIO}): _gpu_percentage,
    frozenset({GPU_CORE, GPU_MEMORY}): _gpu_percentage,
    frozenset({GPU_CORE, GPU_MEMORY_RATIO}): _gpu_percentage,
    frozenset({NPU_CORE, GPU_MEMORY_RATIO}): _gpu_percentage,
    frozenset({GPU_SHARED, GPU_MEMORY}): _gpu_shared,
    frozenset({GPU_SHARED, GPU_MEMORY_RATIO}): _gpu_shared,
    frozenset({GPU_SHARED, GPU_CORE, GPU_MEMORY}): _gpu_shared,
    frozenset({GPU_SHARED, GPU_CORE, GPU_MEMORY_RATIO}): _gpu_shared,
    frozenset({GPU_SHARED, NPU_CORE, NPU_CPU, GPU_MEMORY}): _npu_shared,
    frozenset({GPU_SHARED, NPU_CORE, NPU_CPU, NPU_DVPP, GPU_MEMORY}): _npu_shared,
    frozenset({KOORD_FPGA}): _always,
    frozenset({KOORD_RDMA}): _always,
}
KNOWN_NAMES: Final = frozenset(n for names in RESOURCE_NAMES.values() for n in names)


def normalize(requests: Mapping[str, Quantity]) -> dict[str, int]:
    """One device type's request, zero values already dropped, as the allocator's names and integer
    values; InvalidDeviceRequestError when it is not allowed. Names outside the device names take no part
    (upstream gives them no flag)."""
    if not requests:
        raise InvalidDeviceRequestError(ERR_EMPTY)
    values = {n: q.value() for n, q in requests.items()}
    for name in sorted(requests):
        if name in PERCENTAGE_NAMES and not _percentage(values[name]):
            raise InvalidDeviceRequestError(f"invalid resource unit {name}: {requests[name]}")
    present = frozenset(n for n in values if n in KNOWN_NAMES)
    check = COMBINATIONS.get(present)
    if check is None or not check(values):
        # upstream prints the names in map order; sorted here so the message is stable
        raise InvalidDeviceRequestError(f"invalid resource device requests: [{' '.join(sorted(requests))}]")
    if len(present) == 1 and next(iter(present)) in WHOLE_CARDS:
        n = values[next(iter(present))]
        return {GPU_CORE: n * 100, GPU_MEMORY_RATIO: n * 100}
    if present == {KOORD_GPU}:
        return {GPU_CORE: values[KOORD_GPU], GPU_MEMORY_RATIO: values[KOORD_GPU]}
    return {n: values[n] for n in sorted(present)}


def device_requests(pod_requests: Mapping[str, Quantity]) -> dict[str, dict[str, int]]:
    """The pod's normalised request per device type, in the order gpu, rdma, fpga (types it does not
    request are absent); the first invalid type raises InvalidDeviceRequestError."""
    out: dict[str, dict[str, int]] = {}
    for dtype in DEVICE_TYPES:
        names = RESOURCE_NAMES[dtype]
        masked = {n: q for n, q in pod_requests.items() if n in names and not q.is_zero()}
        if masked:
            out[dtype] = normalize(masked)
    return out
