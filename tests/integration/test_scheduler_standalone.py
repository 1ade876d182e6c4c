"""Two standalone koord-scheduler processes share the Lease koord-scheduler: one binds; when it is
stopped (SIGTERM releases the Lease) the standby takes over and binds the next pod. Both answer
/healthz and, once their informers synced, /readyz on the metrics port."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client

from koord.localcluster.controlplane import ControlPlane, free_ports, http_ok
from tests.helpers.processes import stop_all
from tests.integration.podhelpers import make_pod, node_of, wait_for

pytestmark = pytest.mark.apiserver


def holder(kube: Any) -> str:
    try:
        lease = client.CoordinationV1Api(kube).read_namespaced_lease("koord-scheduler", "koordinator-system")
    except client.exceptions.ApiException:
        return ""
    return lease.spec.holder_identity or ""


def test_standby_takes_over_when_the_leader_stops(
    control_plane: ControlPlane, kube: Any, namespace: str, cluster: dict[str, Any]
) -> None:
    base = [sys.executable, "-m", "scheduler.main", f"--kubeconfig={control_plane.kubeconfig_path}",
            "--bind-workers=2"]  # fmt: skip
    ports = dict(zip(("sched-a", "sched-b"), free_ports(2), strict=True))
    procs = {
        name: subprocess.Popen([*base, f"--leader-elect-identity={name}", f"--metrics-port={port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for name, port in ports.items()
    }  # fmt: skip
    core = cluster["core"]
    try:
        for port in ports.values():
            for path in ("/healthz", "/readyz", "/metrics"):
                assert wait_for(lambda p=port, q=path: http_ok(f"http://127.0.0.1:{p}{q}"), timeout=60), path
        make_pod(core, namespace, "one", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "one") is not None, timeout=60)
        first = holder(kube)
        assert first in procs
        procs[first].send_signal(signal.SIGTERM)  # releases the Lease
        _, err = procs[first].communicate(timeout=30)
        assert procs[first].returncode == 0, err
        standby = "sched-b" if first == "sched-a" else "sched-a"
        # a released Lease is taken at the standby's next retry; a busy machine delays it
        assert wait_for(lambda: holder(kube) == standby, timeout=30)
        make_pod(core, namespace, "two", selector={"koord-test": cluster["tag"]})
        assert wait_for(lambda: node_of(core, namespace, "two") is not None, timeout=60)
    finally:
        stop_all(procs.values(), 30)
