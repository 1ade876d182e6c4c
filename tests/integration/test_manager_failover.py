"""Two koord-manager replicas on the real API server: only the leader reconciles and routes the hub
Service's Endpoints to itself; SIGKILL the leader and the standby takes the Lease within 20 s, applies a
ConfigMap edit made while nobody led and points the hub Endpoints at its own pod."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_SLO_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane, free_ports
from tests.helpers.processes import stop_all
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver


def _is_leader(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return False
    return any(line.startswith("koordinator_manager_is_leader 1") for line in text.splitlines())


def nodeslo_threshold(custom: Any, node: str) -> int | None:
    try:
        slo = custom.get_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_SLO_PLURAL, node)
    except ApiException:
        return None
    value = (slo.get("spec") or {}).get("resourceUsedThresholdWithBE", {}).get("cpuSuppressThresholdPercent")
    return int(value) if value is not None else None


def _config(core: Any, ns: str, percent: int, create: bool = False) -> None:
    body = {
        "metadata": {"name": "slo-controller-config", "namespace": ns},
        "data": {"resource-threshold-config": json.dumps(
            {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": percent}})},
    }  # fmt: skip
    if create:
        core.create_namespaced_config_map(ns, body)
    else:
        core.replace_namespaced_config_map("slo-controller-config", ns, body)


def _hub_endpoints(core: Any, ns: str) -> tuple[str, int] | None:
    try:
        ep = core.read_namespaced_endpoints("koord-manager-hub", ns)
    except ApiException:
        return None
    subset = (ep.subsets or [None])[0]
    if subset is None or not subset.addresses:
        return None
    return subset.addresses[0].ip, subset.ports[0].port


def test_standby_takes_over_and_loses_no_reconcile(
    control_plane: ControlPlane, kube: Any, namespace: str, tmp_path: Path
) -> None:
    core, custom = client.CoreV1Api(kube), client.CustomObjectsApi(kube)
    prefix = f"fo-{uuid.uuid4().hex[:6]}-"
    node = f"{prefix}n1"
    core.create_node({"metadata": {"name": node}})
    _config(core, namespace, 60, create=True)
    ports = free_ports(4)
    procs: list[subprocess.Popen[str]] = []
    try:
        for i in range(2):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "manager.main", f"--kubeconfig={control_plane.kubeconfig_path}",
                 f"--hub-addr=127.0.0.1:{ports[i]}", "--no-enable-scheduler",
                 f"--leader-election-namespace={namespace}", f"--config-namespace={namespace}",
                 f"--node-name-prefix={prefix}", f"--metrics-addr=127.0.0.1:{ports[2 + i]}",
                 "--health-probe-addr=127.0.0.1:0", "--hub-endpoints=koord-manager-hub"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "POD_IP": f"10.77.0.{i + 1}", "POD_NAME": f"mgr-{i}",
                     "POD_NAMESPACE": namespace, "TMPDIR": str(tmp_path)},  # SIGKILLed: cannot clean it
            ))  # fmt: skip
        assert wait_for(lambda: nodeslo_threshold(custom, node) == 60, 30), "the leader rendered no NodeSLO"
        leaders = [i for i in range(2) if _is_leader(ports[2 + i])]
        assert len(leaders) == 1, f"exactly one leader expected, got {leaders}"
        leader, standby = leaders[0], 1 - leaders[0]
        assert wait_for(
            lambda: _hub_endpoints(core, namespace) == (f"10.77.0.{leader + 1}", ports[leader]), 10
        )

        os.kill(procs[leader].pid, signal.SIGKILL)  # no lease release: the standby must wait it out
        killed = time.monotonic()
        _config(core, namespace, 55)  # made while nobody leads: must not be lost
        assert wait_for(lambda: _is_leader(ports[2 + standby]), 25), "the standby never took over"
        took_over = time.monotonic() - killed
        assert took_over <= 20.0, f"takeover took {took_over:.1f}s"
        assert wait_for(lambda: nodeslo_threshold(custom, node) == 55, 10), (
            "the edit made during the handover was lost"
        )
        assert wait_for(
            lambda: _hub_endpoints(core, namespace) == (f"10.77.0.{standby + 1}", ports[standby]), 10
        ), "the new leader did not route the hub Service to itself"
    finally:
        stop_all(procs, 30)
        for plural in (NODE_SLO_PLURAL, "nodemetrics"):
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, node)
        core.delete_node(node)
