"""The pure rules behind DeviceShare (docs/rules/scheduler-deviceshare.md): upstream's exact messages of
request normalisation, the split of a pod's requests by device type, the device-allocated annotation
(Go's json.Marshal form, parsed back), the scoring strategy's defaults and the cache's bookkeeping."""

from __future__ import annotations

import pytest

from apis.device import (
    DeviceAllocationEntry,
    DeviceError,
    format_device_allocations,
    parse_device_allocations,
)
from apis.quantity import Quantity
from scheduler.plugins.deviceshare.allocator import fill_gpu_total_memory
from scheduler.plugins.deviceshare.cache import DeviceCache
from scheduler.plugins.deviceshare.normalize import InvalidDeviceRequestError, device_requests, normalize
from scheduler.plugins.deviceshare.scoring import (
    DEFAULT_STRATEGY,
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    parse_strategy,
)

CORE, MEM, RATIO = "koordinator.sh/gpu-core", "koordinator.sh/gpu-memory", "koordinator.sh/gpu-memory-ratio"


def q(values: dict[str, str]) -> dict[str, Quantity]:
    return {n: Quantity(v) for n, v in values.items()}


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        ({}, "pod request should not be empty"),
        ({"koordinator.sh/gpu": "150"}, "invalid resource unit koordinator.sh/gpu: 150"),
        ({"koordinator.sh/rdma": "1.55k"}, "invalid resource unit koordinator.sh/rdma: 1550"),
        ({"nvidia.com/gpu": "1", CORE: "100"},
         "invalid resource device requests: [koordinator.sh/gpu-core nvidia.com/gpu]"),
        ({CORE: "50"}, "invalid resource device requests: [koordinator.sh/gpu-core]"),
        ({"koordinator.sh/gpu.shared": "3", RATIO: "100"},
         "invalid resource device requests: [koordinator.sh/gpu-memory-ratio koordinator.sh/gpu.shared]"),
    ],
)  # fmt: skip
def test_invalid_requests_carry_upstreams_message(requests: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidDeviceRequestError) as e:
        normalize(q(requests))
    assert str(e.value) == message


def test_pod_requests_are_split_by_type_zero_dropped_and_others_ignored() -> None:
    got = device_requests(q({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1", "koordinator.sh/rdma": "0",
                             "koordinator.sh/fpga": "50"}))  # fmt: skip
    assert got == {"gpu": {CORE: 100, RATIO: 100}, "fpga": {"koordinator.sh/fpga": 50}}
    assert device_requests(q({"cpu": "2"})) == {}
    with pytest.raises(InvalidDeviceRequestError, match=r"invalid resource unit koordinator\.sh/fpga: 250"):
        device_requests(q({"nvidia.com/gpu": "1", "koordinator.sh/fpga": "250"}))


def test_annotation_is_gos_json_and_parses_back() -> None:
    allocations = {
        "rdma": [DeviceAllocationEntry(1, {"koordinator.sh/rdma": 100})],
        "gpu": [DeviceAllocationEntry(0, {RATIO: 50, MEM: 8589934592, CORE: 50}),
                DeviceAllocationEntry(1, {RATIO: 30, MEM: 5153960755, CORE: 1000}, id="GPU-1")],
    }  # fmt: skip
    text = format_device_allocations(allocations)
    assert text == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"8Gi",'
        '"koordinator.sh/gpu-memory-ratio":"50"}},{"minor":1,"resources":{"koordinator.sh/gpu-core":"1k",'
        '"koordinator.sh/gpu-memory":"5153960755","koordinator.sh/gpu-memory-ratio":"30"},"id":"GPU-1"}],'
        '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"100"}}]}'
    )
    back = parse_device_allocations(text)
    assert back["gpu"][1] == DeviceAllocationEntry(1, {CORE: 1000, MEM: 5153960755, RATIO: 30}, id="GPU-1")
    assert back["rdma"] == allocations["rdma"]
    assert parse_device_allocations("") == {} and parse_device_allocations(None) == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "invalid JSON"),
        ('{"gpu": {}}', "gpu: expected a list"),
        ('{"gpu": [{"minor": "0"}]}', r"gpu\[0\]\.minor='0'"),
        ('{"gpu": [{"minor": 0, "resources": {"x": "lots"}}]}', r"gpu\[0\]\.resources\.x='lots'"),
    ],
)
def test_a_bad_annotation_is_named(text: str, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        parse_device_allocations(text)


def test_gpu_memory_fill() -> None:
    total = {CORE: 100, MEM: 16 << 30, RATIO: 100}
    assert fill_gpu_total_memory({RATIO: 50}, total) == {RATIO: 50, MEM: 8 << 30}
    assert fill_gpu_total_memory({MEM: 5 << 30}, total) == {MEM: 5 << 30, RATIO: 31}
    assert fill_gpu_total_memory({MEM: 1, RATIO: 7}, total) == {MEM: 1, RATIO: 7}  # both: untouched
    assert fill_gpu_total_memory({MEM: 1 << 30}, {CORE: 100}) == {MEM: 1 << 30, RATIO: 0}  # no memory total


def test_scoring_strategy_defaults() -> None:
    assert parse_strategy(None) == DEFAULT_STRATEGY
    assert DEFAULT_STRATEGY.type == LEAST_ALLOCATED
    assert dict(DEFAULT_STRATEGY.weights) == {
        RATIO: 1,
        MEM: 1,
        "koordinator.sh/rdma": 1,
        "koordinator.sh/fpga": 1,
    }
    most = parse_strategy({"type": MOST_ALLOCATED, "resources": [{"name": CORE, "weight": 3}]})
    assert most.type == MOST_ALLOCATED and dict(most.weights) == {CORE: 3}


def test_cache_sums_pods_and_replaces_a_pods_entry() -> None:
    cache = DeviceCache()
    half = {"gpu": [DeviceAllocationEntry(0, {CORE: 50})]}
    cache.set_pod("a", "n1", half)
    cache.set_pod("b", "n1", half)
    assert cache.used("n1") == {"gpu": {0: {CORE: 100}}}
    cache.set_pod("a", "n1", half)  # the same pod again: replaced, not added
    assert cache.used("n1") == {"gpu": {0: {CORE: 100}}}
    cache.set_pod("a", "n2", half)  # moved
    assert cache.used("n1") == {"gpu": {0: {CORE: 50}}} and cache.used("n2") == {"gpu": {0: {CORE: 50}}}
    cache.set_pod("b", "n1", {})  # nothing allocated: no entry
    assert cache.used("n1") == {} and cache.pod("b") is None
    cache.set_device("n1", {"spec": {"devices": [{"type": "gpu", "minor": 2, "health": True,
                                                  "resources": {CORE: "100"}}]}})  # fmt: skip
    assert sorted(cache.nodes()) == ["n1", "n2"]  # n2: known from a pod's allocations only
    assert cache.totals("n1") == {"gpu": {2: {CORE: 100}}} and cache.totals("n2") == {}
    assert cache.has_device_object("n1") and not cache.has_device_object("n2")
    cache.set_device("n1", None)  # deleted: still known, its devices without capacity
    assert cache.has("n1") and not cache.has_device_object("n1") and cache.totals("n1") == {"gpu": {2: {}}}
    with pytest.raises(DeviceError, match=r"minor"):
        cache.set_device("n1", {"spec": {"devices": [{"minor": "two"}]}})
