"""Coscheduling (gang scheduling) in koord-scheduler against the real API server, with real binds
(docs/rules/scheduler-coscheduling.md#wiring): PodGroups through the informer, pods gated by PreEnqueue,
a gang's members brought by NextPod, held at Permit and bound together or rejected together; the
bind-gang annotations reach the pods and the PodGroup status controller patches the status.
Each test has nodes of its own (a tag the pods select) sized for the case, and its own scheduler."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from apis.podgroup import (
    ANNOTATION_BIND_GANG_GROUP_ID,
    ANNOTATION_BIND_GANG_MEMBER_COUNT,
    ANNOTATION_GANG_GROUPS,
    ANNOTATION_GANG_MODE,
)
from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.registry import KNOWN
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

GROUP, VERSION, PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
LABEL = "pod-group.scheduling.sigs.k8s.io"
COSCHEDULING_POINTS = ("preEnqueue", "preFilter", "postFilter", "reserve", "permit", "preBind", "postBind")


def _config() -> Any:
    plugins = {point: {"enabled": [{"name": "Coscheduling"}]} for point in COSCHEDULING_POINTS}
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "koord-scheduler", "plugins": plugins}],
        },
        KNOWN,
    )


class World:
    def __init__(self, kube: Any, ns: str, cpus: list[int]) -> None:
        self.core: Any = client.CoreV1Api(kube)
        self.custom: Any = client.CustomObjectsApi(kube)
        self.ns, self.tag = ns, uuid.uuid4().hex[:6]
        self.nodes = [f"gang-{i}-{self.tag}" for i in range(len(cpus))]
        for name, cpu in zip(self.nodes, cpus, strict=True):
            self.core.create_node({
                "metadata": {"name": name, "labels": {"koord-gang": self.tag}},
                "status": {"allocatable": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"},
                           "capacity": {"cpu": str(cpu), "memory": "64Gi", "pods": "110"}},
            })  # fmt: skip
            self.core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here

    def pod_group(
        self, name: str, min_member: int, timeout: int = 30, groups: list[str] | None = None, mode: str = ""
    ) -> None:
        annotations = {ANNOTATION_GANG_GROUPS: json.dumps(groups)} if groups else {}
        if mode:
            annotations[ANNOTATION_GANG_MODE] = mode
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
        })  # fmt: skip

    def pods(self, gang: str, n: int, start: int = 0) -> list[str]:
        names = [f"{gang}-{i}" for i in range(start, start + n)]
        for name in names:
            self.core.create_namespaced_pod(self.ns, {
                "metadata": {"name": name, "labels": {LABEL: gang}},
                "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"koord-gang": self.tag},
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]},
            })  # fmt: skip
        return names

    def bound(self, names: list[str]) -> list[str]:
        pods = self.core.list_namespaced_pod(self.ns).items
        return sorted(p.metadata.name for p in pods if p.metadata.name in names and p.spec.node_name)

    def status(self, name: str) -> dict[str, Any]:
        obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        return dict(obj.get("status") or {})

    def close(self) -> None:
        for name in self.nodes:
            self.core.delete_node(name)


@pytest.fixture()
def run(kube: Any, namespace: str) -> Iterator[Any]:
    """`run(cpus)`: nodes with these CPUs and a running koord-scheduler with Coscheduling enabled."""
    stop = threading.Event()
    started: list[tuple[World, SchedulerService, threading.Thread]] = []

    def start(cpus: list[int]) -> tuple[World, SchedulerService]:
        world = World(kube, namespace, cpus)
        service = SchedulerService(kube, _config(), bind_workers=8)
        service.start(stop)
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        started.append((world, service, thread))
        return world, service

    try:
        yield start
    finally:
        stop.set()
        for world, service, thread in started:
            thread.join(timeout=10)
            service.close()
            world.close()


def _holds_nothing(service: SchedulerService) -> bool:
    s = service.scheduler
    with s.lock:
        return not s.waiting and not s.cache._assumed


def test_a_gang_too_big_for_the_room_binds_none_and_holds_nothing(run: Any) -> None:
    world, service = run([9])  # room for 9 one-cpu pods
    world.pod_group("big", 10, timeout=2)
    names = world.pods("big", 10)
    # the controller sees the gang complete, and a scheduling round happened (the start time is set)
    assert wait_for(lambda: world.status("big").get("phase") == "Scheduling", timeout=30), world.status("big")
    assert wait_for(lambda: _holds_nothing(service), timeout=10)
    assert world.bound(names) == []
    # past the gang's wait time nothing is held and nothing binds
    threading.Event().wait(3)
    assert _holds_nothing(service)
    assert world.bound(names) == []


def test_a_gang_with_room_binds_whole_with_its_annotations(run: Any) -> None:
    world, service = run([6, 4])
    world.pod_group("fit", 10)
    names = world.pods("fit", 10)
    assert wait_for(lambda: world.bound(names) == sorted(names), timeout=60), world.bound(names)
    for name in names:
        annotations = world.core.read_namespaced_pod(name, world.ns).metadata.annotations or {}
        assert annotations.get(ANNOTATION_BIND_GANG_GROUP_ID) == f"{world.ns}/fit"
        assert annotations.get(ANNOTATION_BIND_GANG_MEMBER_COUNT) == "10"
    assert wait_for(lambda: world.status("fit").get("phase") == "Scheduled", timeout=30), world.status("fit")
    assert world.status("fit")["scheduled"] == 10
    assert _holds_nothing(service)


def test_a_gang_group_binds_only_when_every_role_reaches_its_min(run: Any) -> None:
    world, _ = run([8])
    group = [f"{world.ns}/driver", f"{world.ns}/worker"]
    world.pod_group("driver", 2, groups=group)
    world.pod_group("worker", 3, groups=group)
    drivers = world.pods("driver", 2)
    workers = world.pods("worker", 2)  # one short of the workers' min
    threading.Event().wait(3)
    assert world.bound(drivers + workers) == []
    workers += world.pods("worker", 1, start=2)
    everyone = drivers + workers
    assert wait_for(lambda: world.bound(everyone) == sorted(everyone), timeout=60), world.bound(everyone)


def test_two_gangs_competing_for_one_room_do_not_deadlock(run: Any) -> None:
    world, service = run([10])
    world.pod_group("x", 10, timeout=5)
    world.pod_group("y", 10, timeout=5)
    xs, ys = [f"x-{i}" for i in range(10)], [f"y-{i}" for i in range(10)]
    for i in range(10):  # interleaved arrivals
        world.pods("x", 1, start=i)
        world.pods("y", 1, start=i)

    def one_complete() -> bool:
        return len(world.bound(xs)) == 10 or len(world.bound(ys)) == 10

    assert wait_for(one_complete, timeout=60), (world.bound(xs), world.bound(ys))
    assert sorted([len(world.bound(xs)), len(world.bound(ys))]) == [0, 10]
    assert wait_for(lambda: _holds_nothing(service), timeout=15)
