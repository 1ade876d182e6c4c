"""koord-manager with the embedded scheduler, as a process against the real API server: it takes
its Lease, binds pending pods, and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client

from koord.localcluster.controlplane import ControlPlane, free_ports
from tests.integration.podhelpers import make_pod, node_of, wait_for

pytestmark = pytest.mark.apiserver


def test_embedded_scheduler_binds_while_leading(
    control_plane: ControlPlane,
    kube: Any,
    namespace: str,
    cluster: dict[str, Any],
) -> None:
    [port] = free_ports(1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "manager.main", f"--kubeconfig={control_plane.kubeconfig_path}",
         f"--hub-addr=127.0.0.1:{port}", "--metrics-addr=127.0.0.1:0", "--health-probe-addr=127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        core = cluster["core"]
        make_pod(core, namespace, "via-manager", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "via-manager") is not None, timeout=60)
        assert node_of(core, namespace, "via-manager") == cluster["names"]["cool"]
        lease = client.CoordinationV1Api(kube).read_namespaced_lease(
            "koordinator-manager", "koordinator-system"
        )
        assert lease.spec.holder_identity
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "embedded koord-scheduler started" in out
