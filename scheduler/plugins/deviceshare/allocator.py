"""The device allocator (docs/rules/scheduler-deviceshare.md#allocation), pure: a node's device totals,
what its pods use, the pod's normalised requests per device type, optional preemptible allocations and
an optional scoring strategy in; the chosen devices (GPU entries completed with memory and ratio) or the
rejecting status out. Filter calls it without a strategy (every device scores 0), Reserve with one.
Imports: the standard library, apis.device, scheduler.framework.status, this package (requirements,
scoring).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from apis.device import (
    DEVICE_TYPES,
    GPU,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    KOORD_FPGA,
    KOORD_RDMA,
    DeviceAllocationEntry,
    DeviceInfo,
)
from scheduler.framework.status import Status
from scheduler.plugins.deviceshare.requirements import gpu_requirements
from scheduler.plugins.deviceshare.scoring import ScoringStrategy, score_device

Values = Mapping[str, int]
# per device type, per minor: resource values
TypeMinors = Mapping[str, Mapping[int, Values]]
PERCENT_NAME: Final = {"rdma": KOORD_RDMA, "fpga": KOORD_FPGA}


def device_totals(devices: Iterable[DeviceInfo]) -> dict[str, dict[int, dict[str, int]]]:
    """Per type and minor, the device's capacity: its resources when healthy, nothing otherwise
    (docs/rules/scheduler-deviceshare.md#device-crd). A device without a minor is minor 0; a later
    device with the same type and minor replaces an earlier one."""
    out: dict[str, dict[int, dict[str, int]]] = {}
    for d in devices:
        res = {n: q.value() for n, q in (d.resources or {}).items()} if d.health else {}
        out.setdefault(d.type or "", {})[d.minor or 0] = res
    return out


def add_values(into: dict[str, int], other: Values) -> None:
    for n, v in other.items():
        into[n] = into.get(n, 0) + v


def subtract_clipped(a: Values, b: Values) -> dict[str, int]:
    """``a − b`` per resource, never below 0, over the names of both (quota's
    SubtractWithNonNegativeResult)."""
    out = {n: max(v - b.get(n, 0), 0) for n, v in a.items()}
    for n in b:
        out.setdefault(n, 0)
    return out


def is_zero(values: Values) -> bool:
    return all(v == 0 for v in values.values())


def free_devices(
    total: Mapping[int, Values], used: Mapping[int, Values], preemptible: Mapping[int, Values] | None = None
) -> dict[int, dict[str, int]]:
    """Free resources per minor of one type; with preemptible allocations, a preemptible minor offers
    what remains once they are given back (docs/rules/scheduler-deviceshare.md#allocation)."""
    free = {m: subtract_clipped(total.get(m, {}), used.get(m, {})) for m in {*total, *used}}
    if not preemptible:
        return free
    merged: dict[int, dict[str, int]] = {}
    for minor, give_back in preemptible.items():
        remaining = subtract_clipped(total.get(minor, {}), subtract_clipped(used.get(minor, {}), give_back))
        if not is_zero(remaining):
            merged[minor] = remaining
    if not merged:  # only when something can be taken back are the other minors merged in
        return free
    for minor, values in free.items():
        merged.setdefault(minor, values)
    return merged


def instance_request(dtype: str, request: Values) -> tuple[dict[str, int], int]:
    """The per-device request and the number of devices wanted (docs/rules/scheduler-deviceshare.md#per-gpu
    for GPUs; rdma/fpga above 100 in whole devices)."""
    if dtype == GPU:
        req = gpu_requirements(request)
        return dict(req.requests_per_gpu), max(req.number_of_gpus, 1)
    name = PERCENT_NAME.get(dtype, "")
    value = request.get(name, 0)
    if value > 100 and value % 100 == 0:
        return {name: 100}, value // 100
    return dict(request), 1


@dataclass(frozen=True, slots=True)
class Outcome:
    """The allocations per type in selection order, or None with the rejecting status."""

    allocations: dict[str, list[DeviceAllocationEntry]] | None
    status: Status

    @property
    def reason(self) -> str | None:
        return None if self.status.is_success() else self.status.message()


def _fits(request: Values, free: Values) -> bool:
    return all(v <= free.get(n, 0) for n, v in request.items())


def fill_gpu_total_memory(resources: Values, total: Values) -> dict[str, int]:
    """A GPU allocation completed with the card's memory: ratio → bytes, bytes → ratio (truncated)."""
    out = dict(resources)
    if GPU_MEMORY in out and GPU_MEMORY_RATIO in out:
        return out
    total_memory = total.get(GPU_MEMORY, 0)
    if GPU_MEMORY in out:
        # upstream converts through float64; a card without memory gets 0 (Go's result is undefined)
        out[GPU_MEMORY_RATIO] = int(out[GPU_MEMORY] / total_memory * 100) if total_memory else 0
    else:
        out[GPU_MEMORY] = out.get(GPU_MEMORY_RATIO, 0) * total_memory // 100
    return out


def allocate(
    totals: TypeMinors,
    used: TypeMinors,
    requests: Mapping[str, Values],
    preemptible: TypeMinors | None = None,
    strategy: ScoringStrategy | None = None,
) -> Outcome:
    """Devices for every requested type (docs/rules/scheduler-deviceshare.md#allocation)."""
    wanted: list[tuple[str, dict[str, int], int]] = []
    for dtype in _ordered(requests):
        if is_zero(requests[dtype]):
            continue
        if not totals.get(dtype):
            return Outcome(None, Status.unresolvable(f"Insufficient {dtype} devices"))
        per, count = instance_request(dtype, requests[dtype])
        wanted.append((dtype, per, count))
    result: dict[str, list[DeviceAllocationEntry]] = {}
    for dtype, per, count in wanted:
        total = totals[dtype]
        free = free_devices(total, used.get(dtype, {}), (preemptible or {}).get(dtype))
        scored = sorted(
            (
                (score_device(strategy, per, total.get(m, {}), f) if strategy else 0, m)
                for m, f in free.items()
            ),
            key=lambda sm: (-sm[0], sm[1]),
        )
        chosen: list[DeviceAllocationEntry] = []
        for _, minor in scored:
            f = free[minor]
            if is_zero(f) or not _fits(per, f):  # an unhealthy device has nothing free
                continue
            res = fill_gpu_total_memory(per, total.get(minor, {})) if dtype == GPU else dict(per)
            chosen.append(DeviceAllocationEntry(minor, res))
            if len(chosen) == count:
                break
        if len(chosen) < count:
            return Outcome(None, Status.unschedulable(f"Insufficient {dtype} devices"))
        result[dtype] = chosen
    return Outcome(result, Status.success())


def _ordered(requests: Mapping[str, Values]) -> list[str]:
    """gpu, rdma, fpga (upstream walks a map: one fixed order here); other types have no handler and
    are ignored, as upstream's."""
    return [t for t in DEVICE_TYPES if t in requests]
