"""Coscheduling's API effects (docs/rules/scheduler-coscheduling.md#wiring) against recording fakes: the
status controller patches a changed status once per change, not at all while not leading, and again
after a failed patch; informer events reach the plugin and queue the PodGroup; the binder patches the
bind-gang annotations before the bind and nothing for other pods."""

from __future__ import annotations

import datetime as _dt
import threading
from typing import Any

from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.podgroupcontroller import GangEvents, PodGroupStatusController

NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)


class Custom:
    def __init__(self, fail: int = 0) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.fail = fail

    def patch_namespaced_custom_object_status(
        self, group: str, version: str, ns: str, plural: str, name: str, body: dict[str, Any]
    ) -> None:
        assert (group, version, plural) == ("scheduling.sigs.k8s.io", "v1alpha1", "podgroups")
        if self.fail:
            self.fail -= 1
            raise RuntimeError("409 Conflict")
        self.patches.append((ns, name, body))


def _pg(status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "g", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": 2},
        "status": status or {},
    }


def _pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": name,
            "labels": {"pod-group.scheduling.sigs.k8s.io": "g"},
        },
        "spec": {},
    }


def _world(
    leading: bool = True, fail: int = 0
) -> tuple[Coscheduling, PodGroupStatusController, GangEvents, Custom]:
    plugin = Coscheduling()
    lock = threading.RLock()
    controller = PodGroupStatusController(
        None, plugin, lock, lambda: leading, clock=lambda: NOW, retry_seconds=0.01
    )
    custom = Custom(fail)
    controller.custom = custom
    return plugin, controller, GangEvents([plugin], lock, controller), custom


def test_a_new_pod_group_is_patched_pending_then_requeued_by_its_pods() -> None:
    plugin, controller, events, custom = _world()
    events.pod_group_add(_pg())
    assert plugin.cache.get("ns/g") is not None and plugin.cache.get("ns/g").has_init  # type: ignore[union-attr]
    assert controller._queued == {"ns/g"}
    assert controller.sync("ns/g")
    pending = {
        "phase": "Pending",
        "occupiedBy": "",
        "scheduled": 0,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
    }
    assert custom.patches == [("ns", "g", {"status": pending})]
    # the patch's update event, then pods: the status moves on to PreScheduling
    events.pod_group_update(_pg(), _pg({"phase": "Pending"}))
    events.pod_add(_pod("a"))
    events.pod_add(_pod("b"))
    assert sorted(plugin.cache.get("ns/g").children) == ["ns/a", "ns/b"]  # type: ignore[union-attr]
    assert controller.sync("ns/g")
    assert custom.patches[-1][2]["status"]["phase"] == "PreScheduling"
    # an unchanged status is not patched
    events.pod_group_update(_pg({"phase": "Pending"}), _pg({"phase": "PreScheduling"}))
    n = len(custom.patches)
    events.pod_group_update(_pg(), _pg({"phase": "Finished"}))  # finished groups are not even queued
    controller._queued.clear()
    events.pod_group_update(_pg(), _pg({"phase": "Finished"}))
    assert controller._queued == set() and len(custom.patches) == n
    events.pod_group_delete(_pg())
    assert plugin.cache.get("ns/g") is None and "ns/g" not in controller.groups


def test_workers_patch_only_while_leading_and_retry_a_failed_patch() -> None:
    _, controller, events, custom = _world(leading=False)
    stop = threading.Event()
    worker = threading.Thread(target=controller.run, args=(stop,))
    worker.start()
    try:
        events.pod_group_add(_pg())
        stop.wait(0.2)
        assert custom.patches == []  # not the leader: kept, not synced
        controller.active = lambda: True
        custom.fail = 2  # two conflicts, then it goes through
        deadline = threading.Event()
        for _ in range(100):
            if custom.patches:
                break
            deadline.wait(0.05)
        assert [p[2]["status"]["phase"] for p in custom.patches] == ["Pending"]
    finally:
        stop.set()
        worker.join(timeout=5)
    assert not worker.is_alive()
