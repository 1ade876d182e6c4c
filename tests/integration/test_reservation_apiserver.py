"""Reservation in koord-scheduler against the real API server (docs/rules/scheduler-reservation.md#wiring):
a Reservation's reserve pod is scheduled and its bind makes the Reservation Available on the node; only
its owners use the reserved room (an owner binds there with the reservation-allocated annotation while a
non-owner of the same size waits, and a pod naming the reservation without owning it gets the spec's
reason); allocate-once makes it Succeeded after the first owner and its room is free again; a short ttl
expires it (Failed, Ready False Expired) and frees its room; a reservation no node can hold gets its
Scheduled condition False/Unschedulable with the FitError. Each test has a node of its own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from apis.reservation import ANNOTATION_RESERVATION_AFFINITY, ANNOTATION_RESERVATION_ALLOCATED, GROUP
from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.registry import KNOWN
from tests.helpers.scheduler import running_scheduler
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

VERSION, PLURAL = "v1alpha1", "reservations"
POINTS = ("preFilter", "filter", "preScore", "score", "reserve", "preBind", "bind")
ERR_AFFINITY = "node(s) no reservations match reservation affinity"


def _config() -> Any:
    plugins: dict[str, Any] = {point: {"enabled": [{"name": "Reservation"}]} for point in POINTS}
    plugins["score"] = {"enabled": [{"name": "Reservation", "weight": 5000}]}
    # as the chart: Reservation first, so a reserve pod never preempts
    plugins["postFilter"] = {
        "disabled": [{"name": "*"}],
        "enabled": [{"name": "Reservation"}, {"name": "DefaultPreemption"}],
    }
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "koord-scheduler", "plugins": plugins}],
        },
        KNOWN,
    )


class World:
    def __init__(self, kube: Any, ns: str) -> None:
        self.core: Any = client.CoreV1Api(kube)
        self.custom: Any = client.CustomObjectsApi(kube)
        self.ns, self.tag = ns, uuid.uuid4().hex[:6]
        self.node = f"resv-{self.tag}"
        self.reservations: list[str] = []
        self.core.create_node({
            "metadata": {"name": self.node, "labels": {"koord-resv": self.tag}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        })  # fmt: skip
        self.core.patch_node(self.node, {"spec": {"taints": None}})  # no node lifecycle controller here

    def reservation(self, name: str, cpu: str, ttl: str = "1h") -> str:
        name = f"{name}-{self.tag}"
        self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Reservation", "metadata": {"name": name},
            "spec": {
                "template": {"metadata": {"namespace": self.ns}, "spec": {
                    "schedulerName": "koord-scheduler", "nodeSelector": {"koord-resv": self.tag},
                    "containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}},
                "owners": [{"labelSelector": {"matchLabels": {"owner": self.tag}}}],
                "ttl": ttl,
            },
        })  # fmt: skip
        self.reservations.append(name)
        return name

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def pod(self, name: str, cpu: str, owner: bool = False, annotations: dict[str, str] | None = None) -> str:
        self.core.create_namespaced_pod(self.ns, {
            "metadata": {"name": name, "labels": {"owner": self.tag} if owner else {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"koord-resv": self.tag},
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
        })  # fmt: skip
        return name

    def read(self, name: str) -> Any:
        return self.core.read_namespaced_pod(name, self.ns)

    def unschedulable_message(self, name: str) -> str:
        for c in self.read(name).status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return str(c.message or "")
        return ""

    def close(self) -> None:
        for name in self.reservations:
            try:
                self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            except client.ApiException as e:
                if e.status != 404:
                    raise
        self.core.delete_node(self.node)


@pytest.fixture()
def world(kube: Any, namespace: str) -> Iterator[tuple[World, SchedulerService]]:
    """A node of 4 cpu and a running koord-scheduler with Reservation enabled."""
    w = World(kube, namespace)
    try:
        with running_scheduler(kube, _config()) as service:
            yield w, service
    finally:
        w.close()


def _available_on(w: World, name: str) -> bool:
    s = w.status(name)
    return s.get("phase") == "Available" and s.get("nodeName") == w.node


def test_only_owners_use_the_reserved_room_and_allocate_once_frees_it(world: Any) -> None:
    w, _ = world
    r = w.reservation("once", "3")
    assert wait_for(lambda: _available_on(w, r), timeout=15), w.status(r)
    status = w.status(r)
    assert status["allocatable"] == {"cpu": "3", "memory": "1Gi"}
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Scheduled", "True", "Scheduled"), ("Ready", "True", "Available"),
    ]  # fmt: skip
    # a non-owner needing the reserved room waits: 1 cpu of 4 is free to it
    other = w.pod("other", "2")
    assert wait_for(lambda: "Insufficient cpu" in w.unschedulable_message(other), timeout=10)
    # a pod naming the reservation without owning it: the spec's reason
    named = w.pod("named", "100m", annotations={ANNOTATION_RESERVATION_AFFINITY: json.dumps({"name": r})})
    assert wait_for(lambda: ERR_AFFINITY in w.unschedulable_message(named), timeout=10)
    assert w.unschedulable_message(named).endswith(f"1 {ERR_AFFINITY}.")
    # the owner binds into the reserved room (without it the node has 1 cpu free)
    owner = w.pod("owner", "2", owner=True)
    assert wait_for(lambda: w.read(owner).spec.node_name == w.node, timeout=10)
    uid = w.get(r)["metadata"]["uid"]
    allocated = json.loads(w.read(owner).metadata.annotations[ANNOTATION_RESERVATION_ALLOCATED])
    assert allocated == {"name": r, "uid": uid}
    # allocate-once: Succeeded with its owner, and its room is free: the non-owner binds
    assert wait_for(lambda: w.status(r).get("phase") == "Succeeded", timeout=10), w.status(r)
    status = w.status(r)
    owner_uid = w.read(owner).metadata.uid
    assert status["currentOwners"] == [{"namespace": w.ns, "name": owner, "uid": owner_uid}]
    assert status["allocated"] == {"cpu": "2", "memory": "64Mi"}
    assert wait_for(lambda: w.read(other).spec.node_name == w.node, timeout=10)
    assert w.read(named).spec.node_name is None


def test_a_short_ttl_expires_it_and_an_impossible_one_is_unschedulable(world: Any) -> None:
    w, _ = world
    big = w.reservation("big", "16")
    r = w.reservation("ttl", "3", ttl="3s")
    assert wait_for(lambda: _available_on(w, r), timeout=15), w.status(r)
    other = w.pod("other", "2")
    assert wait_for(lambda: "Insufficient cpu" in w.unschedulable_message(other), timeout=10)
    assert w.read(other).spec.node_name is None
    # the controller expires it (its ttl counted from creation) and its room is free
    assert wait_for(lambda: w.status(r).get("phase") == "Failed", timeout=15), w.status(r)
    ready = [c for c in w.status(r)["conditions"] if c["type"] == "Ready"]
    assert [(c["status"], c["reason"]) for c in ready] == [("False", "Expired")]
    assert wait_for(lambda: w.read(other).spec.node_name == w.node, timeout=10)
    # no node holds 16 cpu: Scheduled False/Unschedulable with the FitError, the phase kept
    status = w.status(big)
    assert status.get("phase") == "Pending" and not status.get("nodeName")
    [scheduled] = [c for c in status["conditions"] if c["type"] == "Scheduled"]
    assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
    assert scheduled["message"].startswith("0/") and "1 Insufficient cpu" in scheduled["message"]
