"""VolumeBinding's PreBind against the real API server: a WaitForFirstConsumer claim and a local PV
with node affinity end bound to each other (claimRef on the PV; volumeName and bind-completed on the
claim, the PV controller's half done by the scheduler as `complete_claims` allows); a claim without a
PV of a class with a provisioner gets ``volume.kubernetes.io/selected-node``."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.volumes import PV, PVC, STORAGE_CLASS, VolumeObjects
from scheduler.plugins.volume.api import KubeVolumeBinderAPI
from scheduler.plugins.volume.binding import VolumeBinding

pytestmark = pytest.mark.apiserver


def _raw(resp: Any) -> dict[str, Any]:
    try:
        return dict(json.loads(resp.read()))
    finally:
        resp.release_conn()


@pytest.fixture()
def objects(kube: Any, namespace: str) -> Iterator[dict[str, Any]]:
    core, storage = client.CoreV1Api(kube), client.StorageV1Api(kube)
    tag = uuid.uuid4().hex[:6]
    node, local, dyn, pv_name = f"vb-node-{tag}", f"local-{tag}", f"dyn-{tag}", f"pv-{tag}"
    core.create_node({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}}})
    storage.create_storage_class({
        "metadata": {"name": local}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    })  # fmt: skip
    storage.create_storage_class({
        "metadata": {"name": dyn}, "provisioner": "example.com/csi",
        "volumeBindingMode": "WaitForFirstConsumer",
    })  # fmt: skip
    affinity = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
    core.create_persistent_volume({
        "metadata": {"name": pv_name},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": local,
                 "local": {"path": "/mnt/disk"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [affinity]}]}}},
    })  # fmt: skip
    # No PV controller runs here: make the PV Available as it would.
    core.patch_persistent_volume_status(pv_name, {"status": {"phase": "Available"}})
    for name, sc in (("data", local), ("scratch", dyn)):
        core.create_namespaced_persistent_volume_claim(namespace, {
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": sc,
                     "resources": {"requests": {"storage": "1Gi"}}},
        })  # fmt: skip
    try:
        yield {"core": core, "node": node, "pv": pv_name, "classes": (local, dyn)}
    finally:
        core.delete_persistent_volume(pv_name)
        for sc in (local, dyn):
            storage.delete_storage_class(sc)
        core.delete_node(node)


def _store(kube: Any, namespace: str, o: dict[str, Any]) -> VolumeObjects:
    """The objects as the informers would deliver them."""
    core, storage = o["core"], client.StorageV1Api(kube)
    s = VolumeObjects()
    s.on_add(PV, _raw(core.read_persistent_volume(o["pv"], _preload_content=False)))
    for name in ("data", "scratch"):
        s.on_add(
            PVC, _raw(core.read_namespaced_persistent_volume_claim(name, namespace, _preload_content=False))
        )
    for sc in o["classes"]:
        s.on_add(STORAGE_CLASS, _raw(storage.read_storage_class(sc, _preload_content=False)))
    return s


def _schedule(
    plugin: VolumeBinding, node: dict[str, Any], claim: str, namespace: str
) -> tuple[CycleState, dict[str, Any]]:
    volume = {"name": "v", "persistentVolumeClaim": {"claimName": claim}}
    pod = {
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"containers": [{"name": "c"}], "volumes": [volume]},
    }
    snap = Snapshot.build([node])
    state = CycleState(0.0)
    assert plugin.pre_filter(state, pod, snap) == Status.success()
    assert plugin.filter_all(state, pod, snap).status_of(0) == Status.success()
    assert plugin.reserve(state, pod, node["metadata"]["name"]) == Status.success()
    return state, pod


def test_delayed_claim_binds_to_local_pv(kube: Any, namespace: str, objects: dict[str, Any]) -> None:
    core, node_name = objects["core"], objects["node"]
    node = _raw(core.read_node(node_name, _preload_content=False))
    plugin = VolumeBinding(
        _store(kube, namespace, objects), KubeVolumeBinderAPI(kube), bind_timeout=10, poll_interval=0.05,
        complete_claims=True,
    )  # fmt: skip
    state, pod = _schedule(plugin, node, "data", namespace)
    assert plugin.pre_bind(state, pod, node_name) == Status.success()
    pv = _raw(core.read_persistent_volume(objects["pv"], _preload_content=False))
    pvc = _raw(core.read_namespaced_persistent_volume_claim("data", namespace, _preload_content=False))
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["spec"]["claimRef"]["namespace"] == namespace
    assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert pvc["spec"]["volumeName"] == objects["pv"]
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"


def test_claim_to_provision_gets_selected_node(kube: Any, namespace: str, objects: dict[str, Any]) -> None:
    core, node_name = objects["core"], objects["node"]
    node = _raw(core.read_node(node_name, _preload_content=False))
    plugin = VolumeBinding(
        _store(kube, namespace, objects), KubeVolumeBinderAPI(kube), bind_timeout=0.3, poll_interval=0.05
    )
    state, pod = _schedule(plugin, node, "scratch", namespace)
    # no provisioner runs here: the annotation is written, then the wait for the claim times out
    status = plugin.pre_bind(state, pod, node_name)
    assert status == Status.error("binding volumes: timed out waiting for the condition", "VolumeBinding")
    pvc = _raw(core.read_namespaced_persistent_volume_claim("scratch", namespace, _preload_content=False))
    assert pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node_name
    assert not pvc["spec"].get("volumeName")
