"""NodePorts filter of kube-scheduler v1.20: a pod's container ``hostPort``s must be free on the node
(docs/rules/scheduler-basic.md#nodeports).

PreFilter collects the pod's wanted ports from ``spec.containers[*].ports`` (init containers have
none that count): ``(hostIP, protocol, hostPort)`` with an empty hostIP read as ``0.0.0.0`` and an empty
protocol as ``TCP`` (``HostPortInfo.sanitize``); a hostPort ≤ 0 (or absent) never conflicts. A node's
used ports are the same triples of every pod on it. A wanted port conflicts when the node uses the
same protocol and port on the same IP, or on ``0.0.0.0``, or — when the wanted IP is ``0.0.0.0`` — on
any IP (``HostPortInfo.CheckConflict``). Any conflict rejects the node: UNSCHEDULABLE,
``node(s) didn't have free ports for the requested pod ports``.

kube keeps a node's used ports as a set updated pod by pod, so removing one of two pods that declare
the same port frees it there; koord derives the set from the pods on the node, so the port stays
used while any of them declares it.

Vectorised: a snapshot view keeps, per used ``(protocol, port)``, the rows using it and with which IPs;
a pod's check touches only the rows that use one of its ports.
Imports: standard library, numpy, apis.jsonfields, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import FilterResult, Pod
from scheduler.framework.rows import reindex_rows
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import Status

NAME: Final = "NodePorts"
ERR_REASON: Final = "node(s) didn't have free ports for the requested pod ports"
STATE_KEY: Final = "PreFilter" + NAME
DEFAULT_BIND_ALL_HOST_IP: Final = "0.0.0.0"
DEFAULT_PROTOCOL: Final = "TCP"

HostPort = tuple[str, str, int]  # (ip, protocol, port), sanitised, port > 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def container_ports(pod: Any) -> list[HostPort]:
    """The pod's sanitised host ports with port > 0, in container order (duplicates kept)."""
    out: list[HostPort] = []
    containers = as_mapping(as_mapping(pod).get("spec")).get("containers")
    if not isinstance(containers, list):
        return out
    for c in containers:
        ports = as_mapping(c).get("ports")
        if not isinstance(ports, list):
            continue
        for p in ports:
            m = as_mapping(p)
            port = m.get("hostPort")
            if isinstance(port, bool) or not isinstance(port, int) or port <= 0:
                continue
            out.append(
                (
                    _str(m.get("hostIP")) or DEFAULT_BIND_ALL_HOST_IP,
                    _str(m.get("protocol")) or DEFAULT_PROTOCOL,
                    port,
                )
            )
    return out


class UsedPorts:
    """Per row its used host ports, and per ``(protocol, port)`` the rows using it with their IPs
    (a snapshot view; the rows' pods are read)."""

    reads_pods = True

    MEMO_LIMIT = 1 << 17

    def __init__(self) -> None:
        self.rows: list[frozenset[HostPort]] = []
        self.by_port: dict[tuple[str, int], dict[int, set[str]]] = {}
        # pod key → (the pod object read, its ports): a row re-read after one bind parses one pod
        self._memo: dict[str, tuple[Any, list[HostPort]]] = {}

    def _pod_ports(self, key: str, pod: Any) -> list[HostPort]:
        hit = self._memo.get(key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        if len(self._memo) >= self.MEMO_LIMIT:  # pods long gone piled up
            self._memo.clear()
        ports = container_ports(pod)
        self._memo[key] = (pod, ports)
        return ports

    def _row_ports(self, snapshot: Snapshot, i: int) -> frozenset[HostPort]:
        found: set[HostPort] = set()
        for info in snapshot.infos[i].pods.values():
            found.update(self._pod_ports(info.key, info.pod))
        return frozenset(found)

    def _index(self, i: int, ports: Iterable[HostPort], add: bool) -> None:
        for ip, proto, port in ports:
            rows = self.by_port.setdefault((proto, port), {})
            if add:
                rows.setdefault(i, set()).add(ip)
                continue
            ips = rows.get(i)
            if ips is not None:
                ips.discard(ip)
                if not ips:
                    del rows[i]
            if not rows:
                del self.by_port[(proto, port)]

    def rebuild(self, snapshot: Snapshot) -> None:
        self.by_port, self._memo = {}, {}
        self.rows = [self._row_ports(snapshot, i) for i in range(snapshot.n)]
        for i, ports in enumerate(self.rows):
            self._index(i, ports, True)

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            new = self._row_ports(snapshot, i)
            old = self.rows[i]
            if new != old:
                self._index(i, old - new, False)
                self._index(i, new - old, True)
                self.rows[i] = new

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): the index forgets the removed
        rows and re-keys the moved ones (O(their ports)); new rows are refreshed next."""
        reindex_rows(self.rows, change, self._index, frozenset())

    def conflicting_rows(self, wanted: HostPort) -> list[int]:
        """``CheckConflict`` of one wanted port, as the rows where it conflicts."""
        ip, proto, port = wanted
        rows = self.by_port.get((proto, port))
        if not rows:
            return []
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return list(rows)
        return [i for i, ips in rows.items() if ip in ips or DEFAULT_BIND_ALL_HOST_IP in ips]


class NodePorts:
    """PreFilter + Filter plugin; see the module docstring."""

    def __init__(self) -> None:
        self._status = Status.unschedulable(ERR_REASON, plugin=NAME)

    @property
    def name(self) -> str:
        return NAME

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        state.write(STATE_KEY, tuple(dict.fromkeys(container_ports(pod))))
        return Status.success()

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult:
        wanted = state.get(STATE_KEY)
        if not isinstance(wanted, tuple):
            wanted = tuple(dict.fromkeys(container_ports(pod)))
            state.write(STATE_KEY, wanted)
        if not wanted:
            return FilterResult.all_pass(snapshot.n)
        view = snapshot.view((NAME, "used"), UsedPorts)
        rows: list[int] = []
        for w in wanted:
            rows.extend(view.conflicting_rows(w))
        if not rows:
            return FilterResult.all_pass(snapshot.n)
        failed = np.zeros(snapshot.n, np.bool_)
        failed[rows] = True
        return FilterResult.from_mask(failed, self._status)
