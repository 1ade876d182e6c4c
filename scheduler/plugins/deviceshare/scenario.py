"""``koord simulate`` for kind ``DeviceShare``
(docs/rules/scheduler-deviceshare.md#koord-simulate-kind-deviceshare): one operation per file —
``normalize``, ``gpuRequirements``, ``scoreDevice``, ``allocate`` — each running the very functions
the plugin runs. Every resource value in a result is a JSON integer (bytes for memory).
Bad input raises ValueError naming the field and the value.
Imports: the standard library, apis (device, quantity), this package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.device import DeviceError, DeviceInfo, allocations_from_json, parse_device_spec
from apis.quantity import Quantity, QuantityError
from scheduler.plugins.deviceshare.allocator import allocate, device_totals
from scheduler.plugins.deviceshare.normalize import InvalidDeviceRequestError, normalize
from scheduler.plugins.deviceshare.requirements import gpu_requirements
from scheduler.plugins.deviceshare.scoring import parse_strategy, score_device

Scenario = Mapping[str, Any]


def _quantities(raw: object, where: str) -> dict[str, Quantity]:
    """A ResourceList: quantity strings or JSON numbers."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object of quantities, got {raw!r}")
    out: dict[str, Quantity] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = Quantity.from_json(value)
        except (QuantityError, TypeError, ValueError) as e:
            raise ValueError(f"{where}.{name}={value!r}: not a quantity ({e})") from None
    return out


def _values(raw: object, where: str) -> dict[str, int]:
    return {n: q.value() for n, q in _quantities(raw, where).items()}


def _minor(key: object, where: str) -> int:
    try:
        return int(str(key))
    except ValueError:
        raise ValueError(f"{where}: minor {key!r} is not an integer") from None


def _devices(raw: object) -> list[DeviceInfo]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"devices: expected a list, got {raw!r}")
    try:
        return parse_device_spec({"spec": {"devices": raw}}, "devices").devices or []
    except DeviceError as e:
        raise ValueError(str(e).replace("devices.spec.devices", "devices")) from None


def _op_normalize(s: Scenario) -> dict[str, Any]:
    requests = {n: q for n, q in _quantities(s.get("requests"), "requests").items() if not q.is_zero()}
    try:
        return {"valid": True, "deviceRequest": normalize(requests)}
    except InvalidDeviceRequestError:
        return {"valid": False, "deviceRequest": None}


def _op_gpu_requirements(s: Scenario) -> dict[str, Any]:
    req = gpu_requirements(_values(s.get("requests"), "requests"))
    return {"requestsPerGPU": dict(req.requests_per_gpu), "numberOfGPUs": req.number_of_gpus,
            "gpuShared": req.gpu_shared}  # fmt: skip


def _op_score_device(s: Scenario) -> dict[str, Any]:
    strategy = parse_strategy(s.get("scoringStrategy"))
    score = score_device(
        strategy,
        _values(s.get("requests"), "requests"),
        _values(s.get("total"), "total"),
        _values(s.get("free"), "free"),
    )
    return {"score": score}


def _used(raw: object) -> dict[str, dict[int, dict[str, int]]]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ValueError(f"allocatedPods: expected a list, got {raw!r}")
    used: dict[str, dict[int, dict[str, int]]] = {}
    for i, pod in enumerate(raw):
        where = f"allocatedPods[{i}]"
        if not isinstance(pod, Mapping):
            raise ValueError(f"{where}: expected an object, got {pod!r}")
        try:
            allocations = allocations_from_json(pod.get("deviceAllocations"), f"{where}.deviceAllocations")
        except DeviceError as err:
            raise ValueError(str(err)) from None
        for dtype, entries in allocations.items():
            for entry in entries:
                into = used.setdefault(dtype, {}).setdefault(entry.minor, {})
                for n, v in entry.resources.items():
                    into[n] = into.get(n, 0) + v
    return used


def _by_type(raw: object, where: str) -> dict[str, dict[str, int]]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected an object keyed by device type, got {raw!r}")
    return {str(t): _values(r, f"{where}.{t}") for t, r in raw.items()}


def _preemptible(raw: object) -> dict[str, dict[int, dict[str, int]]] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ValueError(f"preemptible: expected an object keyed by device type, got {raw!r}")
    out: dict[str, dict[int, dict[str, int]]] = {}
    for dtype, minors in raw.items():
        if not isinstance(minors, Mapping):
            raise ValueError(f"preemptible.{dtype}: expected an object keyed by minor, got {minors!r}")
        out[str(dtype)] = {
            _minor(m, f"preemptible.{dtype}"): _values(r, f"preemptible.{dtype}.{m}")
            for m, r in minors.items()
        }
    return out


def _op_allocate(s: Scenario) -> dict[str, Any]:
    strategy = None if s.get("scoringStrategy") is None else parse_strategy(s.get("scoringStrategy"))
    outcome = allocate(
        device_totals(_devices(s.get("devices"))),
        _used(s.get("allocatedPods")),
        _by_type(s.get("deviceRequests"), "deviceRequests"),
        _preemptible(s.get("preemptible")),
        strategy,
    )
    if outcome.allocations is None:
        return {"allocations": None, "reason": outcome.reason}
    return {
        "allocations": {
            t: [{"minor": e.minor, "resources": dict(e.resources)} for e in entries]
            for t, entries in outcome.allocations.items()
        },
        "reason": None,
    }


OPERATIONS: Final[dict[str, Callable[[Scenario], dict[str, Any]]]] = {
    "normalize": _op_normalize,
    "gpuRequirements": _op_gpu_requirements,
    "scoreDevice": _op_score_device,
    "allocate": _op_allocate,
}


def simulate(scenario: Scenario) -> dict[str, Any]:
    operation = scenario.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ValueError(f"operation={operation!r}: must be one of {', '.join(OPERATIONS)}")
    return OPERATIONS[operation](scenario)
