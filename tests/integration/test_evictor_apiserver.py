"""The koordlet evictor against the real API server (1.20: policy/v1beta1 Eviction): a bound pod is
evicted (graceful deletion: without a kubelet the pod stays with a deletionTimestamp), a Warning Event
``evictPodSuccess`` is readable through the events API and the counters move; a PodDisruptionBudget
covering a pod makes the eviction answer 429 (pending, retried later, not remembered).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from agent.evictor import Evictor, EvictOutcome
from agent.gateway import KubeGateway
from agent.podmeta import pod_meta
from agent.resourceexecutor.actions import Evict
from agent.system.podcgroup import CgroupDriver
from kube.rest import KubeRest
from tests.integration.podhelpers import wait_for

NODE = "evict-node"


def _bound_pod(core: Any, ns: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    pod_labels = {"koordinator.sh/qosClass": "BE", **labels}
    body = {
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "busybox"}]},
    }
    created = core.create_namespaced_pod(ns, body)
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": created.metadata.uid,
            "labels": pod_labels,
        },
        "spec": {"nodeName": NODE},
    }


def _meta(core: Any, name: str, namespace: str) -> Any:
    return core.read_namespaced_pod(name, namespace).metadata


def _action(pod: dict[str, Any]) -> Evict:
    meta = pod_meta(pod, CgroupDriver.CGROUPFS)
    return Evict(
        "BEMemoryEvict", meta, "evicted", f"trigger by koordlet feature BEMemoryEvict, kill pod: {meta.name}"
    )


def test_evict_via_v1beta1_event_and_counters(rest: KubeRest, kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    pod = _bound_pod(core, namespace, "victim", {})
    audit: list[str] = []
    registry = CollectorRegistry()
    evictor = Evictor(KubeGateway(rest, NODE), registry, audit=audit.append)
    assert evictor.start() == "policy/v1beta1"  # the test API server is 1.20

    report = evictor.evict([_action(pod)])
    uid = pod["metadata"]["uid"]
    assert report.outcomes == {uid: EvictOutcome.EVICTED}
    assert uid in evictor.pending_uids()

    # 1.20 deletes a bound pod gracefully: with no kubelet to confirm, it keeps a deletionTimestamp.
    live = _meta(core, "victim", namespace)
    assert live.deletion_timestamp is not None
    assert live.deletion_grace_period_seconds == 30

    def event() -> Any:
        events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=victim").items
        return next((e for e in events if e.reason == "evictPodSuccess"), None)

    assert wait_for(lambda: event() is not None, 10)
    ev = event()
    assert ev.type == "Warning"
    assert ev.involved_object.uid == uid
    assert ev.message == (
        f"evict Pod:{namespace}/victim, reason: evicted, message: trigger by koordlet feature BEMemoryEvict, "
        "kill pod: victim"
    )
    labels = {"node": NODE, "reason": "evicted"}
    assert registry.get_sample_value("koordlet_pod_eviction_total", labels) == 1.0
    detail = {"node": NODE, "pod_namespace": namespace, "pod_name": "victim", "reason": "evicted"}
    assert registry.get_sample_value("koordlet_pod_eviction_detail_total", detail) == 1.0
    record = json.loads(audit[0])
    assert record["outcome"] == "evicted" and record["pod"]["uid"] == uid
    assert record["apiVersion"] == "policy/v1beta1"

    # Remembered: a second round does not call the API again.
    assert evictor.evict([_action(pod)]).outcomes == {uid: EvictOutcome.SKIPPED}
    assert registry.get_sample_value("koordlet_pod_eviction_total", labels) == 1.0
    attempt = {"node": NODE, "reason": "evicted", "outcome": "evicted"}
    by_strategy = registry.get_sample_value(
        "koordlet_eviction_attempts_total", {**attempt, "strategy": "BEMemoryEvict"}
    )
    assert by_strategy == 1.0


def test_uid_precondition_and_gone(rest: KubeRest, kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    pod = _bound_pod(core, namespace, "other", {})
    stale = json.loads(json.dumps(pod))
    stale["metadata"]["uid"] = str(uuid.uuid4())
    evictor = Evictor(KubeGateway(rest, NODE), CollectorRegistry(), audit=lambda _line: None)
    assert evictor.evict([_action(stale)]).outcomes == {stale["metadata"]["uid"]: EvictOutcome.FAILED}
    assert _meta(core, "other", namespace).deletion_timestamp is None
    ghost = {"metadata": {"name": "ghost", "namespace": namespace, "uid": str(uuid.uuid4())}}
    assert evictor.evict([_action(ghost)]).outcomes == {ghost["metadata"]["uid"]: EvictOutcome.GONE}


def test_pdb_blocks_eviction_with_429(rest: KubeRest, kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    pod = _bound_pod(core, namespace, "guarded", {"app": "guarded"})
    # 1.20 ignores PDBs for Pending pods (no kubelet here to run it): mark it Running.
    core.patch_namespaced_pod_status("guarded", namespace, {"status": {"phase": "Running"}})
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    rest.request("POST", f"/apis/policy/v1beta1/namespaces/{namespace}/poddisruptionbudgets", pdb)
    registry = CollectorRegistry()
    audit: list[str] = []
    evictor = Evictor(KubeGateway(rest, NODE), registry, audit=audit.append)
    uid = pod["metadata"]["uid"]
    assert evictor.evict([_action(pod)]).outcomes == {uid: EvictOutcome.PENDING}
    assert json.loads(audit[0])["status"] == 429
    assert uid not in evictor.pending_uids()  # retried next tick
    assert _meta(core, "guarded", namespace).deletion_timestamp is None
    assert (
        registry.get_sample_value("koordlet_pod_eviction_total", {"node": NODE, "reason": "evicted"}) is None
    )
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=guarded").items
    assert [e.reason for e in events] == ["evictPodFail"]
    # A second 429 within a minute raises no second Event.
    assert evictor.evict([_action(pod)]).outcomes == {uid: EvictOutcome.PENDING}
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=guarded").items
    assert len(events) == 1
    with pytest.raises(client.ApiException):
        core.read_namespaced_pod("nope", namespace)
