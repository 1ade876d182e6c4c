"""Every query of every Grafana dashboard in deploy/grafana/ returns data from a real Prometheus.

One running system for the module: koord-manager as a process (controllers, MetricHub, the embedded
koord-scheduler) managing one node of its own (``--node-name-prefix``, its own slo-controller-config
and Lease in the test namespace), a koordlet on a fake host tree for that node with QoS on (BE CPU
suppress, CPU burst with quota burst, BE memory eviction: the node's memory use is above the
configured threshold, so the BE pod is really evicted through the Eviction API), one pod scheduled by
koord-scheduler, and Debian's ``prometheus`` scraping the manager and the koordlet every second.
Each dashboard expression (Grafana variables substituted) is then one test case that must return a
non-empty result. Skipped only when prometheus is missing and we are not root (as root,
hack/install-deps.sh installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.daemon import Koordlet
from agent.options import parse
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver, KubeQOS
from apis.constants import NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane, free_ports
from koord.localcluster.prometheus import Prometheus, find_prometheus
from kube.rest import KubeRest
from tests.fixtures.hostsim import HostSimulator
from tests.fixtures.hosttree import HostTree
from tests.helpers.processes import stop_daemon
from tests.integration.podhelpers import make_pod, node_of, wait_for

pytestmark = pytest.mark.apiserver

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
# Grafana's built-in and dashboard variables → values for a direct query.
VARIABLES = {"__rate_interval": "30s", "__interval": "1s", "__range": "1h", "node": ".*"}
SETTLE_SECONDS = 45.0  # after every target is up, how long a query may take to return data

NCPU = 4
MEM_TOTAL_KB = 16 * 1024 * 1024
MEM_AVAILABLE_KB = 12 * 1024 * 1024  # 25 % used: above the 20 % BE memory evict threshold below
NODE_BUSY_CORES = 1.5
POD_CORES = {"ls": 0.8, "be": 0.3}

SLO_CONFIG = {
    "colocation-config": {"enable": True},
    "resource-threshold-config": {"clusterStrategy": {
        "enable": True, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": "cpuset",
        "memoryEvictThresholdPercent": 20, "memoryEvictLowerPercent": 15,
    }},
    "cpu-burst-config": {"clusterStrategy": {
        "policy": "auto", "cpuBurstPercent": 1000, "cfsQuotaBurstPercent": 300,
        "cfsQuotaBurstPeriodSeconds": -1, "sharePoolThresholdPercent": 90,
    }},
}  # fmt: skip


def substitute(expr: str) -> str:
    """Replace ``$name``, ``${name}`` and ``[[name]]`` Grafana variables by ``VARIABLES``."""

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in VARIABLES:
            raise KeyError(f"unknown Grafana variable {name!r} in {expr!r}")
        return VARIABLES[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", value, expr)


def dashboard_exprs() -> list[tuple[str, str]]:
    """(case id, expr) for every panel target of every dashboard, rows' nested panels included."""
    out: list[tuple[str, str]] = []
    for path in sorted(GRAFANA.glob("*.json")):
        board = json.loads(path.read_text())
        panels = list(board.get("panels", []))
        for p in list(panels):
            panels.extend(p.get("panels", []))
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{path.stem}:{p['id']}:{p['title']}:{t.get('refId', '')}", t["expr"]))
    return out


EXPRS = dashboard_exprs()


@dataclass
class System:
    prometheus: Prometheus
    node: str
    manager_log: Path
    ready_at: float


def _host_tree(base: Path) -> HostTree:
    return HostTree(base, CgroupVersion.V1, CgroupDriver.CGROUPFS).one_numa_node(
        NCPU, MEM_TOTAL_KB, MEM_AVAILABLE_KB
    )


def _bound_pod(name: str, node: str, qos_label: str, requests: dict[str, str] | None) -> dict[str, Any]:
    resources = {"requests": requests, "limits": requests} if requests else {}
    return {
        "metadata": {"name": name, "labels": {"koordinator.sh/qosClass": qos_label}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": resources}]},
    }


@pytest.fixture(scope="module")
def system(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    if find_prometheus() is None:
        if os.geteuid() == 0:
            pytest.fail("prometheus is not installed: run hack/install-deps.sh (apt-get install prometheus)")
        pytest.skip("prometheus is not installed and not root (as root hack/install-deps.sh installs it)")
    tmp = tmp_path_factory.mktemp("prometheus-system")
    kube = control_plane.api_client()
    core = client.CoreV1Api(kube)
    custom = client.CustomObjectsApi(kube)
    tag = uuid.uuid4().hex[:6]
    ns, node = f"t-prom-{tag}", f"prom-{tag}"
    stack = contextlib.ExitStack()
    try:
        core.create_namespace({"metadata": {"name": ns}})
        stack.callback(core.delete_namespace, ns)
        core.create_namespaced_config_map(ns, {
            "metadata": {"name": "slo-controller-config"},
            "data": {k: json.dumps(v) for k, v in SLO_CONFIG.items()},
        })  # fmt: skip
        capacity = {"cpu": str(NCPU), "memory": "16Gi", "pods": "110"}
        core.create_node({"metadata": {"name": node, "labels": {"koord-prom": tag}},
                          "status": {"capacity": capacity, "allocatable": capacity}})  # fmt: skip
        stack.callback(_delete_node, core, custom, node)
        core.patch_node(node, {"spec": {"taints": None}})

        host = _host_tree(tmp / "host")
        pods: dict[str, tuple[str, str]] = {}
        specs = {
            "ls": _bound_pod("ls", node, "LS", {"cpu": "1", "memory": "256Mi"}),
            "be": _bound_pod("be", node, "BE", None),
        }
        for name, spec in specs.items():
            uid = core.create_namespaced_pod(ns, spec).metadata.uid
            stack.callback(_delete_pod, core, ns, name)
            qos = KubeQOS.GUARANTEED if name == "ls" else KubeQOS.BESTEFFORT
            cid = uuid.uuid4().hex
            pod_dir, ctr_dir = host.add_running_pod(uid, qos, cid, NCPU)
            for d in (pod_dir, ctr_dir):
                host.set_cpu_limit(d, 100000 if name == "ls" else -1)
            # No kubelet here: report the container running, as the kubelet would.
            core.patch_namespaced_pod_status(name, ns, {"status": {
                "phase": "Running", "qosClass": qos.value,
                "containerStatuses": [{"name": "c", "containerID": f"containerd://{cid}", "image": "busybox",
                                       "imageID": "", "ready": True, "restartCount": 0,
                                       "state": {"running": {}}}],
            }})  # fmt: skip
            pods[name] = (pod_dir, ctr_dir)
        sim = HostSimulator(
            host, pods, ncpu=NCPU, node_busy_cores=NODE_BUSY_CORES, pod_cores=POD_CORES, throttled="ls"
        )
        sim.thread.start()
        stack.callback(sim.stop.set)

        hub_port, metrics_port = free_ports(2)
        manager_log = tmp / "manager.log"
        with manager_log.open("wb") as log:
            manager = subprocess.Popen(
                [sys.executable, "-m", "manager.main", f"--kubeconfig={control_plane.kubeconfig_path}",
                 f"--hub-addr=127.0.0.1:{hub_port}", f"--metrics-addr=127.0.0.1:{metrics_port}",
                 "--health-probe-addr=", "--hub-auth=none", f"--config-namespace={ns}",
                 f"--leader-election-namespace={ns}", f"--node-name-prefix={node}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        stack.callback(stop_daemon, manager, 30)
        # The manager renders the node's NodeSLO and NodeMetric from our slo-controller-config.
        assert wait_for(lambda: _exists(custom, NODE_SLO_PLURAL, node), 60), _tail(manager_log)
        assert wait_for(lambda: _exists(custom, NODE_METRIC_PLURAL, node), 30), _tail(manager_log)

        opts, _ = parse(
            [
                f"--node-name={node}",
                f"--cgroup-root-dir={host.paths.cgroup_root}",
                f"--proc-root-dir={host.paths.proc}",
                f"--sys-root-dir={host.paths.sys}",
                "--addr=127.0.0.1:0",
                f"--hub-address=127.0.0.1:{hub_port}",
                "--push-interval-seconds=1",
                f"--metric-cache-path={tmp / 'cache.npz'}",
                f"--audit-log={tmp / 'audit.log'}",
                "--feature-gates=NetworkCollector=false,BEMemoryEvict=true",
            ],
            {},
        )
        agent = Koordlet(opts, rest=KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path)))
        agent.start()
        stack.callback(agent.shutdown)
        assert wait_for(lambda: agent.ready, 30)
        # The reporter's first NodeMetric CR write is due one report interval after start; write it now
        # (the same status): the CR update is what makes the manager recompute batch resources.
        assert agent.reporter.write_cr(agent.reporter.build())

        # One pod for koord-scheduler (embedded in the manager), so its metrics have samples.
        make_pod(core, ns, "scheduled", cpu="100m", selector={"koord-prom": tag})
        stack.callback(_delete_pod, core, ns, "scheduled")
        assert wait_for(lambda: node_of(core, ns, "scheduled") == node, 60), _tail(manager_log)

        prom = Prometheus(
            tmp / "prometheus",
            [("koord-manager", f"127.0.0.1:{metrics_port}"), ("koordlet", f"127.0.0.1:{agent.server.port}")],
            interval_s=1.0,
        )
        prom.start(timeout=30)
        stack.callback(prom.stop)

        def all_up() -> bool:
            up = prom.targets_up()
            return len(up) == 2 and all(up.values())

        assert wait_for(all_up, 30), (prom.targets_up(), _tail(prom.log_path))
        yield System(prom, node, manager_log, time.monotonic())
    finally:
        stack.close()
        kube.close()


def _exists(custom: Any, plural: str, name: str) -> bool:
    try:
        custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, name)
    except client.ApiException:
        return False
    return True


def _delete_pod(core: Any, ns: str, name: str) -> None:
    with contextlib.suppress(client.ApiException):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)


def _delete_node(core: Any, custom: Any, node: str) -> None:
    with contextlib.suppress(client.ApiException):
        core.delete_node(node)
    for plural in (NODE_SLO_PLURAL, NODE_METRIC_PLURAL):
        with contextlib.suppress(client.ApiException):
            custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, node)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def test_dashboards_have_queries() -> None:
    assert len(EXPRS) >= 20, EXPRS
    assert substitute('rate(x{node=~"$node"}[$__rate_interval])') == 'rate(x{node=~".*"}[30s])'
    assert substitute("y[${__range}]") == "y[1h]"


@pytest.mark.parametrize("expr", [e for _, e in EXPRS], ids=[i for i, _ in EXPRS])
def test_dashboard_query_returns_data(system: System, expr: str) -> None:
    query = substitute(expr)
    deadline = system.ready_at + SETTLE_SECONDS
    result = system.prometheus.query(query)
    while not result and time.monotonic() < deadline:
        time.sleep(0.5)
        result = system.prometheus.query(query)
    assert result, f"no data for {query!r} (node {system.node})"
