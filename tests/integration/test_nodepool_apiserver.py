"""NodePool and ScarceDevice in koord-scheduler against the real API server, with real binds
(docs/rules/scheduler-nodepool.md#wiring): a private pool node and an A100 node (the scarce model) are
used only by the pods that ask for them when the plugins are Hard, and last when they are Soft. Each
test has nodes of its own (a tag the pods select: a label neither plugin reads) and its own scheduler
whose profile enables both plugins with the test's mode."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.registry import KNOWN
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

POOL, GPU = "node.koordinator.sh/pool", "node.koordinator.sh/gpu-model"


def _config(mode: str) -> Any:
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{
                "schedulerName": "koord-scheduler",
                "plugins": {"multiPoint": {"enabled": [{"name": "NodePool", "weight": 10},
                                                       {"name": "ScarceDevice", "weight": 10}]}},
                "pluginConfig": [{"name": "NodePool", "args": {"mode": mode}},
                                 {"name": "ScarceDevice", "args": {"mode": mode, "models": ["A100"]}}],
            }],
        },
        KNOWN,
    )  # fmt: skip


class World:
    """Four 4-cpu nodes: `pool` (team's private pool), `a100` (4 scarce cards), `t4` (4 common cards),
    `plain`."""

    def __init__(self, kube: Any, ns: str) -> None:
        self.core: Any = client.CoreV1Api(kube)
        self.ns, self.tag = ns, uuid.uuid4().hex[:6]
        self.team = f"team-{self.tag}"
        self.node = {role: f"np-{role}-{self.tag}" for role in ("pool", "a100", "t4", "plain")}
        labels = {"pool": {POOL: self.team}, "a100": {GPU: "A100"}, "t4": {GPU: "T4"}, "plain": {}}
        for role, name in self.node.items():
            alloc = {"cpu": "4", "memory": "64Gi", "pods": "110"}
            if role in ("a100", "t4"):
                alloc["nvidia.com/gpu"] = "4"
            self.core.create_node({
                "metadata": {"name": name, "labels": {"koord-np": self.tag, **labels[role]}},
                "status": {"allocatable": alloc, "capacity": alloc},
            })  # fmt: skip
            self.core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here

    def pod(self, name: str, *, gpu: int = 0, selector: dict[str, str] | None = None) -> str:
        requests = {"cpu": "1", "memory": "64Mi", **({"nvidia.com/gpu": str(gpu)} if gpu else {})}
        self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": name},
            "spec": {"schedulerName": "koord-scheduler", "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"koord-np": self.tag, **(selector or {})},
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": requests, "limits": requests}}]},
        })  # fmt: skip
        return name

    def placed(self) -> dict[str, str]:
        """Bound pods: pod name -> the role of its node."""
        role = {name: r for r, name in self.node.items()}
        pods = self.core.list_namespaced_pod(self.ns).items
        return {p.metadata.name: role.get(p.spec.node_name, "?") for p in pods if p.spec.node_name}

    def unschedulable_message(self, name: str) -> str:
        pod = self.core.read_namespaced_pod(name, self.ns)
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return str(c.message)
        return ""

    def close(self) -> None:
        for name in self.node.values():
            self.core.delete_node(name)


@pytest.fixture()
def run(kube: Any, namespace: str) -> Iterator[Any]:
    """`run(mode)`: the four nodes and a running koord-scheduler with both plugins in that mode."""
    stop = threading.Event()
    started: list[tuple[World, SchedulerService, threading.Thread]] = []

    def start(mode: str) -> World:
        world = World(kube, namespace)
        service = SchedulerService(kube, _config(mode), bind_workers=4)
        service.start(stop)
        thread = threading.Thread(target=service.run, args=(stop,), daemon=True)
        thread.start()
        started.append((world, service, thread))
        return world

    try:
        yield start
    finally:
        stop.set()
        for world, service, thread in started:
            thread.join(timeout=10)
            service.close()
            world.close()


def test_hard_private_and_scarce_nodes_take_only_the_pods_that_ask(run: Any) -> None:
    world = run("Hard")
    asked = {
        world.pod("team-0", selector={POOL: world.team}): "pool",
        world.pod("team-1", selector={POOL: world.team}): "pool",
        world.pod("train", gpu=1, selector={GPU: "A100"}): "a100",
        world.pod("infer", gpu=1): "t4",  # a card of any model: the common one
    }
    assert wait_for(lambda: world.placed() == asked, timeout=20), world.placed()
    outsiders = [world.pod(f"o-{i}") for i in range(7)]  # room: plain 4 + t4 3 cpus
    everyone = [*asked, *outsiders]
    assert wait_for(lambda: len(world.placed()) == len(everyone), timeout=20), world.placed()
    placed = world.placed()
    assert {name: placed[name] for name in asked} == asked
    assert sorted(placed[name] for name in outsiders) == ["plain"] * 4 + ["t4"] * 3
    # one more outsider: only the pool and A100 nodes have room, and neither takes it
    late = world.pod("late")
    wanted = (  # other tests' nodes, if any, are each "didn't match Pod's node affinity" (the tag)
        "1 node(s) belong to a private pool the pod did not ask for, "
        "1 node(s) have a scarce device model the pod did not ask for, 2 Insufficient cpu"
    )
    assert wait_for(lambda: wanted in world.unschedulable_message(late), timeout=10), (
        world.unschedulable_message(late)
    )
    assert late not in world.placed()


def test_soft_private_and_scarce_nodes_are_used_last(run: Any) -> None:
    world = run("Soft")
    infer = world.pod("infer", gpu=1)  # the common card first, though the scarce one is as free
    assert wait_for(lambda: world.placed() == {infer: "t4"}, timeout=20), world.placed()
    outsiders = [world.pod(f"o-{i}") for i in range(9)]  # plain 4 + t4 3, then 2 on the others
    assert wait_for(lambda: len(world.placed()) == 10, timeout=20), world.placed()
    placed = world.placed()
    roles = sorted(placed[name] for name in outsiders)
    assert roles.count("plain") == 4 and roles.count("t4") == 3, roles
    assert sorted(r for r in roles if r not in ("plain", "t4")) in (
        ["a100", "a100"],
        ["a100", "pool"],
        ["pool", "pool"],
    )
