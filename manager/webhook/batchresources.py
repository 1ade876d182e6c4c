"""The resource rewrite of the ClusterColocationProfile webhook (pure): a ``koord-batch`` or
``koord-mid`` pod asks for batch/mid resources instead of ``cpu`` and ``memory``.

docs/rules/colocation-profile.md#the-resource-rewrite: the pod's priority class with default (label,
``spec.priority`` band, then QoS) decides; ``koord-batch`` → ``kubernetes.io/batch-{cpu,memory}``,
``koord-mid`` → ``kubernetes.io/mid-{cpu,memory}``, any other class leaves the pod alone. In every init
container and container, ``requests`` then ``limits``: ``cpu`` becomes the extended cpu in milli-cores
as an integer quantity (``500m`` → ``"500"``, ``1`` → ``"1k"``), ``memory`` the extended memory with
the same quantity (written in canonical form); then an extended resource with a limit but no request
gets the limit as request. ``spec.overhead`` gets the same renaming (no request step).
Imports: the standard library and apis (constants, qos, quantity).
"""

from __future__ import annotations

from typing import Any, Final

from apis import constants as c
from apis.qos import PriorityClass, priority_class_with_default
from apis.quantity import Quantity, QuantityError

__all__ = ["ResourceError", "rewrite_resources"]

_EXTENDED: Final = {
    PriorityClass.BATCH: (c.BATCH_CPU, c.BATCH_MEMORY),
    PriorityClass.MID: (c.MID_CPU, c.MID_MEMORY),
}


class ResourceError(ValueError):
    """A quantity the rewrite must read is malformed (the message names the field and value)."""


def rewrite_resources(pod: dict[str, Any]) -> bool:
    """Rewrite ``pod`` in place; True when anything was renamed or copied. Raises ResourceError."""
    try:
        priority_class = priority_class_with_default(pod)
    except QuantityError as e:
        raise ResourceError(f"the pod's resources: {e}") from None
    names = _EXTENDED.get(priority_class)
    spec = pod.get("spec")
    if names is None or not isinstance(spec, dict):
        return False
    cpu, memory = names
    mutated = False
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        for i, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            path = f"spec.{field}[{i}].resources"
            for part in ("requests", "limits"):
                resource_list = resources.get(part)
                if isinstance(resource_list, dict):
                    mutated = _rename(resource_list, c.RESOURCE_CPU, cpu, f"{path}.{part}") or mutated
                    mutated = _rename(resource_list, c.RESOURCE_MEMORY, memory, f"{path}.{part}") or mutated
            mutated = _request_from_limit(resources, cpu, path) or mutated
            mutated = _request_from_limit(resources, memory, path) or mutated
    overhead = spec.get("overhead")
    if isinstance(overhead, dict):
        mutated = _rename(overhead, c.RESOURCE_CPU, cpu, "spec.overhead") or mutated
        mutated = _rename(overhead, c.RESOURCE_MEMORY, memory, "spec.overhead") or mutated
    return mutated


def _quantity(value: Any, path: str) -> Quantity:
    try:
        return Quantity.from_json(value)
    except (QuantityError, TypeError, ValueError) as e:
        raise ResourceError(f"{path}: {e}") from None


def _rename(resource_list: dict[str, Any], native: str, extended: str, path: str) -> bool:
    """``native`` → ``extended`` (cpu as an integer number of milli-cores); False when absent."""
    if native not in resource_list:
        return False
    quantity = _quantity(resource_list.pop(native), f"{path}.{native}")
    if native == c.RESOURCE_CPU:
        quantity = Quantity.from_int(quantity.milli_value())
    resource_list[extended] = str(quantity)
    return True


def _request_from_limit(resources: dict[str, Any], name: str, path: str) -> bool:
    """A limit of ``name`` without a request becomes the request too (a missing limit stays missing)."""
    limits = resources.get("limits")
    requests = resources.get("requests")
    if not isinstance(limits, dict) or name not in limits:
        return False
    if isinstance(requests, dict) and name in requests:
        return False
    if not isinstance(requests, dict):
        requests = resources["requests"] = {}
    requests[name] = str(_quantity(limits[name], f"{path}.limits.{name}"))
    return True
