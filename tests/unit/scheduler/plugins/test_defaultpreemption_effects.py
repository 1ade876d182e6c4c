"""Carrying out a preemption: victims deleted, lower-priority nominations cleared, the preemptor
nominated (kube's PrepareCandidate and the scheduler's failure handling), through the in-memory
PreemptionAPI and through KubePreemptionAPI on a fake CoreV1Api."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from scheduler.framework.nominated import NominatedPods
from scheduler.plugins.defaultpreemption import (
    InMemoryPreemptionAPI,
    PreemptionError,
    PreemptionResult,
    apply_preemption,
)
from scheduler.plugins.defaultpreemption.api import KubePreemptionAPI
from tests.unit.scheduler.plugins._preemption_support import HIGH, LOW, pod


def test_apply_deletes_victims_clears_lower_nominations_and_nominates() -> None:
    api = InMemoryPreemptionAPI()
    nominated = NominatedPods()
    low = pod("low", priority=LOW, nominated="node1")
    nominated.add(low)
    preemptor = pod("p", priority=HIGH)
    result = PreemptionResult("node1", (pod("v1"), pod("v2")), (low,))
    assert apply_preemption(api, preemptor, result, nominated) == "node1"
    assert api.deleted == ["default/v1", "default/v2"]
    assert api.nominations == [("default/low", None), ("default/p", "node1")]
    assert [p["metadata"]["name"] for p in nominated.for_node("node1")] == ["p"]


def test_a_failed_deletion_stops_and_nominates_nothing() -> None:
    api = InMemoryPreemptionAPI(fail_delete={"default/v1"})
    result = PreemptionResult("node1", (pod("v1"), pod("v2")), ())
    assert apply_preemption(api, pod("p"), result) is None
    assert api.deleted == [] and api.nominations == []


def test_already_nominated_there_is_not_patched_again() -> None:
    api = InMemoryPreemptionAPI()
    assert apply_preemption(api, pod("p", nominated="node1"), PreemptionResult("node1")) == "node1"
    assert api.nominations == []


def test_preemption_helping_nowhere_clears_the_preemptors_nomination() -> None:
    api = InMemoryPreemptionAPI()
    nominated = NominatedPods()
    p = pod("p", nominated="node1")
    nominated.add(p)
    assert apply_preemption(api, p, PreemptionResult(None, clear_preemptor=True), nominated) is None
    assert api.nominations == [("default/p", None)] and len(nominated) == 0
    api2 = InMemoryPreemptionAPI()
    assert apply_preemption(api2, pod("q"), PreemptionResult(None, clear_preemptor=True)) is None
    assert api2.nominations == []


class _FakeCore:
    def __init__(self, status: int | None = None) -> None:
        self.status = status
        self.calls: list[tuple[Any, ...]] = []

    def _maybe_fail(self) -> None:
        if self.status is not None:
            raise ApiException(status=self.status, reason="Boom")

    def delete_namespaced_pod(self, name: str, namespace: str) -> None:
        self.calls.append(("delete", namespace, name))
        self._maybe_fail()

    def patch_namespaced_pod_status(self, name: str, namespace: str, body: Any) -> None:
        self.calls.append(("patch", namespace, name, body))
        self._maybe_fail()


class _FakeEvents:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def event(self, obj: Any, type: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], type, reason, message))


def _api(status: int | None = None) -> tuple[KubePreemptionAPI, _FakeCore, _FakeEvents]:
    api = KubePreemptionAPI.__new__(KubePreemptionAPI)
    core, events = _FakeCore(status), _FakeEvents()
    api.core = core  # type: ignore[assignment]
    api.events = events  # type: ignore[assignment]
    return api, core, events


def test_kube_api_deletes_and_records_preempted_event() -> None:
    api, core, events = _api()
    api.delete_pod(pod("v", namespace="ns1"), pod("p", namespace="ns2"), "node1")
    assert core.calls == [("delete", "ns1", "v")]
    assert events.events == [("v", "Normal", "Preempted", "Preempted by ns2/p on node node1")]
    api.set_nominated_node(pod("p"), "node1")
    api.set_nominated_node(pod("p"), None)
    assert core.calls[1:] == [
        ("patch", "default", "p", {"status": {"nominatedNodeName": "node1"}}),
        ("patch", "default", "p", {"status": {"nominatedNodeName": None}}),
    ]


def test_kube_api_gone_is_done_other_errors_raise() -> None:
    api, _, events = _api(404)
    api.delete_pod(pod("v"), pod("p"), "node1")
    api.set_nominated_node(pod("p"), None)
    assert len(events.events) == 1
    api, _, events = _api(500)
    with pytest.raises(PreemptionError, match="deleting pod default/v: 500 Boom"):
        api.delete_pod(pod("v"), pod("p"), "node1")
    with pytest.raises(PreemptionError, match="setting nominatedNodeName of default/p: 500 Boom"):
        api.set_nominated_node(pod("p"), "node1")
    assert events.events == []
