"""ClusterObjects: informer events by kind, the per-pod lookups of client-go's listers and
helper.DefaultSelector of kube-scheduler v1.20.2, and thread safety."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from apis.labelselector import Requirement
from scheduler.framework.listers import ClusterObjects

Obj = dict[str, Any]


def obj(name: str, selector: Any, ns: str = "ns") -> Obj:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}


def pod(labels: dict[str, str] | None, ns: str = "ns") -> Any:
    return {"metadata": {"name": "p", "namespace": ns, "labels": labels or {}}, "spec": {}}


def eq(k: str, v: str) -> Requirement:
    return Requirement(k, "In", (v,))


def test_services_match_by_map_in_the_pods_namespace() -> None:
    c = ClusterObjects()
    c.on_add("Service", obj("web", {"app": "web"}))
    c.on_add("Service", obj("other-ns", {"app": "web"}, ns="other"))
    c.on_add("Service", obj("unset", None))
    c.on_add("Service", obj("all", {}))  # an empty map matches every pod
    names = [s["metadata"]["name"] for s in c.pod_services(pod({"app": "web"}))]
    assert sorted(names) == ["all", "web"]
    assert [s["metadata"]["name"] for s in c.pod_services(pod({}))] == ["all"]


def test_default_selector_merges_maps_and_adds_set_requirements() -> None:
    c = ClusterObjects()
    c.on_add("Service", obj("svc", {"app": "web"}))
    c.on_add("ReplicationController", obj("rc", {"tier": "fe"}))
    c.on_add(
        "ReplicaSet",
        obj("rs", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]}),
    )
    c.on_add("StatefulSet", obj("ss", {"matchLabels": {"tier": "fe"}}))
    sel = c.default_selector(pod({"app": "web", "tier": "fe", "extra": "1"}))
    assert set(sel) == {eq("app", "web"), eq("tier", "fe"), Requirement("app", "In", ("web", "x"))}


def test_default_selector_is_empty_for_a_pod_nothing_selects() -> None:
    c = ClusterObjects()
    c.on_add("Service", obj("svc", {"app": "db"}))
    c.on_add("ReplicaSet", obj("rs", {}))  # an empty LabelSelector matches nothing here
    c.on_add("ReplicaSet", obj("nil", None))
    c.on_add("ReplicationController", obj("rc", {}))
    assert c.default_selector(pod({"app": "web"})) == ()


def test_pod_without_labels_gets_no_controller_replicaset_or_statefulset() -> None:
    c = ClusterObjects()
    c.on_add("ReplicationController", obj("rc", {"a": "b"}))
    c.on_add("ReplicaSet", obj("rs", {"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}))
    assert c.pod_controllers(pod({})) == []
    assert c.pod_replica_sets(pod({})) == []
    assert c.default_selector(pod({})) == ()


def test_an_invalid_replicaset_selector_hides_every_replicaset_of_the_namespace() -> None:
    c = ClusterObjects()
    c.on_add("ReplicaSet", obj("good", {"matchLabels": {"app": "web"}}))
    assert len(c.pod_replica_sets(pod({"app": "web"}))) == 1
    c.on_add("ReplicaSet", obj("bad", {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}))
    assert c.pod_replica_sets(pod({"app": "web"})) == []
    assert c.default_selector(pod({"app": "web"})) == ()
    c.on_add("StatefulSet", obj("ss", {"matchLabels": {"app": "web"}}))
    assert c.default_selector(pod({"app": "web"})) == (eq("app", "web"),)


def test_update_and_delete_change_lookups_and_the_cached_selector() -> None:
    c = ClusterObjects()
    s = obj("svc", {"app": "web"})
    c.on_add("Service", s)
    assert c.default_selector(pod({"app": "web", "v": "1"})) == (eq("app", "web"),)
    g = c.generation
    s2 = obj("svc", {"app": "web", "v": "1"})
    c.on_update("Service", s, s2)
    assert c.generation > g
    assert c.default_selector(pod({"app": "web", "v": "1"})) == (eq("app", "web"), eq("v", "1"))
    c.on_delete("Service", s2)
    assert c.default_selector(pod({"app": "web", "v": "1"})) == ()
    assert c.objects("Service", "ns") == []
    c.on_delete("Service", s2)  # deleting twice is harmless


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind='Deployment'"):
        ClusterObjects().on_add("Deployment", obj("d", {}))


def test_concurrent_events_and_lookups() -> None:
    c = ClusterObjects()
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            for i in range(200):
                o = obj(f"s{k}-{i}", {"app": "web"})
                c.on_add("Service", o)
                if i % 2:
                    c.on_delete("Service", o)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for _ in range(200):
        assert c.default_selector(pod({"app": "web"})) in ((), (eq("app", "web"),))
    for t in threads:
        t.join()
    assert not errors
    assert len(c.objects("Service", "ns")) == 300


def test_a_status_only_update_keeps_the_kept_selectors() -> None:
    c = ClusterObjects()
    rs = obj("rs", {"matchLabels": {"app": "web"}})
    c.on_add("ReplicaSet", rs)
    g = c.generation
    updated = {**rs, "status": {"replicas": 3}}
    c.on_update("ReplicaSet", rs, updated)
    assert c.generation == g
    assert c.pod_replica_sets(pod({"app": "web"})) == [updated]
    c.on_update("ReplicaSet", updated, obj("rs", {"matchLabels": {"app": "db"}}))
    assert c.generation > g
    assert c.default_selector(pod({"app": "web"})) == ()
