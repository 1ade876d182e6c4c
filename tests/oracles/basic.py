"""Oracles for NodeName, NodePorts, NodePreferAvoidPods and ImageLocality: each rule of
docs/rules/scheduler-basic.md node by node, in plain Python over the snapshot's NodeInfos (no views,
no indexes: every call reads the Node objects and pods it needs). Decoding the preferAvoidPods
annotation is the production code's (``AvoidPods``; its unit tests pin it). `oracle_for` maps a
production plugin to its oracle.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from apis.gonum import go_div, go_int64
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Plugin, Pod
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins import imagelocality, nodename, nodeports, nodepreferavoidpods
from scheduler.plugins.nodepreferavoidpods import AvoidPods
from tests.oracles.plugins import i64


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


class NodeNameOracle:
    name = nodename.NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        wanted = _str(_map(pod.get("spec")).get("nodeName"))
        if wanted == "" or wanted == snapshot.infos[i].name:
            return Status.success()
        return Status.unresolvable("node(s) didn't match the requested hostname", plugin=self.name)


# --- NodePorts --------------------------------------------------------------------------------------
def ports_of(pod: Any) -> list[tuple[str, str, int]]:
    """Each container port as (hostIP, protocol, hostPort), unsanitised (hostPort 0 when absent)."""
    out = []
    for c in _list(_map(_map(pod).get("spec")).get("containers")):
        for p in _list(_map(c).get("ports")):
            port = _map(p).get("hostPort")
            port = port if isinstance(port, int) and not isinstance(port, bool) else 0
            out.append((_str(_map(p).get("hostIP")), _str(_map(p).get("protocol")), port))
    return out


def sanitize(ip: str, protocol: str) -> tuple[str, str]:
    return ip or "0.0.0.0", protocol or "TCP"


class HostPortInfo:
    """kube's ``HostPortInfo``: ip → set of (protocol, port)."""

    def __init__(self) -> None:
        self.by_ip: dict[str, set[tuple[str, int]]] = {}

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = sanitize(ip, protocol)
        self.by_ip.setdefault(ip, set()).add((protocol, port))

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        ip, protocol = sanitize(ip, protocol)
        if ip == "0.0.0.0":
            return any((protocol, port) in pp for pp in self.by_ip.values())
        return any((protocol, port) in self.by_ip.get(key, set()) for key in ("0.0.0.0", ip))


class NodePortsOracle:
    name = nodeports.NAME

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        used = HostPortInfo()
        for info in snapshot.infos[i].pods.values():
            for ip, protocol, port in ports_of(info.pod):
                used.add(ip, protocol, port)
        if any(used.check_conflict(*wanted) for wanted in ports_of(pod)):
            return Status.unschedulable(
                "node(s) didn't have free ports for the requested pod ports", plugin=self.name
            )
        return Status.success()


# --- NodePreferAvoidPods ----------------------------------------------------------------------------
def controller_of(pod: Pod) -> Mapping[str, Any] | None:
    for ref in _list(_map(pod.get("metadata")).get("ownerReferences")):
        if _map(ref).get("controller") is True:
            return _map(ref)
    return None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def avoid_pods(node: Mapping[str, Any]) -> AvoidPods | None:
    """The decoded annotation; None when it does not decode."""
    text = _map(_map(node.get("metadata")).get("annotations")).get(nodepreferavoidpods.ANNOTATION)
    if not isinstance(text, str) or text == "":
        return AvoidPods()
    try:
        raw = json.loads(text, parse_constant=_reject_constant)
    except ValueError:
        return None
    if raw is not None and not isinstance(raw, Mapping):
        return None
    try:
        return AvoidPods.from_dict(raw)
    except ValueError:
        return None


class NodePreferAvoidPodsOracle:
    name = nodepreferavoidpods.NAME

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        ref = controller_of(pod)
        if ref is None or ref.get("kind") not in ("ReplicationController", "ReplicaSet"):
            return 100, Status.success()
        avoids = avoid_pods(snapshot.infos[i].node)
        if avoids is None:
            return 100, Status.success()
        for entry in avoids.prefer_avoid_pods or []:
            c = entry.pod_signature.pod_controller
            if c is not None and (c.kind or "") == ref.get("kind") and (c.uid or "") == _str(ref.get("uid")):
                return 0, Status.success()
        return 100, Status.success()


# --- ImageLocality ----------------------------------------------------------------------------------
def image_states(node: Mapping[str, Any]) -> dict[str, int]:
    """name → size, the first image of ``status.images`` listing the name deciding."""
    out: dict[str, int] = {}
    for image in _list(_map(node.get("status")).get("images")):
        size = _map(image).get("sizeBytes")
        size = (
            size if isinstance(size, int) and not isinstance(size, bool) and -(2**63) <= size < 2**63 else 0
        )
        for name in _list(_map(image).get("names")):
            if isinstance(name, str):
                out.setdefault(name, size)
    return out


def normalized(name: str) -> str:
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


class ImageLocalityOracle:
    name = imagelocality.NAME

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        containers = _list(_map(pod.get("spec")).get("containers"))
        total_nodes = snapshot.n
        here = image_states(snapshot.infos[i].node)
        total = 0
        for c in containers:
            name = normalized(_str(_map(c).get("image")))
            if name in here:
                holders = sum(1 for info in snapshot.infos if name in image_states(info.node))
                spread = float(holders) / float(total_nodes)
                total = i64(total + go_int64(float(here[name]) * spread))
        mb = 1024 * 1024
        low, high = 23 * mb, 1000 * mb * len(containers)
        if total < low:
            total = low
        elif total > high:
            total = high
        return go_div(i64(100 * (total - low)), high - low), Status.success()


_ORACLES: dict[type, Callable[[], Plugin]] = {
    nodename.NodeName: NodeNameOracle,
    nodeports.NodePorts: NodePortsOracle,
    nodepreferavoidpods.NodePreferAvoidPods: NodePreferAvoidPodsOracle,
    imagelocality.ImageLocality: ImageLocalityOracle,
}


def oracle_for(plugin: Plugin) -> Plugin | None:
    """The oracle of a production plugin, None for a plugin without one here."""
    make = _ORACLES.get(type(plugin))
    return None if make is None else make()
