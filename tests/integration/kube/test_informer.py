"""kube.informer against the real API server: pods in a namespace (add/update/delete as plain dicts,
field and label selectors, delete+re-create, a cut watch relisted without losing or duplicating
state, a 410 relisted at once, resync, prompt stop) and cluster-scoped NodeMetric custom objects."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from kube.informer import Informer, _ExpiredError, object_key
from tests.integration.kube.helpers import Recorder, pod, wait_for

pytestmark = pytest.mark.apiserver


def _pod_informer(core: Any, namespace: str, rec: Recorder, **kwargs: Any) -> Informer:
    extra = kwargs.pop("kwargs", {})
    return Informer(
        core.list_namespaced_pod,
        kwargs={"namespace": namespace, **extra},
        name="pods",
        **rec.handlers(),
        **kwargs,
    )


def test_pods_add_update_delete_are_delivered_as_json_dicts(
    kube: Any, namespace: str, stop: threading.Event
) -> None:
    core = client.CoreV1Api(kube)
    core.create_namespaced_pod(namespace, pod("before"))
    rec = Recorder()
    inf = _pod_informer(core, namespace, rec)
    thread = inf.start(stop)
    assert inf.has_synced.wait(10)
    # Listed objects get kind/apiVersion like watched ones, and camelCase Kubernetes JSON keys.
    [(_, _, _, listed)] = rec.of("add", "before")
    assert isinstance(listed, dict)
    assert (listed["kind"], listed["apiVersion"]) == ("Pod", "v1")
    assert listed["metadata"]["resourceVersion"] and "creationTimestamp" in listed["metadata"]
    assert "resource_version" not in listed["metadata"]

    core.create_namespaced_pod(namespace, pod("p1", {"a": "1"}))
    [(_, _, _, added)] = wait_for(lambda: rec.of("add", "p1"), what="add p1")
    assert added["kind"] == "Pod" and added["metadata"]["labels"] == {"a": "1"}
    assert added["spec"]["containers"][0]["terminationMessagePath"]  # camelCase, defaulted by the server

    core.patch_namespaced_pod("p1", namespace, {"metadata": {"labels": {"a": "2"}}})
    [(_, _, old, new)] = wait_for(lambda: rec.of("update", "p1"), what="update p1")
    assert old is not None and old["metadata"]["labels"] == {"a": "1"}
    assert new["metadata"]["labels"] == {"a": "2"}
    assert inf.store()[f"{namespace}/p1"]["metadata"]["labels"] == {"a": "2"}

    core.delete_namespaced_pod("p1", namespace, grace_period_seconds=0)
    [(_, _, _, gone)] = wait_for(lambda: rec.of("delete", "p1"), what="delete p1")
    assert gone["metadata"]["name"] == "p1"
    assert set(inf.store()) == {f"{namespace}/before"}
    assert inf.resource_version
    stop.set()
    thread.join(2)
    assert not thread.is_alive()


def test_field_and_label_selectors_filter(kube: Any, namespace: str, stop: threading.Event) -> None:
    core = client.CoreV1Api(kube)
    by_field, by_label = Recorder(), Recorder()
    f = _pod_informer(core, namespace, by_field, kwargs={"field_selector": "metadata.name=wanted"})
    lab = _pod_informer(core, namespace, by_label, kwargs={"label_selector": "team=blue"})
    f.start(stop)
    lab.start(stop)
    assert f.has_synced.wait(10) and lab.has_synced.wait(10)
    core.create_namespaced_pod(namespace, pod("other", {"team": "blue"}))
    core.create_namespaced_pod(namespace, pod("wanted", {"team": "red"}))
    wait_for(lambda: by_field.of("add", "wanted"), what="field-selected add")
    wait_for(lambda: by_label.of("add", "other"), what="label-selected add")
    # Events arrive in resourceVersion order, so the later-created pod proves the earlier was skipped.
    core.patch_namespaced_pod("other", namespace, {"metadata": {"labels": {"team": "green"}}})
    wait_for(lambda: by_label.of("delete", "other"), what="label no longer matching -> delete")
    assert set(f.store()) == {f"{namespace}/wanted"}
    assert by_field.names("add") == ["wanted"]
    assert by_label.names("add") == ["other"]
    assert lab.store() == {}


def test_delete_and_recreate_quickly_is_two_objects(kube: Any, namespace: str, stop: threading.Event) -> None:
    core = client.CoreV1Api(kube)
    rec = Recorder()
    inf = _pod_informer(core, namespace, rec)
    inf.start(stop)
    assert inf.has_synced.wait(10)
    first = core.create_namespaced_pod(namespace, pod("same"))
    core.delete_namespaced_pod("same", namespace, grace_period_seconds=0)
    second = core.create_namespaced_pod(namespace, pod("same"))
    wait_for(lambda: len(rec.of("add", "same")) == 2, what="second add")
    # (The delete may first show as an update that sets deletionTimestamp.)
    seen = [(kind, obj["metadata"]["uid"]) for kind, _, _, obj in rec.events if kind != "update"]
    assert {obj["metadata"]["uid"] for _, _, _, obj in rec.of("update")} <= {first.metadata.uid}
    assert seen == [("add", first.metadata.uid), ("delete", first.metadata.uid), ("add", second.metadata.uid)]
    assert inf.store()[f"{namespace}/same"]["metadata"]["uid"] == second.metadata.uid


def test_cut_watch_relists_without_losing_or_duplicating_state(
    kube: Any, namespace: str, stop: threading.Event
) -> None:
    """The watch connection is cut; while the informer is away a pod is deleted, one created and one
    changed. The relist must report exactly those changes, and the watch must go on afterwards."""
    core = client.CoreV1Api(kube)
    lists: list[float] = []
    gate = threading.Event()
    gate.set()

    def list_pods(**kw: Any) -> Any:
        if not kw.get("watch"):
            lists.append(time.monotonic())
            assert gate.wait(15)
        return core.list_namespaced_pod(**kw)

    for name in ("a", "b"):
        core.create_namespaced_pod(namespace, pod(name))
    rec = Recorder()
    inf = Informer(list_pods, kwargs={"namespace": namespace}, name="cut", **rec.handlers())
    inf.start(stop)
    assert inf.has_synced.wait(10)
    wait_for(lambda: inf._resp is not None, what="watch open")

    gate.clear()
    with inf._resp_lock:
        resp = inf._resp
    resp.shutdown()  # a real connection loss, from the client side
    wait_for(lambda: len(lists) == 2, what="relist after the cut")
    core.delete_namespaced_pod("a", namespace, grace_period_seconds=0)
    core.create_namespaced_pod(namespace, pod("c"))
    core.patch_namespaced_pod("b", namespace, {"metadata": {"labels": {"changed": "yes"}}})
    gate.set()

    wait_for(
        lambda: rec.of("add", "c") and rec.of("delete", "a") and rec.of("update", "b"), what="relist diff"
    )
    core.create_namespaced_pod(namespace, pod("d"))
    wait_for(lambda: rec.of("add", "d"), what="watch resumed after the relist")
    assert sorted(rec.names("add")) == ["a", "b", "c", "d"]  # each object added exactly once
    assert rec.names("delete") == ["a"]
    [(_, _, old, new)] = rec.of("update", "b")
    assert old is not None and "changed" not in (old["metadata"].get("labels") or {})
    assert new["metadata"]["labels"] == {"changed": "yes"}
    assert set(inf.store()) == {f"{namespace}/{n}" for n in ("b", "c", "d")}
    actual = {p.metadata.name: p.metadata.resource_version for p in core.list_namespaced_pod(namespace).items}
    assert {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in inf.store().values()} == actual


def test_gone_relists_at_once_without_duplicates(kube: Any, namespace: str, stop: threading.Event) -> None:
    """A 410 Gone on the watch (too old resourceVersion) relists immediately, with no backoff and no
    repeated adds. (The local 1.20 apiserver's growing watch cache will not expire a resourceVersion
    on demand, so the first watch request is answered with the 410 here.)"""
    core = client.CoreV1Api(kube)
    calls: list[tuple[str, float]] = []

    def list_pods(**kw: Any) -> Any:
        calls.append(("watch" if kw.get("watch") else "list", time.monotonic()))
        if kw.get("watch") and sum(1 for c in calls if c[0] == "watch") == 1:
            raise ApiException(status=410, reason="Gone: too old resource version")
        return core.list_namespaced_pod(**kw)

    core.create_namespaced_pod(namespace, pod("x"))
    rec = Recorder()
    inf = Informer(list_pods, kwargs={"namespace": namespace}, name="gone", **rec.handlers())
    inf.start(stop)
    wait_for(lambda: [c for c in calls if c[0] == "watch"][1:], what="second watch")
    kinds = [c[0] for c in calls]
    assert kinds[:4] == ["list", "watch", "list", "watch"]
    assert calls[2][1] - calls[1][1] < 0.15  # relisted without the 0.2 s backoff
    core.create_namespaced_pod(namespace, pod("y"))
    wait_for(lambda: rec.of("add", "y"), what="add y")
    assert rec.names("add") == ["x", "y"] and rec.of("update") == [] and rec.of("delete") == []


def test_watch_error_event_410_is_expiry_and_others_are_errors() -> None:
    inf = Informer(lambda **kw: None, name="unit")
    with pytest.raises(_ExpiredError):
        inf._handle({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}})
    with pytest.raises(RuntimeError):
        inf._handle({"type": "ERROR", "object": {"kind": "Status", "code": 500, "reason": "InternalError"}})
    inf._handle({"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "77"}}})
    assert inf.resource_version == "77" and inf.store() == {}


def test_resync_redelivers_every_object_as_update(kube: Any, namespace: str, stop: threading.Event) -> None:
    core = client.CoreV1Api(kube)
    for name in ("r1", "r2"):
        core.create_namespaced_pod(namespace, pod(name))
    rec = Recorder()
    inf = _pod_informer(core, namespace, rec, resync_seconds=0.3)
    inf.start(stop)
    assert inf.has_synced.wait(10)
    wait_for(lambda: len(rec.of("update", "r1")) >= 2 and len(rec.of("update", "r2")) >= 2, what="resyncs")
    for _, _, old, new in rec.of("update"):
        assert old is new
    assert sorted(rec.names("add")) == ["r1", "r2"]


def test_stop_returns_promptly_from_an_open_watch_and_from_backoff(kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    stop = threading.Event()
    inf = _pod_informer(core, namespace, Recorder())
    thread = inf.start(stop)
    assert inf.has_synced.wait(10)
    time.sleep(0.3)  # the watch is open and idle
    t0 = time.monotonic()
    stop.set()
    thread.join(2)
    assert not thread.is_alive() and time.monotonic() - t0 < 2

    def failing(**kw: Any) -> Any:
        raise ConnectionError("no route to host")

    stop2 = threading.Event()
    broken = Informer(failing, name="broken")
    thread = broken.start(stop2)
    time.sleep(1.0)  # deep into backoff
    t0 = time.monotonic()
    stop2.set()
    thread.join(2)
    assert not thread.is_alive() and time.monotonic() - t0 < 2
    assert not broken.has_synced.is_set()


def test_cluster_scoped_nodemetric_custom_objects(kube: Any, stop: threading.Event) -> None:
    api = client.CustomObjectsApi(kube)
    run = uuid.uuid4().hex[:8]
    names = [f"kube-informer-{run}-{i}" for i in range(2)]

    def nodemetric(name: str) -> dict[str, Any]:
        return {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
            "kind": "NodeMetric",
            "metadata": {"name": name, "labels": {"koord-test": run}},
            "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        }

    gvp = {"group": SLO_GROUP, "version": SLO_VERSION, "plural": NODE_METRIC_PLURAL}
    api.create_cluster_custom_object(body=nodemetric(names[0]), **gvp)
    try:
        rec = Recorder()
        inf = Informer(
            api.list_cluster_custom_object,
            kwargs={**gvp, "label_selector": f"koord-test={run}"},
            name="nodemetrics",
            **rec.handlers(),
        )
        inf.start(stop)
        assert inf.has_synced.wait(10)
        assert rec.names("add") == [names[0]]
        api.create_cluster_custom_object(body=nodemetric(names[1]), **gvp)
        [(_, _, _, added)] = wait_for(lambda: rec.of("add", names[1]), what="nodemetric add")
        assert added["kind"] == "NodeMetric" and added["apiVersion"] == f"{SLO_GROUP}/{SLO_VERSION}"
        assert object_key(added) == names[1]  # cluster-scoped: no namespace in the key

        patch = {"spec": {"metricCollectPolicy": {"reportIntervalSeconds": 30}}}
        api.patch_cluster_custom_object(name=names[1], body=patch, **gvp)
        [(_, _, _, new)] = wait_for(lambda: rec.of("update", names[1]), what="nodemetric update")
        assert new["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 30

        api.delete_cluster_custom_object(name=names[0], **gvp)
        wait_for(lambda: rec.of("delete", names[0]), what="nodemetric delete")
        assert set(inf.store()) == {names[1]}
    finally:
        for name in names:
            try:
                api.delete_cluster_custom_object(name=name, **gvp)
            except ApiException as e:
                if e.status != 404:
                    raise
