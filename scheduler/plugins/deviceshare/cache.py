"""The per-node device cache (docs/rules/scheduler-deviceshare.md#wiring): each node's Device spec as
totals per type and minor, and each pod's allocations on its node (from the ``device-allocated``
annotation of assigned pods, or from Reserve while the pod is assumed), keyed by pod so a pod is never
counted twice. A pod's allocations outlive its node's Device object (a re-created Device finds them).
Imports: the standard library, apis.device, this package (allocator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.device import DeviceAllocationEntry, DeviceInfo, parse_device_spec
from scheduler.plugins.deviceshare.allocator import add_values, device_totals

Totals = dict[str, dict[int, dict[str, int]]]
Allocations = Mapping[str, list[DeviceAllocationEntry]]


class DeviceCache:
    def __init__(self) -> None:
        self._devices: dict[str, list[DeviceInfo]] = {}
        self._totals: dict[str, Totals] = {}
        self._pods: dict[str, tuple[str, Allocations]] = {}  # pod key -> (node, allocations)
        self._by_node: dict[str, set[str]] = {}  # node -> pod keys with allocations there

    # --- devices -----------------------------------------------------------------------------------
    def set_device(self, node: str, device: Mapping[str, Any] | None) -> None:
        """The node's Device object (None: deleted); DeviceError when it does not decode."""
        if device is None:
            self._devices.pop(node, None)
            self._totals.pop(node, None)
            return
        devices = parse_device_spec(device, f"Device {node}").devices or []
        self._devices[node] = devices
        self._totals[node] = device_totals(devices)

    def nodes(self) -> list[str]:
        """Nodes that have a Device object."""
        return list(self._totals)

    def has(self, node: str) -> bool:
        return node in self._totals

    def totals(self, node: str) -> Totals:
        return self._totals.get(node, {})

    def devices(self, node: str) -> list[DeviceInfo]:
        return self._devices.get(node, [])

    # --- pods --------------------------------------------------------------------------------------
    def set_pod(self, key: str, node: str, allocations: Allocations) -> None:
        """The pod's allocations on ``node``, replacing whatever was recorded for it."""
        self.remove_pod(key)
        if not any(allocations.values()):
            return
        self._pods[key] = (node, allocations)
        self._by_node.setdefault(node, set()).add(key)

    def remove_pod(self, key: str) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            keys = self._by_node.get(old[0])
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_node[old[0]]

    def pod(self, key: str) -> tuple[str, Allocations] | None:
        return self._pods.get(key)

    def used(self, node: str) -> Totals:
        """Per type and minor, the sum of the node's pods' allocations."""
        out: Totals = {}
        for key in sorted(self._by_node.get(node, ())):
            for dtype, entries in self._pods[key][1].items():
                for e in entries:
                    add_values(out.setdefault(dtype, {}).setdefault(e.minor, {}), e.resources)
        return out
