"""Informer handlers for the node-topology objects the koordlet reports: NodeResourceTopology
(topology.node.k8s.io/v1alpha1) for the plugins that follow topologies (NodeNUMAResource) and Device
(scheduling.koordinator.sh/v1alpha1) for the plugins that follow devices (DeviceShare)
(docs/rules/scheduler-nodenumaresource.md#wiring, docs/rules/scheduler-deviceshare.md#wiring).

Each object is named after its node. Every change reaches the plugins under the scheduler's lock and then
becomes a ClusterEvent, so pods a plugin turned away for want of a topology or a device are tried again.
A scheduler whose profiles have no such plugin watches neither kind.
Imports: the standard library, scheduler.framework.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Final

from scheduler.framework.interfaces import ClusterEvent, DeviceEventHandler, Plugin, TopologyEventHandler

log = logging.getLogger(__name__)

NRT_GROUP: Final = "topology.node.k8s.io"
NRT_VERSION: Final = "v1alpha1"
NRT_PLURAL: Final = "noderesourcetopologies"
NRT_EVENT: Final = "NodeResourceTopology"
DEVICE_GROUP: Final = "scheduling.koordinator.sh"
DEVICE_VERSION: Final = "v1alpha1"
DEVICE_PLURAL: Final = "devices"
DEVICE_EVENT: Final = "Device"


def _name(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


class TopologyEvents:
    """Feeds NodeResourceTopology and Device objects to the plugins that follow them."""

    def __init__(
        self,
        plugins: Iterable[Plugin],
        lock: AbstractContextManager[Any],
        on_event: Callable[[ClusterEvent], None],
    ) -> None:
        plugins = list(plugins)
        self.topology_plugins = [p for p in plugins if isinstance(p, TopologyEventHandler)]
        self.device_plugins = [p for p in plugins if isinstance(p, DeviceEventHandler)]
        self.lock, self.on_event = lock, on_event

    @property
    def wanted(self) -> bool:
        return bool(self.topology_plugins or self.device_plugins)

    def _topology(self, obj: Any, gone: bool, action: str) -> None:
        name = _name(obj)
        if name is None:
            log.warning("NodeResourceTopology without a name ignored")
            return
        with self.lock:
            for p in self.topology_plugins:
                p.on_topology(name, None if gone else obj)
        self.on_event(ClusterEvent(NRT_EVENT, action))

    def _device(self, obj: Any, gone: bool, action: str) -> None:
        name = _name(obj)
        if name is None:
            log.warning("Device without a name ignored")
            return
        with self.lock:
            for p in self.device_plugins:
                p.on_device(name, None if gone else obj)
        self.on_event(ClusterEvent(DEVICE_EVENT, action))

    def nrt_add(self, obj: Any) -> None:
        self._topology(obj, False, "Add")

    def nrt_update(self, old: Any, new: Any) -> None:
        self._topology(new, False, "Update")

    def nrt_delete(self, obj: Any) -> None:
        self._topology(obj, True, "Delete")

    def device_add(self, obj: Any) -> None:
        self._device(obj, False, "Add")

    def device_update(self, old: Any, new: Any) -> None:
        self._device(new, False, "Update")

    def device_delete(self, obj: Any) -> None:
        self._device(obj, True, "Delete")
