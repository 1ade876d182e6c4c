"""koord-manager and the koordlet started as processes with upstream Koordinator chart v1.8.0's argument
lists (tests/data/upstream/chart-v1.8.0), against the real API server and a fake host tree. The lists are
adapted only where they must be for a test: listen addresses get free loopback ports, the koordlet's
host paths point into the fake tree, and the manager's two namespaces are the test's (so its Lease and
slo-controller-config do not meet other tests'). Both come up (healthz, readyz), do their job — the
manager renders the NodeSLO from the ConfigMap in --config-namespace, the koordlet serves /metrics for
its node — log one warning line naming the upstream flags they ignore, and stop cleanly on SIGTERM.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis.constants import NODE_METRIC_PLURAL, NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane, free_ports
from tests.fixtures.hostsim import HostSimulator
from tests.fixtures.hosttree import HostTree
from tests.helpers.processes import stop_daemon
from tests.integration.podhelpers import wait_for
from tests.integration.test_manager_failover import nodeslo_threshold

pytestmark = pytest.mark.apiserver

CHART = Path(__file__).resolve().parents[1] / "data" / "upstream" / "chart-v1.8.0"
THRESHOLD = 61  # the test's slo-controller-config: the NodeSLO must carry it


def chart_args(name: str) -> list[str]:
    args = json.loads((CHART / name).read_text())
    assert isinstance(args, list) and all(isinstance(a, str) for a in args)
    return args


def adapt(args: list[str], replace: dict[str, str]) -> list[str]:
    """The chart's list with the arguments whose flag is in ``replace`` swapped; every one must exist."""
    out, seen = [], set()
    for a in args:
        flag = a.partition("=")[0]
        if flag in replace:
            out.append(replace[flag])
            seen.add(flag)
        else:
            out.append(a)
    assert seen == set(replace), f"not in the chart's list: {set(replace) - seen}"
    return out


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


@pytest.fixture()
def node(kube: Any, namespace: str) -> Iterator[str]:
    core, custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
    name = f"ua-{uuid.uuid4().hex[:6]}-n1"
    core.create_node({"metadata": {"name": name}})
    core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "slo-controller-config", "namespace": namespace},
        "data": {"resource-threshold-config": json.dumps(
            {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": THRESHOLD}})},
    })  # fmt: skip
    try:
        yield name
    finally:
        core.delete_node(name)
        for plural in (NODE_SLO_PLURAL, NODE_METRIC_PLURAL):
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, name)


def test_manager_and_koordlet_run_with_the_chart_arguments(
    control_plane: ControlPlane, kube: Any, namespace: str, node: str, tmp_path: Path
) -> None:
    custom = client.CustomObjectsApi(kube)
    metrics_port, health_port, hub_port, koordlet_port = free_ports(4)
    env = {**os.environ, "KUBECONFIG": str(control_plane.kubeconfig_path)}
    manager_argv = adapt(
        chart_args("manager-args.json"),
        {
            "--metrics-addr": f"--metrics-addr=127.0.0.1:{metrics_port}",
            "--health-probe-addr": f"--health-probe-addr=127.0.0.1:{health_port}",
            "--leader-election-namespace": f"--leader-election-namespace={namespace}",
            "--config-namespace": f"--config-namespace={namespace}",
        },
    )
    # Not in the chart, which runs one manager per cluster: a free hub port, and only this test's node.
    manager_argv += [f"--hub-addr=127.0.0.1:{hub_port}", f"--node-name-prefix={node}"]
    host = HostTree(tmp_path / "host", CgroupVersion.V1, CgroupDriver.CGROUPFS).one_numa_node(
        4, 16 * 1024 * 1024, 12 * 1024 * 1024
    )
    sim = HostSimulator(host, {}, ncpu=4, node_busy_cores=1.5, pod_cores={})
    koordlet_argv = adapt(
        chart_args("koordlet-args.json"),
        {
            "-addr": f"-addr=127.0.0.1:{koordlet_port}",
            "-cgroup-root-dir": f"-cgroup-root-dir={host.paths.cgroup_root}",
        },
    )
    # The chart relies on the image's defaults for these paths; here they point into the fake tree.
    koordlet_argv += [
        f"-proc-root-dir={host.paths.proc}",
        f"-sys-root-dir={host.paths.sys}",
        f"-metric-cache-path={tmp_path / 'metric-cache.npz'}",
        f"-audit-log={tmp_path / 'audit.log'}",
    ]
    manager_log, koordlet_log = tmp_path / "manager.log", tmp_path / "koordlet.log"
    procs: list[subprocess.Popen[bytes]] = []
    sim.thread.start()
    try:
        with manager_log.open("wb") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "manager.main", *manager_argv],
                stdout=out, stderr=subprocess.STDOUT, env=env,
            ))  # fmt: skip
        # The manager is up: probes answer, it leads (Lease in --leader-election-namespace) and renders
        # the NodeSLO from the ConfigMap in --config-namespace.
        assert wait_for(lambda: get(health_port, "/healthz")[0] == 200, 60), manager_log.read_text()[-3000:]
        assert wait_for(lambda: get(health_port, "/readyz")[0] == 200, 60), manager_log.read_text()[-3000:]
        assert wait_for(lambda: nodeslo_threshold(custom, node) == THRESHOLD, 60), manager_log.read_text()[
            -3000:
        ]
        lease = client.CoordinationV1Api(kube).read_namespaced_lease("koordinator-manager", namespace)
        assert lease.spec.holder_identity
        assert "koordinator_manager_is_leader 1" in get(metrics_port, "/metrics")[1]

        with koordlet_log.open("wb") as out:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "agent.daemon", *koordlet_argv], stdout=out, stderr=subprocess.STDOUT,
                env={**env, "NODE_NAME": node},
            ))  # fmt: skip
        assert wait_for(lambda: get(koordlet_port, "/healthz")[0] == 200, 60), koordlet_log.read_text()[
            -3000:
        ]
        assert wait_for(lambda: get(koordlet_port, "/readyz")[0] == 200, 60), koordlet_log.read_text()[-3000:]
        series = f'koordlet_node_used_cpu_cores{{node="{node}"}}'
        assert wait_for(lambda: series in get(koordlet_port, "/metrics")[1], 30), koordlet_log.read_text()[
            -3000:
        ]
        assert all(p.poll() is None for p in procs)
    finally:
        sim.stop.set()
        codes = [stop_daemon(p, 60) for p in reversed(procs)]  # one by one: the koordlet first
    assert codes == [0] * len(procs), (manager_log.read_text()[-2000:], koordlet_log.read_text()[-2000:])

    # One warning line each names the upstream flags accepted without effect.
    manager_text, koordlet_text = manager_log.read_text(), koordlet_log.read_text()
    [line] = [ln for ln in manager_text.splitlines() if "accepted upstream flags" in ln]
    assert "WARNING" in line and line.endswith("(ignored): --logtostderr")
    [line] = [ln for ln in koordlet_text.splitlines() if "accepted upstream flags" in ln]
    assert "WARNING" in line and line.endswith("(ignored): --runtime-hooks-host-endpoint, --logtostderr")
    # Every gate the chart names is implemented now (Accelerators: the Device report): none is ignored.
    assert not [ln for ln in koordlet_text.splitlines() if "--feature-gates: ignoring" in ln]
    # --v=4 took effect: the daemons log at debug level.
    assert " DEBUG " in koordlet_text
