"""The objects of bench/scheduler_vs_kube.py on the API server (docs/testing.md#scheduler-vs-kube-benchmark):
its labelled nodes, each with a NodeMetric, one namespace per scheduler, the pods it creates and deletes
between runs, and the raw-JSON watch that follows their binds. Nothing here starts a scheduler or times one.

Imports: kubernetes, apis, koord.localcluster.controlplane.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane

KOORD, KUBE = "koord-scheduler", "kube-scheduler"
LABEL = "koord.sh/bench-vs-kube"
WORKERS = 16  # driver threads creating objects
SETTLE_TIMEOUT_S = 300.0  # pods deleted between runs must be gone from the API by then


def _api(cp: ControlPlane) -> Any:
    """An admin client with a connection per driver thread (the default pool keeps 4)."""
    conf = client.Configuration()
    conf.host, conf.ssl_ca_cert = cp.server, str(cp.ca_cert)
    conf.api_key = {"authorization": f"Bearer {cp.token}"}
    conf.connection_pool_maxsize = WORKERS + 4
    return client.ApiClient(conf)


def drain(resp: Any) -> None:
    """Reads a raw response to its end, so its connection goes back to the pool clean."""
    resp.read()
    resp.release_conn()


def read_json(resp: Any) -> Any:
    """A raw response's JSON body, its connection back in the pool."""
    try:
        return json.loads(resp.data)
    finally:
        resp.release_conn()


def parallel(fn: Callable[[int], object], items: range) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(fn, items))


class Cluster:
    """The bench's nodes and namespaces on `cp`; `close()` deletes them."""

    def __init__(self, cp: ControlPlane) -> None:
        self.tag = uuid.uuid4().hex[:6]
        self.api = _api(cp)
        # Any: the client's stubs type bodies as models; the bench sends dicts and reads raw responses
        self.core: Any = client.CoreV1Api(self.api)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.nodes = 0
        self.ns = {s: f"vs-{s.split('-')[0]}-{self.tag}" for s in (KOORD, KUBE)}
        self.create_namespaces()

    def create_namespaces(self) -> None:
        for ns in self.ns.values():
            drain(self.core.create_namespace({"metadata": {"name": ns}}, _preload_content=False))

    def node_name(self, i: int) -> str:
        return f"vs-{self.tag}-{i:05d}"

    def grow(self, n: int) -> None:
        """Nodes up to n, each with a NodeMetric (usage 6-56 % cpu, 12-62 % memory, as scheduler_e2e)."""

        def one(i: int) -> None:
            name, res = self.node_name(i), {"cpu": "32", "memory": "128Gi", "pods": "110"}
            meta = {"name": name, "labels": {LABEL: self.tag, "kubernetes.io/hostname": name}}
            body = {"metadata": meta, "status": {"allocatable": res, "capacity": res}}
            drain(self.core.create_node(body, _preload_content=False))
            # admission's not-ready taint; no node lifecycle controller here to clear it
            drain(self.core.patch_node(name, {"spec": {"taints": None}}, _preload_content=False))
            nm = {
                "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}",
                "kind": "NodeMetric",
                "metadata": {"name": name},
            }
            self.custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, nm)

        parallel(one, range(self.nodes, n))
        self.nodes = n

    def refresh_metrics(self) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def one(i: int) -> None:
            usage = {"cpu": f"{2000 + (i * 7919) % 16000}m", "memory": f"{16 + i % 64}Gi"}
            status = {"updateTime": now, "nodeMetric": {"nodeUsage": {"resources": usage}}}
            self.custom.patch_cluster_custom_object_status(
                SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, self.node_name(i), {"status": status}
            )

        parallel(one, range(self.nodes))

    def pod(self, scheduler: str, k: int) -> dict[str, Any]:
        requests = {"cpu": "100m", "memory": "128Mi"}
        return {
            "metadata": {"name": f"p-{k:05d}", "labels": {LABEL: self.tag}},
            "spec": {
                "schedulerName": scheduler,
                "nodeSelector": {LABEL: self.tag},
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            },
        }

    def create_pod(self, scheduler: str, k: int) -> None:
        body = self.pod(scheduler, k)
        drain(self.core.create_namespaced_pod(self.ns[scheduler], body, _preload_content=False))

    def resource_version(self, ns: str) -> str:
        resp = self.core.list_namespaced_pod(ns, limit=1, _preload_content=False)
        return str(read_json(resp)["metadata"]["resourceVersion"])

    def clear(self, scheduler: str) -> None:
        """Deletes the scheduler's pods and waits until no bench pod is left in the API."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                drain(self.core.delete_collection_namespaced_pod(
                    self.ns[scheduler], label_selector=f"{LABEL}={self.tag}", grace_period_seconds=0,
                    _preload_content=False,
                ))  # fmt: skip
            except ApiException as e:
                # A loaded API server times a collection of thousands out (504) part-way: again.
                if e.status not in (429, 500, 503, 504):
                    raise
            resp = self.core.list_pod_for_all_namespaces(
                label_selector=f"{LABEL}={self.tag}", limit=1, _preload_content=False
            )
            if not read_json(resp)["items"]:
                return
            time.sleep(1.0)
        raise TimeoutError(f"bench pods still in the API {SETTLE_TIMEOUT_S:.0f}s after their deletion")

    def close(self) -> None:
        try:
            for scheduler in self.ns:
                self.clear(scheduler)
            for ns in self.ns.values():
                drain(self.core.delete_namespace(ns, _preload_content=False))

            def one(i: int) -> None:
                name = self.node_name(i)
                drain(self.core.delete_node(name, _preload_content=False))
                self.custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name)

            parallel(one, range(self.nodes))
        finally:
            self.api.close()


def follow(
    core: Any, ns: str, rv: str, want: int, deadline: float, tick: Callable[[], None]
) -> tuple[set[str], set[str]]:
    """Watches ns's pods from rv until `want` are bound or the deadline passes: (bound, ever found
    unschedulable). A watch whose rv expired (410) relists."""
    bound: set[str] = set()
    unschedulable: set[str] = set()

    def see(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if pod["spec"].get("nodeName"):
            bound.add(name)
        for c in pod.get("status", {}).get("conditions") or []:
            if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
                unschedulable.add(name)

    w: Any = watch.Watch()  # type: ignore[no-untyped-call]
    while len(bound) < want and (left := deadline - time.monotonic()) > 0:
        tick()
        try:
            seconds = max(1, min(5, int(left)))
            for ev in w.stream(core.list_namespaced_pod, ns, resource_version=rv, deserialize=False,
                               timeout_seconds=seconds, allow_watch_bookmarks=True):  # fmt: skip
                rv = ev["object"]["metadata"]["resourceVersion"]
                if ev["type"] in ("ADDED", "MODIFIED"):
                    see(ev["object"])
                if len(bound) >= want:
                    w.stop()
                    break
        except ApiException as e:
            if e.status != 410:
                raise
            listed = read_json(core.list_namespaced_pod(ns, _preload_content=False))
            bound.clear()
            for pod in listed["items"]:
                see(pod)
            rv = listed["metadata"]["resourceVersion"]
    return bound, unschedulable
