"""The per-node device cache (docs/rules/scheduler-deviceshare.md#wiring): each node's Device spec as
totals per type and minor, and each pod's allocations on its node (from the ``device-allocated``
annotation of assigned pods, or from Reserve while the pod is assumed), keyed by pod so a pod is never
counted twice.

As upstream's, a node gets an entry the first time its Device object or a pod with allocations on it is
seen, and keeps it: a deleted Device leaves its devices known but unhealthy (no capacity), so only a
node that never had either is unknown — the one Filter lets through.
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
        self._known: set[str] = set()  # nodes with an entry (upstream's nodeDevice)
        self._objects: set[str] = set()  # nodes whose Device object exists now
        self._devices: dict[str, list[DeviceInfo]] = {}
        self._totals: dict[str, Totals] = {}
        self._pods: dict[str, tuple[str, Allocations]] = {}  # pod key -> (node, allocations)
        self._by_node: dict[str, set[str]] = {}  # node -> pod keys with allocations there

    # --- devices -----------------------------------------------------------------------------------
    def set_device(self, node: str, device: Mapping[str, Any] | None) -> None:
        """The node's Device object; None: deleted — its devices stay known with no capacity
        (upstream's invalidateNodeDevice). DeviceError when the object does not decode."""
        if device is None:
            self._objects.discard(node)
            if node in self._totals:
                self._totals[node] = {t: {m: {} for m in minors} for t, minors in self._totals[node].items()}
            return
        devices = parse_device_spec(device, f"Device {node}").devices or []
        self._devices[node] = devices
        self._totals[node] = device_totals(devices)
        self._known.add(node)
        self._objects.add(node)

    def nodes(self) -> list[str]:
        """Nodes with an entry (a Device seen, or a pod with allocations recorded there)."""
        return list(self._known)

    def has(self, node: str) -> bool:
        return node in self._known

    def has_device_object(self, node: str) -> bool:
        return node in self._objects

    def totals(self, node: str) -> Totals:
        return self._totals.get(node, {})

    def devices(self, node: str) -> list[DeviceInfo]:
        return self._devices.get(node, [])

    # --- pods --------------------------------------------------------------------------------------
    def set_pod(self, key: str, node: str, allocations: Allocations) -> None:
        """The pod's allocations on ``node``, replacing whatever was recorded for it (none: no entry)."""
        self.remove_pod(key)
        if not any(allocations.values()):
            return
        self._pods[key] = (node, allocations)
        self._by_node.setdefault(node, set()).add(key)
        self._known.add(node)

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
