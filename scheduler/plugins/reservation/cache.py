"""``ReservationCache``: the scheduler's reservations by node with their owner pods, fed by the
Reservation and pod informers' events (docs/rules/scheduler-reservation.md#reservationinfo). A pod is an
owner of the reservation whose UID its ``reservation-allocated`` annotation carries (or the one Reserve
assumed for it); owners seen before their reservation are kept until it arrives.
Imports: the standard library, apis (pod, reservation), this package (controller, info).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

from apis.pod import is_terminated, pod_key
from apis.reservation import Reservation, parse_reservation
from scheduler.plugins.reservation.controller import allocated_uid
from scheduler.plugins.reservation.info import ReservationInfo


class ReservationCache:
    """Reservations by UID and by ``status.nodeName``; owners by reservation UID. Thread-safe: events
    arrive on informer threads while the scheduling thread reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._infos: dict[str, ReservationInfo] = {}
        self._by_name: dict[str, str] = {}
        self._by_node: dict[str, dict[str, ReservationInfo]] = {}
        self._owners: dict[str, dict[str, Mapping[str, Any]]] = {}  # reservation uid -> pod key -> pod
        self._owner_of: dict[str, str] = {}  # pod key -> reservation uid

    # --- reservations ---------------------------------------------------------------------------
    def on_reservation_add(self, obj: Mapping[str, Any]) -> None:
        try:
            r = parse_reservation(obj)
        except ValueError:
            return  # the API server validated it: only a malformed test object gets here
        self.put(r)

    def on_reservation_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_reservation_add(new)

    def on_reservation_delete(self, obj: Mapping[str, Any]) -> None:
        uid = ((obj.get("metadata") or {}).get("uid")) if isinstance(obj, Mapping) else None
        if isinstance(uid, str):
            with self._lock:
                self._drop(uid)

    def put(self, r: Reservation) -> None:
        info = ReservationInfo.of(r)
        with self._lock:
            self._drop(r.uid)
            for pod in self._owners.get(r.uid, {}).values():
                info.add_pod(pod)
            self._infos[r.uid] = info
            self._by_name[r.name] = r.uid
            if r.node_name:
                self._by_node.setdefault(r.node_name, {})[r.uid] = info

    def _drop(self, uid: str) -> None:
        info = self._infos.pop(uid, None)
        if info is None:
            return
        if self._by_name.get(info.name) == uid:
            del self._by_name[info.name]
        on_node = self._by_node.get(info.reservation.node_name)
        if on_node is not None:
            on_node.pop(uid, None)
            if not on_node:
                del self._by_node[info.reservation.node_name]

    # --- owners ---------------------------------------------------------------------------------
    def on_pod_add(self, pod: Mapping[str, Any]) -> None:
        uid = allocated_uid(pod)
        if uid is not None and not is_terminated(pod):
            self.assign(pod, uid)
        else:
            self.unassign(pod)

    def on_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_pod_add(new)

    def on_pod_delete(self, pod: Mapping[str, Any]) -> None:
        self.unassign(pod)

    def assign(self, pod: Mapping[str, Any], uid: str) -> None:
        key = pod_key(pod)
        with self._lock:
            if self._owner_of.get(key) == uid:
                return
            self._unassign(key)
            self._owners.setdefault(uid, {})[key] = pod
            self._owner_of[key] = uid
            info = self._infos.get(uid)
            if info is not None:
                info.add_pod(pod)

    def unassign(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            self._unassign(pod_key(pod))

    def _unassign(self, key: str) -> None:
        uid = self._owner_of.pop(key, None)
        if uid is None:
            return
        pod = self._owners[uid].pop(key)
        if not self._owners[uid]:
            del self._owners[uid]
        info = self._infos.get(uid)
        if info is not None:
            info.remove_pod(pod)

    # --- reads ----------------------------------------------------------------------------------
    def get(self, uid: str) -> ReservationInfo | None:
        with self._lock:
            return self._infos.get(uid)

    def get_by_name(self, name: str) -> ReservationInfo | None:
        with self._lock:
            uid = self._by_name.get(name)
            return self._infos.get(uid) if uid is not None else None

    def nodes(self) -> list[str]:
        with self._lock:
            return list(self._by_node)

    def on_node(self, node: str) -> list[ReservationInfo]:
        """Every reservation placed on ``node`` (matchable or not), in name order."""
        with self._lock:
            return sorted(self._by_node.get(node, {}).values(), key=lambda i: i.name)

    def matchable_on_node(self, node: str) -> list[ReservationInfo]:
        return [i for i in self.on_node(node) if i.matchable]

    def __iter__(self) -> Iterator[ReservationInfo]:
        with self._lock:
            return iter(list(self._infos.values()))
