"""What one GPU must give a pod (docs/rules/scheduler-deviceshare.md#per-gpu): the number of cards a
normalised GPU request spreads over, the per-card request (integer division) and whether the card is
shared with other pods.
Imports: the standard library, apis.device.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from apis.device import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, NPU_CORE, NPU_CPU, NPU_DVPP


@dataclass(frozen=True, slots=True)
class GPURequirements:
    requests_per_gpu: Mapping[str, int]
    number_of_gpus: int
    gpu_shared: bool


def gpu_requirements(request: Mapping[str, int]) -> GPURequirements:
    """From a normalised GPU request (docs/rules/scheduler-deviceshare.md#per-gpu)."""
    count = 1
    shared_over = request.get(GPU_SHARED, 0)
    ratio = request.get(GPU_MEMORY_RATIO)
    if shared_over > 0:
        count = shared_over
    elif ratio is not None and ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    per: dict[str, int] = {}
    for name in (GPU_CORE, NPU_CORE, NPU_CPU, NPU_DVPP):
        if name in request:
            per[name] = request[name] // count
    shared = False
    if ratio is not None:
        per[GPU_MEMORY_RATIO] = ratio // count
        shared = per[GPU_MEMORY_RATIO] < 100
    elif GPU_MEMORY in request:
        per[GPU_MEMORY] = request[GPU_MEMORY] // count
        shared = True  # a memory-only request never holds a whole card
    return GPURequirements(per, count, shared)
