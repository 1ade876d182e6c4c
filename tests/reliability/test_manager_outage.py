"""An API outage longer than the renew deadline must not take koord-manager down: the process (with
its embedded scheduler) runs on against its own API server, which is frozen (SIGSTOP) for longer than
the renew deadline. Throughout, the process stays alive, /healthz answers and the MetricHub port
accepts connections; it stops leading within the lease duration (the leader gauge drops, /healthz says
standby); once the API server resumes it campaigns again, takes the Lease back as a new term, and its
controllers act again: a node added afterwards gets its NodeSLO. SIGTERM still exits 0.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import free_ports
from tests.helpers.processes import stop_daemon
from tests.reliability.helpers import FreezableControlPlane, accepts, http_get, wait_for

pytestmark = pytest.mark.apiserver

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0  # koord-manager's (docs/architecture.md)
OUTAGE = RENEW_DEADLINE + RETRY_PERIOD + 8.0


def _leader_gauge(metrics_port: int) -> int | None:
    status, text = http_get(metrics_port, "/metrics")
    if status != 200:
        return None
    for line in text.splitlines():
        if line.startswith("koordinator_manager_is_leader "):
            return int(float(line.split()[1]))
    return None


def _nodeslo(custom: Any, node: str) -> bool:
    try:
        custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, node)
    except ApiException:
        return False
    return True


def _lease(kube: Any, namespace: str) -> tuple[str, int]:
    spec = client.CoordinationV1Api(kube).read_namespaced_lease("koordinator-manager", namespace).spec
    return str(spec.holder_identity or ""), int(spec.lease_transitions or 0)


def test_the_manager_survives_an_api_outage_and_leads_again(
    own_control_plane: FreezableControlPlane, own_kube: Any, own_namespace: str, tmp_path: Path
) -> None:
    core, custom = client.CoreV1Api(own_kube), client.CustomObjectsApi(own_kube)
    ns, prefix = own_namespace, f"out-{uuid.uuid4().hex[:6]}-"
    nodes = [f"{prefix}before", f"{prefix}after"]
    core.create_node({"metadata": {"name": nodes[0]}})
    config = {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60}}
    core.create_namespaced_config_map(ns, {
        "metadata": {"name": "slo-controller-config"},
        "data": {"resource-threshold-config": json.dumps(config)},
    })  # fmt: skip
    hub, metrics, health = free_ports(3)
    log_path = tmp_path / "manager.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "manager.main", f"--kubeconfig={own_control_plane.cp.kubeconfig_path}",
             f"--hub-addr=127.0.0.1:{hub}", f"--metrics-addr=127.0.0.1:{metrics}",
             f"--health-probe-addr=127.0.0.1:{health}", f"--leader-election-namespace={ns}",
             f"--config-namespace={ns}", f"--node-name-prefix={prefix}"],
            stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def log_tail() -> str:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])

    try:
        wait_for(lambda: _leader_gauge(metrics) == 1, 60, what="the manager to lead")
        wait_for(lambda: _nodeslo(custom, nodes[0]), 30, what="the first node's NodeSLO")
        identity, transitions = _lease(own_kube, ns)
        assert identity

        with own_control_plane.frozen() as frozen_at:
            stood_down: float | None = None
            while time.monotonic() < frozen_at + OUTAGE:
                assert proc.poll() is None, f"koord-manager exited during the outage:\n{log_tail()}"
                assert http_get(health, "/healthz")[0] == 200, "/healthz stopped answering"
                assert accepts(hub), "the MetricHub port stopped accepting connections"
                if stood_down is None and _leader_gauge(metrics) == 0:
                    stood_down = time.monotonic()
                time.sleep(0.5)
            # The last renewal was at most one retry period before the freeze.
            assert stood_down is not None, "still leading at the end of the outage"
            assert stood_down - frozen_at <= LEASE_DURATION + 2.0, stood_down - frozen_at
            assert "standby" in http_get(health, "/healthz?verbose")[1]

        # It waits out one lease duration of the unchanged Lease, then takes it back as a new term.
        wait_for(lambda: _leader_gauge(metrics) == 1, LEASE_DURATION + 25, what="the manager to lead again")
        assert proc.poll() is None
        assert _lease(own_kube, ns) == (identity, transitions + 1)
        assert "leading" in http_get(health, "/healthz?verbose")[1]
        core.create_node({"metadata": {"name": nodes[1]}})
        wait_for(lambda: _nodeslo(custom, nodes[1]), 30, what="a NodeSLO for the node added after the outage")
    except AssertionError as e:
        raise AssertionError(f"{e}\nkoord-manager log:\n{log_tail()}") from None
    finally:
        own_control_plane.resume()
        stop_daemon(proc, 40)
        for node in nodes:
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, node)
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, "nodemetrics", node)
            with contextlib.suppress(ApiException):
                core.delete_node(node)
    assert proc.returncode == 0, log_tail()
