"""An emulated node for `koord up --nodes N`: a Node object labelled as simulated, kept Ready by
heartbeats (the node Lease and the Ready condition, as a kubelet would, so kube-controller-manager never
taints it unreachable), and a minimal kubelet for the pods bound to it: each gets a containerID, the
Running phase and cgroups in the node's `EmulatedHost`, whose counters advance every second with the
pod's simulated usage. A real koordlet reads that host tree, so the node's metrics are measured, not
invented. Pods being deleted (or evicted) are finished at once, as a kubelet does after the grace
period.

A pod's simulated usage: the annotations ``koord.sh/simulated-cpu`` / ``koord.sh/simulated-memory``
(quantities), else half of its requests (cpu, or batch-cpu in milli-cores; memory or batch-memory).

Imports: standard library, kubernetes (the CLI's client), apis.{constants,quantity},
koord.localcluster.emulated.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from apis.constants import BATCH_CPU, BATCH_MEMORY
from apis.kubeobjects import ContainerStatus, Node, NodeCondition, Pod, PodCondition, PodStatus
from apis.quantity import Quantity, QuantityError
from koord.localcluster.emulated import EmulatedHost, PodLoad

log = logging.getLogger(__name__)

SIMULATED_LABEL = "koord.sh/simulated"
CPU_ANNOTATION = "koord.sh/simulated-cpu"
MEMORY_ANNOTATION = "koord.sh/simulated-memory"
HEARTBEAT_SECONDS = 10.0
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
LEASE_SECONDS = 40


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quantity_or_none(text: object) -> Quantity | None:
    """A quantity, or None for anything that is not one (absent, malformed)."""
    try:
        return Quantity(str(text))
    except (QuantityError, ValueError):
        return None


def pod_load(pod: Pod) -> PodLoad:
    """Pure: the simulated usage of a pod (see the module docstring)."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    cpu_milli, mem = 0, 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        if (q := quantity_or_none(req.get("cpu", "0"))) is not None:
            cpu_milli += q.milli_value()
        if (q := quantity_or_none(req.get(BATCH_CPU, "0"))) is not None:
            cpu_milli += q.value()  # batch-cpu is counted in milli-cores
        for key in ("memory", BATCH_MEMORY):
            if (q := quantity_or_none(req.get(key, "0"))) is not None:
                mem += q.value()
    cpu = cpu_milli / 2000.0
    memory = mem // 2
    if (q := quantity_or_none(ann.get(CPU_ANNOTATION))) is not None:
        cpu = q.milli_value() / 1000.0
    if (q := quantity_or_none(ann.get(MEMORY_ANNOTATION))) is not None:
        memory = q.value()
    return PodLoad(max(cpu, 0.0), max(memory, 0))


def node_manifest(name: str, cpus: int, memory_bytes: int, pods: int = 110) -> Node:
    """Pure: the Node object of an emulated node; nodes may carry their status on create."""
    capacity = {"cpu": str(cpus), "memory": f"{memory_bytes // 1024}Ki", "pods": str(pods)}
    now = _now()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", SIMULATED_LABEL: "true"},
            "annotations": {"koord.sh/simulated-by": "koord up --nodes"},
        },
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": _conditions(now, now),
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "kubeletVersion": "v1.20.2-simulated",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "containerRuntimeVersion": "simulated://1",
                "kernelVersion": "",
                "osImage": "koord simulated",
                "kubeProxyVersion": "",
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
            },
        },
    }


def _conditions(heartbeat: str, transition: str) -> list[NodeCondition]:
    out: list[NodeCondition] = [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "simulated node is ready"}
    ]
    for kind in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        out.append({"type": kind, "status": "False", "reason": f"KubeletHasNo{kind}", "message": "simulated"})
    for c in out:
        c["lastHeartbeatTime"] = heartbeat
        c["lastTransitionTime"] = transition
    return out


def container_id(uid: str, name: str) -> str:
    return "containerd://" + hashlib.sha256(f"{uid}/{name}".encode()).hexdigest()


def running_status(pod: Pod, started: str) -> PodStatus:
    """Pure: the status an emulated kubelet reports for a running pod."""
    uid = str((pod.get("metadata") or {}).get("uid") or "")
    statuses: list[ContainerStatus] = [
        {
            "name": c["name"],
            "ready": True,
            "restartCount": 0,
            "image": c.get("image", ""),
            "imageID": "",
            "containerID": container_id(uid, c["name"]),
            "started": True,
            "state": {"running": {"startedAt": started}},
        }
        for c in (pod.get("spec") or {}).get("containers") or []
    ]
    conds: list[PodCondition] = [
        {"type": t, "status": "True", "lastTransitionTime": started}
        for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    return {
        "phase": "Running",
        "hostIP": "127.0.0.1",
        "podIP": "127.0.0.1",
        "startTime": started,
        "conditions": conds,
        "containerStatuses": statuses,
    }


class EmulatedNode:
    """`EmulatedNode(api, name, host)`: ``start()`` registers the node and runs its loop in a thread;
    ``stop()`` ends the loop, deletes the Node (and Lease) and removes the host tree."""

    def __init__(self, api: Any, name: str, host: EmulatedHost, tick_seconds: float = 1.0) -> None:
        from kubernetes import client

        self.name = name
        self.host = host
        self.tick = tick_seconds
        self._core: Any = client.CoreV1Api(api)
        self._coord: Any = client.CoordinationV1Api(api)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0
        self._started = _now()
        self.errors = 0

    def start(self) -> EmulatedNode:
        self.host.build()
        body = node_manifest(self.name, self.host.cpus, self.host.memory_bytes)
        self._core.create_node(body)
        self._heartbeat()
        self._untaint_ready()
        self._thread = threading.Thread(target=self._run, name=f"emunode-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        from kubernetes.client import ApiException

        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(ApiException, ValueError):
            for pod in self._list_pods():
                meta = pod["metadata"]
                with contextlib.suppress(ApiException):
                    self._core.delete_namespaced_pod(meta["name"], meta["namespace"], grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            self._core.delete_node(self.name)
        with contextlib.suppress(ApiException):
            self._coord.delete_namespaced_lease(self.name, "kube-node-lease")
        self.host.remove()

    # --- the loop -----------------------------------------------------------------------------
    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.tick):
            now = time.monotonic()
            try:
                self._sync_pods()
                if now - self._last_beat >= HEARTBEAT_SECONDS:
                    self._heartbeat()
            except Exception as e:  # an API hiccup must not end the node; counted, logged
                self.errors += 1
                log.warning("simulated node %s: %s", self.name, e)
            self.host.advance(now - last)
            last = now

    def _untaint_ready(self) -> None:
        """Admission taints a new node ``node.kubernetes.io/not-ready``; kube-controller-manager's node
        lifecycle controller lifts it once the node is Ready. Without one (`koord up --no-node`, or as
        non-root) nothing would, and no pod could land here: lift it as that controller would."""
        node = json.loads(self._core.read_node(self.name, _preload_content=False).data)
        taints = (node.get("spec") or {}).get("taints") or []
        kept = [t for t in taints if t.get("key") != NOT_READY_TAINT]
        if len(kept) != len(taints):
            self._core.patch_node(self.name, {"spec": {"taints": kept or None}})

    def _heartbeat(self) -> None:
        from kubernetes.client import ApiException

        now = _now()
        self._core.patch_node_status(self.name, {"status": {"conditions": _conditions(now, self._started)}})
        micro = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": self.name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": micro}
        try:
            self._coord.patch_namespaced_lease(self.name, "kube-node-lease", {"spec": spec})
        except ApiException as e:
            if e.status != 404:
                raise
            self._coord.create_namespaced_lease(
                "kube-node-lease",
                {"metadata": {"name": self.name, "namespace": "kube-node-lease"}, "spec": spec},
            )
        self._last_beat = time.monotonic()

    def _list_pods(self) -> list[Pod]:
        raw = self._core.list_pod_for_all_namespaces(
            field_selector=f"spec.nodeName={self.name}", _preload_content=False
        )
        items: list[Pod] = json.loads(raw.data).get("items") or []  # the boundary: JSON becomes Pods
        return items

    def _sync_pods(self) -> None:
        from kubernetes.client import ApiException

        pods = self._list_pods()
        present: set[str] = set()
        for pod in pods:
            meta = pod.get("metadata") or {}
            uid, ns, name = meta.get("uid", ""), meta.get("namespace", ""), meta.get("name", "")
            if meta.get("deletionTimestamp"):
                with contextlib.suppress(ApiException):
                    self._core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                continue
            present.add(uid)
            status = pod.get("status") or {}
            if status.get("phase") != "Running":
                status = running_status(pod, _now())
                self._core.patch_namespaced_pod_status(name, ns, {"status": status})
                pod = {**pod, "status": {**(pod.get("status") or {}), **status}}
            self.host.set_pod(pod, pod_load(pod))
        for uid in self.host.pod_uids() - present:
            self.host.remove_pod(uid)
