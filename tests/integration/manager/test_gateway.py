"""The manager's gateway on the real API server: node status writes (mutate, conflict retry), metadata
merge patches, the pods-by-node index, errors naming object and cause, leader-gated controllers."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from kubernetes import client

from kube.leaderelection import LeaderElector
from manager.controllerruntime.runtime import Controller, ControllerManager
from manager.gateway import Gateway, GatewayError
from manager.metrics import ManagerMetrics
from tests.integration.manager.conftest import wait_for

pytestmark = pytest.mark.apiserver


def _node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}, "capacity": {"cpu": "8", "memory": "32Gi"}},
    }


def test_node_writes_pod_index_and_errors(kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    name = f"gw-{uuid.uuid4().hex[:8]}"
    core.create_node(_node(name))
    stop = threading.Event()
    gw = Gateway(kube, config_namespace=namespace, node_filter=lambda n: n == name)
    try:
        gw.start(stop)
        assert gw.wait_synced(20)
        wait_for(lambda: gw.node(name), what="node in cache")
        assert gw.node_names() == [name]

        calls = [0]

        def mutate(node: dict[str, Any]) -> dict[str, Any]:
            calls[0] += 1
            if calls[0] == 1:  # someone else writes in between: our PUT conflicts and is retried
                core.patch_node(name, {"metadata": {"labels": {"racer": "1"}}})
            node["status"]["allocatable"]["kubernetes.io/batch-cpu"] = "3000"
            node["status"]["capacity"]["kubernetes.io/batch-cpu"] = "3000"
            return node

        written = gw.update_node_status(name, mutate)
        assert calls[0] == 2
        assert written is not None and written["status"]["allocatable"]["kubernetes.io/batch-cpu"] == "3k"
        assert gw.update_node_status(name, lambda node: None) is None
        assert gw.update_node_status("no-such-node-" + name, lambda node: node) is None

        patched = gw.patch_node_metadata(name, annotations={"a/b": "1"}, labels={"racer": None, "x": "y"})
        assert patched["metadata"]["annotations"]["a/b"] == "1"
        assert "racer" not in patched["metadata"]["labels"] and patched["metadata"]["labels"]["x"] == "y"

        pod = {
            "metadata": {"name": "p"},
            "spec": {"nodeName": name, "containers": [{"name": "c", "image": "registry.invalid/pause:1"}]},
        }
        core.create_namespaced_pod(namespace, pod)
        found = wait_for(lambda: gw.pods_on_node(name), what="pod indexed by node")
        assert [p["metadata"]["name"] for p in found] == ["p"]
        core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
        wait_for(lambda: gw.pods_on_node(name) == [], what="pod unindexed")

        with pytest.raises(GatewayError) as err:
            gw.update_nodeslo({"metadata": {"name": "missing-" + name, "resourceVersion": "1"}}, {})
        assert err.value.not_found and "NodeSLO missing-" + name in str(err.value)
        assert gw.delete_nodemetric("missing-" + name) is False
    finally:
        stop.set()
        core.delete_node(name)


def test_controllers_run_only_while_leading(kube: Any, namespace: str) -> None:
    metrics = ManagerMetrics()
    seen: list[str] = []
    ctl = Controller("t", lambda key: seen.append(key), metrics=metrics)
    ctl.enqueue("k")
    stop = threading.Event()
    mgr = ControllerManager([ctl], metrics=metrics, identity="me", stop=stop)
    elector = LeaderElector(
        kube, namespace=namespace, name="koord-manager-test", identity="me",
        lease_duration=4, renew_deadline=3, retry_period=0.5,
        on_started_leading=mgr.on_started_leading, on_stopped_leading=mgr.on_stopped_leading,
    )  # fmt: skip
    t = threading.Thread(target=elector.run, args=(stop,))
    t.start()
    try:
        wait_for(lambda: seen == ["k"], what="reconcile under leadership")
        assert metrics.registry.get_sample_value("koord_manager_leader", {"identity": "me"}) == 1
    finally:
        stop.set()
        t.join(10)
    wait_for(lambda: not mgr.running, what="controllers stopped")
    assert metrics.registry.get_sample_value("koord_manager_leader", {"identity": "me"}) == 0
