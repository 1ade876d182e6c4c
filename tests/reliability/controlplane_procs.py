"""Real koord processes and objects for the control-plane fault tests: a koord-manager and a standalone
koord-scheduler started as `koord up` starts its daemons (``python -c`` of their ``main``, own session,
output in a log file; tests.reliability.agent_fault_procs.Daemon), each leader-elected in the test's
namespace so the other tests of this control plane never share their Lease; schedulable nodes without
a kubelet (fresh NodeMetric written by the test) and pods for koord-scheduler; reading a Lease, and the
kube-apiserver's own request counters (its /metrics) for the binds it answered.

Imports: standard library, kubernetes, apis.constants, koord.localcluster.controlplane, tests.reliability.
"""

from __future__ import annotations

import json
import ssl
import sys
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane, free_ports
from tests.reliability.agent_fault_procs import ENTRY, Daemon

SCHEDULER_ENTRY = "import sys; from scheduler.main import main; sys.exit(main())"


@dataclass
class Manager:
    """A koord-manager process: ``daemon.port`` serves /healthz, /readyz and /metrics; ``hub`` the
    MetricHub."""

    daemon: Daemon
    hub: int


def manager(
    kubeconfig: Path, state: Path, namespace: str, node_prefix: str, *extra: str, hub: int = 0,
    name: str = "koord-manager",
) -> Manager:  # fmt: skip
    """koord-manager leader-elected in ``namespace``, its slo-controller-config there too, managing only
    the nodes named ``node_prefix…``; the hub without authentication (loopback), on ``hub`` when given;
    its log ``state/<name>.log``."""
    state.mkdir(parents=True, exist_ok=True)
    ports = free_ports(2 if hub else 3)
    probe, metrics = ports[0], ports[1]
    hub = hub or ports[2]
    argv = [
        sys.executable, "-c", ENTRY["koord-manager"], f"--kubeconfig={kubeconfig}",
        f"--hub-addr=127.0.0.1:{hub}", f"--metrics-addr=127.0.0.1:{metrics}",
        f"--health-probe-addr=127.0.0.1:{probe}", "--hub-auth=none",
        f"--leader-election-namespace={namespace}", f"--config-namespace={namespace}",
        f"--node-name-prefix={node_prefix}", *extra,
    ]  # fmt: skip
    return Manager(Daemon(name, argv, state / f"{name}.log", probe), hub)


def scheduler(kubeconfig: Path, state: Path, namespace: str, identity: str, *extra: str) -> Daemon:
    """A standalone koord-scheduler, its Lease ``koord-scheduler`` in ``namespace``."""
    state.mkdir(parents=True, exist_ok=True)
    (port,) = free_ports(1)
    argv = [
        sys.executable, "-c", SCHEDULER_ENTRY, f"--kubeconfig={kubeconfig}", f"--metrics-port={port}",
        f"--leader-elect-identity={identity}", f"--leader-elect-resource-namespace={namespace}", *extra,
    ]  # fmt: skip
    return Daemon(f"koord-scheduler-{identity}", argv, state / f"{identity}.log", port)


def scheduler_config(path: Path, load_aware_args: dict[str, Any]) -> Path:
    """A KubeSchedulerConfiguration file whose LoadAwareScheduling takes ``load_aware_args``."""
    path.write_text(json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "koord-scheduler",
                      "pluginConfig": [{"name": "LoadAwareScheduling", "args": load_aware_args}]}],
    }))  # fmt: skip
    return path


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def untaint(kube: Any, name: str) -> None:
    """Lifts the not-ready taint admission puts on a new node: no node lifecycle controller runs here."""
    client.CoreV1Api(kube).patch_node(name, {"spec": {"taints": None}})


def bare_node(kube: Any, name: str, labels: dict[str, str]) -> None:
    """A schedulable node (8 cpu, no kubelet) with a NodeMetric reported now (1 cpu used), as the
    load-aware plugin needs."""
    core, custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core.create_node({"metadata": {"name": name, "labels": labels},
                      "status": {"allocatable": capacity, "capacity": capacity}})  # fmt: skip
    untaint(kube, name)
    custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
    })  # fmt: skip
    status = {
        "updateTime": now_rfc3339(),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}},
    }
    custom.patch_cluster_custom_object_status(
        SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": status}
    )


def delete_node(kube: Any, name: str) -> None:
    """The node and its koord objects, whichever exist."""
    core, custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
    for plural in (NODE_METRIC_PLURAL, "nodeslos"):
        try:
            custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, name)
        except ApiException as e:
            if e.status != 404:
                raise
    try:
        core.delete_node(name)
    except ApiException as e:
        if e.status != 404:
            raise


def pod_manifest(name: str, selector: dict[str, str], cpu: str = "100m") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "schedulerName": "koord-scheduler", "nodeSelector": selector,
        "containers": [{"name": "c", "image": "registry.invalid/pause:1",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
    }}  # fmt: skip


def node_names(kube: Any, namespace: str, pods: list[str]) -> dict[str, str]:
    """``spec.nodeName`` of each pod of ``pods`` ("" while unbound)."""
    items = client.CoreV1Api(kube).list_namespaced_pod(namespace).items
    bound = {p.metadata.name: p.spec.node_name or "" for p in items}
    return {name: bound.get(name, "") for name in pods}


def lease(kube: Any, namespace: str, name: str) -> tuple[str, int]:
    """(holder, transitions) of a Lease; ("", 0) while it does not exist."""
    try:
        spec = client.CoordinationV1Api(kube).read_namespaced_lease(name, namespace).spec
    except ApiException as e:
        if e.status == 404:
            return "", 0
        raise
    return str(spec.holder_identity or ""), int(spec.lease_transitions or 0)


def apiserver_binds(cp: ControlPlane) -> dict[str, float]:
    """The Binding creates (``POST …/bindings``, what the scheduler sends) this kube-apiserver process
    answered, by HTTP code (its ``apiserver_request_total``, which starts at 0 with the process)."""
    from prometheus_client.parser import text_string_to_metric_families

    ctx = ssl.create_default_context(cafile=str(cp.ca_cert))
    req = urllib.request.Request(f"{cp.server}/metrics", headers={"Authorization": f"Bearer {cp.token}"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = s.labels
            binding = (labels.get("group"), labels.get("resource")) == ("", "bindings")
            if s.name == "apiserver_request_total" and binding:
                out[labels["code"]] = out.get(labels["code"], 0.0) + float(s.value)
    return out
