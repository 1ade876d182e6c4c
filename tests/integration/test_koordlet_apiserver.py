"""koordlet against the real API server and a real MetricHub, reading a fake host tree whose counters a
simulator thread advances: pods bound to the node are found, measured, reported to the NodeMetric CR
and pushed to the hub; /metrics, /healthz and /readyz answer; a deleted pod's series go.
"""

from __future__ import annotations

import contextlib
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from agent.daemon import Koordlet
from agent.options import parse
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver, KubeQOS
from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from apis.quantity import Quantity
from koord.localcluster.controlplane import ControlPlane
from kube.rest import KubeRest
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from tests.fixtures.hostsim import HostSimulator
from tests.fixtures.hosttree import HostTree
from tests.integration.podhelpers import wait_for

NCPU = 4
MEM_TOTAL_KB = 16 * 1024 * 1024
MEM_AVAILABLE_KB = 12 * 1024 * 1024
NODE_BUSY_CORES = 1.5  # /proc/stat busy ticks advance at this rate
POD_CORES = {"ls": 0.8, "be": 0.3}


def _pod(name: str, node: str, qos_label: str | None, requests: dict[str, str] | None) -> dict[str, Any]:
    labels = {"koordinator.sh/qosClass": qos_label} if qos_label else {}
    resources = {"requests": requests, "limits": requests} if requests else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": resources}]},
    }


def _metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@pytest.fixture()
def node_env(kube: Any, namespace: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    node = f"kl-{uuid.uuid4().hex[:6]}"
    core.create_node({"metadata": {"name": node}})
    custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 60, "reportIntervalSeconds": 30}},
    })  # fmt: skip
    custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, "nodeslos", {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeSLO", "metadata": {"name": node}, "spec": {},
    })  # fmt: skip
    host = HostTree(tmp_path / "host", CgroupVersion.V1, CgroupDriver.CGROUPFS).one_numa_node(
        NCPU, MEM_TOTAL_KB, MEM_AVAILABLE_KB
    )
    pods: dict[str, tuple[str, str]] = {}
    specs = {
        "ls": _pod("ls", node, "LS", {"cpu": "1", "memory": "256Mi"}),
        "be": _pod("be", node, "BE", None),
    }
    for name, spec in specs.items():
        created = core.create_namespaced_pod(namespace, spec)
        uid = created.metadata.uid
        qos = KubeQOS.GUARANTEED if name == "ls" else KubeQOS.BESTEFFORT
        cid = uuid.uuid4().hex
        pod_dir, ctr_dir = host.add_running_pod(uid, qos, cid, NCPU)
        # No kubelet here: report the container as the kubelet would, through the status subresource.
        core.patch_namespaced_pod_status(name, namespace, {"status": {
            "qosClass": qos.value,
            "containerStatuses": [{"name": "c", "containerID": f"containerd://{cid}", "image": "busybox",
                                   "imageID": "", "ready": True, "restartCount": 0,
                                   "state": {"running": {}}}],
        }})  # fmt: skip
        pods[name] = (pod_dir, ctr_dir)
    sim = HostSimulator(host, pods, ncpu=NCPU, node_busy_cores=NODE_BUSY_CORES, pod_cores=POD_CORES)
    sim.thread.start()
    store = HubStore()
    hub, hub_port = serve(store, "127.0.0.1:0")
    try:
        yield {"node": node, "host": host, "core": core, "custom": custom, "store": store,
               "hub_port": hub_port, "ns": namespace, "pods": pods, "kube": kube}  # fmt: skip
    finally:
        sim.stop.set()
        hub.stop(0)
        for name in specs:
            with contextlib.suppress(client.ApiException):  # the test may have deleted it
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
        custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, "nodeslos", node)
        custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
        core.delete_node(node)


def test_koordlet_reports_pods_to_cr_and_hub(
    node_env: dict[str, Any], tmp_path: Path, control_plane: ControlPlane
) -> None:
    host: HostTree = node_env["host"]
    node = node_env["node"]
    opts, _ = parse(
        [
            f"--node-name={node}",
            f"--cgroup-root-dir={host.paths.cgroup_root}",
            f"--proc-root-dir={host.paths.proc}",
            f"--sys-root-dir={host.paths.sys}",
            "--addr=127.0.0.1:0",
            f"--hub-address=127.0.0.1:{node_env['hub_port']}",
            "--push-interval-seconds=1",
            f"--metric-cache-path={tmp_path / 'cache.npz'}",
            f"--audit-log={tmp_path / 'audit.log'}",
            "--feature-gates=NetworkCollector=false",
        ],
        {},
    )
    agent = Koordlet(opts, rest=KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path)))
    assert agent.driver is CgroupDriver.CGROUPFS
    agent.start()
    try:
        port = agent.server.port
        assert _get(port, "/healthz")[0] == 200
        assert wait_for(lambda: agent.ready, 20), _get(port, "/readyz?verbose")[1]
        assert _get(port, "/readyz")[0] == 200
        # Both pods were found from their UIDs and QoS (no tree walk) and measured.
        assert {p.name for p in agent.states.pods()} == {"ls", "be"}
        store: HubStore = node_env["store"]

        def pushed() -> pb.NodeMetricReport | None:
            items = store.list(node).items
            return items[0].report if items and len(items[0].report.status.pods_metric) == 2 else None

        assert wait_for(lambda: pushed() is not None, 20)
        report = pushed()
        assert report is not None and report.node_name == node
        # Node CPU from /proc/stat ticks: 1.5 cores busy; pods from cpuacct: 0.8 and 0.3 cores.
        node_cpu = Quantity.parse(report.status.node_metric.node_usage.resources["cpu"]).milli_value()
        assert abs(node_cpu - 1500) <= 150, node_cpu
        by_name = {p.name: p for p in report.status.pods_metric}
        assert abs(Quantity.parse(by_name["ls"].pod_usage.resources["cpu"]).milli_value() - 800) <= 80
        assert abs(Quantity.parse(by_name["be"].pod_usage.resources["cpu"]).milli_value() - 300) <= 30
        assert by_name["be"].qos == "BE" and by_name["be"].priority == "koord-batch"
        assert by_name["ls"].qos == "LS" and by_name["ls"].priority == "koord-prod"
        assert by_name["ls"].pod_usage.resources["memory"] == "100Mi"
        # Memory: MemTotal − MemAvailable = 4 GiB.
        assert report.status.node_metric.node_usage.resources["memory"] == "4Gi"

        # The same status lands in the CR through the status subresource (direct call: the loop's
        # first CR write comes one 30 s interval after start, covered by the end-to-end test).
        assert agent.reporter.write_cr(agent.reporter.build())
        nm = node_env["custom"].get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
        status = nm["status"]
        assert status["updateTime"].endswith("Z")
        assert {p["name"] for p in status["podsMetric"]} == {"be", "ls"}
        assert [a["duration"] for a in status["nodeMetric"]["aggregatedNodeUsages"]] == [
            "5m0s",
            "10m0s",
            "30m0s",
        ]
        assert (
            status["nodeMetric"]["aggregatedNodeUsages"][0]["usage"]["avg"] == {}
        )  # cold: seconds of history
        assert status["prodReclaimableMetric"] == {"resource": {}}
        numa = status["nodeMetric"]["numaUsages"]
        assert [n["numaNodeID"] for n in numa] == [0] and numa[0]["nodeUsage"]["resources"]["memory"] == "6Gi"
        assert status["nodeMetric"]["systemUsage"]["resources"]["cpu"]  # node − pods − host apps > 0

        # Prometheus: node and pod gauges, report counters.
        be_labels = (
            ("node", node),
            ("pod_name", "be"),
            ("pod_namespace", node_env["ns"]),
            ("pod_uid", _uid(agent, "be")),
        )
        assert wait_for(lambda: ("koordlet_pod_used_cpu_cores", be_labels) in _metrics(port), 10)
        m = _metrics(port)
        assert abs(m[("koordlet_node_used_cpu_cores", (("node", node),))] - 1.5) < 0.2
        hub_ok = m[
            (
                "koordlet_node_metric_reports_total",
                (("node", node), ("status", "succeeded"), ("target", "hub")),
            )
        ]
        assert hub_ok >= 1
        assert (
            "koordlet_collector_duration_seconds_count",
            (("collector", "pod_resource"), ("node", node)),
        ) in m
        blind = m[("koordlet_metrics_blind_seconds", (("node", node),))]
        assert 0 <= blind < 3.0  # node samples arrive every second

        # A deleted pod leaves the informer, its series leave the cache and its gauges leave /metrics.
        be_uid = _uid(agent, "be")
        node_env["core"].delete_namespaced_pod("be", node_env["ns"], grace_period_seconds=0)
        assert wait_for(lambda: {p.name for p in agent.states.pods()} == {"ls"}, 20)
        assert wait_for(
            lambda: not any(dict(k).get("pod_uid") == be_uid for _, k in agent.cache.series_keys()), 5
        )
        assert wait_for(lambda: not any(dict(k[1]).get("pod_uid") == be_uid for k in _metrics(port)), 10)
    finally:
        agent.shutdown()
    # The cache was saved on shutdown.
    assert (tmp_path / "cache.npz").stat().st_size > 0


def _uid(agent: Koordlet, name: str) -> str:
    return next(p.uid for p in agent.states.pods() if p.name == name)
