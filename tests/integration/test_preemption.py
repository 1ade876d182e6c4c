"""DefaultPreemption in koord-scheduler against the real API server: a node full of low-priority pods
(bound by the scheduler), a high-priority pod arrives → the victims are deleted with a `Preempted`
Event, the preemptor gets status.nominatedNodeName and is bound once they are gone; a
PodDisruptionBudget allowing no disruption protects its pod when another node's victims suffice.
No kubelet runs here, so the pods set terminationGracePeriodSeconds 0: a deleted pod is gone at once
instead of terminating forever."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.helpers.scheduler import RunningScheduler
from tests.integration.podhelpers import node_of, wait_for

pytestmark = pytest.mark.apiserver


@pytest.fixture()
def world(kube: Any, namespace: str) -> Iterator[dict[str, Any]]:
    """Nodes a and b (2 cpu each) labelled with a tag the pods select, PriorityClasses low (10) and
    high (1000), and a running scheduler."""
    core: Any = client.CoreV1Api(kube)
    sched_api: Any = client.SchedulingV1Api(kube)
    tag = uuid.uuid4().hex[:6]
    nodes = {k: f"pre-{k}-{tag}" for k in ("a", "b")}
    classes = {"low": (f"low-{tag}", 10), "high": (f"high-{tag}", 1000)}
    for name, value in classes.values():
        sched_api.create_priority_class({"metadata": {"name": name}, "value": value})
    for key, name in nodes.items():
        core.create_node({
            "metadata": {"name": name, "labels": {"koord-preempt": tag, "slot": key}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
        })  # fmt: skip
        core.patch_node(name, {"spec": {"taints": None}})  # no node lifecycle controller here
    run = RunningScheduler(kube)
    try:
        yield {"core": core, "nodes": nodes, "tag": tag, "classes": classes, "ns": namespace,
               "service": run.service}  # fmt: skip
    finally:
        run.close()
        for name in nodes.values():
            core.delete_node(name)
        for name, _ in classes.values():
            sched_api.delete_priority_class(name)


def _pod(w: dict[str, Any], name: str, cpu: str, prio: str, slot: str | None = None,
         labels: dict[str, str] | None = None) -> None:  # fmt: skip
    selector = {"koord-preempt": w["tag"], **({"slot": slot} if slot else {})}
    w["core"].create_namespaced_pod(w["ns"], {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"schedulerName": "koord-scheduler", "nodeSelector": selector,
                 "priorityClassName": w["classes"][prio][0], "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
    })  # fmt: skip


def _exists(core: Any, ns: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, ns)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def test_high_priority_pod_preempts_the_lowest(world: dict[str, Any]) -> None:
    core, ns, a = world["core"], world["ns"], world["nodes"]["a"]
    for k in range(4):
        _pod(world, f"low-{k}", "500m", "low", slot="a")
    assert wait_for(lambda: all(node_of(core, ns, f"low-{k}") == a for k in range(4)))
    _pod(world, "high", "1", "high", slot="a")
    assert wait_for(lambda: node_of(core, ns, "high") == a)
    gone = [k for k in range(4) if not _exists(core, ns, f"low-{k}")]
    assert len(gone) == 2  # 1 cpu freed of 2: the other two are reprieved
    assert wait_for(lambda: core.read_namespaced_pod("high", ns).status.nominated_node_name == a)
    want = f"Preempted by {ns}/high on node {a}"
    assert wait_for(lambda: sum(
        e.reason == "Preempted" and e.message == want for e in core.list_namespaced_event(ns).items
    ) == 2)  # fmt: skip


def test_a_pdb_protects_its_pod_when_another_node_suffices(kube: Any, world: dict[str, Any]) -> None:
    core, ns, nodes = world["core"], world["ns"], world["nodes"]
    _pod(world, "guarded", "2", "low", slot="a", labels={"app": "guarded"})
    _pod(world, "plain", "2", "low", slot="b")
    assert wait_for(
        lambda: node_of(core, ns, "guarded") == nodes["a"] and node_of(core, ns, "plain") == nodes["b"]
    )
    custom = client.CustomObjectsApi(kube)
    custom.create_namespaced_custom_object("policy", "v1beta1", ns, "poddisruptionbudgets", {
        "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    })  # fmt: skip
    # No disruption controller runs here: write the status it would (one healthy pod, none to spare).
    status = {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
              "observedGeneration": 1}  # fmt: skip
    custom.patch_namespaced_custom_object_status(
        "policy", "v1beta1", ns, "poddisruptionbudgets", "guard", {"status": status}
    )
    # The scheduler's informer has the budget with its status before the preemptor arrives.
    assert wait_for(lambda: any(
        (p.get("status") or {}).get("expectedPods") == 1 for p in world["service"].pdbs.list()
    ))  # fmt: skip
    _pod(world, "high", "2", "high")
    assert wait_for(lambda: node_of(core, ns, "high") == nodes["b"])
    assert _exists(core, ns, "guarded") and not _exists(core, ns, "plain")
