"""kube.events against the real API server: an Event about a pod with the right involvedObject,
reason, message and source; a repeat counted on the same Event; distinct events kept apart; errors
swallowed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kube.events import EventRecorder
from tests.integration.kube.helpers import pod

pytestmark = pytest.mark.apiserver


def _events(core: Any, namespace: str) -> list[dict[str, Any]]:
    resp = core.list_namespaced_event(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(resp.data)["items"]
    return items


def _created_pod(core: Any, namespace: str, name: str) -> dict[str, Any]:
    resp = core.create_namespaced_pod(namespace, pod(name), _preload_content=False)
    obj: dict[str, Any] = json.loads(resp.data)
    return obj


def test_event_about_a_pod_and_a_repeat_increments_count(kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    p = _created_pod(core, namespace, "web")
    rec = EventRecorder(kube, "koord-manager", host="node-a")
    rec.event(p, "Warning", "Evicted", "evicted for memory pressure")

    [ev] = _events(core, namespace)
    inv = ev["involvedObject"]
    assert (inv["kind"], inv["apiVersion"], inv["namespace"], inv["name"], inv["uid"]) == (
        "Pod",
        "v1",
        namespace,
        "web",
        p["metadata"]["uid"],
    )
    assert (ev["type"], ev["reason"], ev["message"]) == ("Warning", "Evicted", "evicted for memory pressure")
    assert ev["source"] == {"component": "koord-manager", "host": "node-a"}
    assert ev["count"] == 1
    assert ev["firstTimestamp"] and ev["lastTimestamp"]
    assert ev["metadata"]["name"].startswith("web.")

    rec.event(p, "Warning", "Evicted", "evicted for memory pressure")
    rec.event(p, "Warning", "Evicted", "evicted for memory pressure")
    [again] = _events(core, namespace)
    assert again["metadata"]["name"] == ev["metadata"]["name"]
    assert again["count"] == 3
    assert again["firstTimestamp"] == ev["firstTimestamp"]
    assert again["lastTimestamp"] >= ev["lastTimestamp"]


def test_different_events_are_separate_and_an_expired_window_starts_anew(kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    p = _created_pod(core, namespace, "db")
    now = [0.0]
    rec = EventRecorder(kube, "koordlet", clock=lambda: now[0])
    rec.event(p, "Normal", "Started", "one")
    rec.event(p, "Normal", "Started", "two")  # another message: another event
    rec.event(p, "Warning", "Started", "one")  # another type: another event
    assert sorted((e["type"], e["message"], e["count"]) for e in _events(core, namespace)) == [
        ("Normal", "one", 1),
        ("Normal", "two", 1),
        ("Warning", "one", 1),
    ]
    now[0] = 601.0  # more than 10 minutes later: not aggregated any more
    rec.event(p, "Normal", "Started", "one")
    ones = [e for e in _events(core, namespace) if (e["type"], e["message"]) == ("Normal", "one")]
    assert sorted(e["count"] for e in ones) == [1, 1]


def test_a_deleted_event_is_recreated_and_errors_are_never_raised(kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    p = _created_pod(core, namespace, "api")
    rec = EventRecorder(kube, "koord-scheduler")
    rec.event(p, "Normal", "Scheduled", "bound to node-1")
    [ev] = _events(core, namespace)
    core.delete_namespaced_event(ev["metadata"]["name"], namespace)
    rec.event(p, "Normal", "Scheduled", "bound to node-1")  # the patch 404s: created again
    [ev2] = _events(core, namespace)
    assert ev2["count"] == 1 and ev2["metadata"]["name"] != ev["metadata"]["name"]

    rec.event(p, "Bogus", "Scheduled", "not a valid type")  # logged, not raised
    rec.event({"kind": "Pod"}, "Normal", "NoName", "no metadata")
    gone = {**p, "metadata": {**p["metadata"], "namespace": "no-such-namespace"}}
    rec.event(gone, "Normal", "Scheduled", "namespace does not exist")
    assert len(_events(core, namespace)) == 1


def test_cluster_scoped_objects_get_events_in_default(kube: Any) -> None:
    core = client.CoreV1Api(kube)
    node = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "kube-events-node", "uid": "u-1"}}
    rec = EventRecorder(kube, "koordlet")
    rec.event(node, "Normal", "KoordTest", "about a cluster-scoped object")
    mine = [
        e
        for e in _events(core, "default")
        if e["involvedObject"].get("name") == "kube-events-node" and e["reason"] == "KoordTest"
    ]
    try:
        assert len(mine) == 1 and "namespace" not in mine[0]["involvedObject"]
    finally:
        for e in mine:
            core.delete_namespaced_event(e["metadata"]["name"], "default")
