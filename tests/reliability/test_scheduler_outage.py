"""An API outage longer than the renew deadline must not take the standalone koord-scheduler down: the
process runs against this folder's own API server, which is frozen (SIGSTOP) for longer than the renew
deadline. Throughout, the process stays alive and /healthz answers; once the API server resumes it
campaigns again, takes its Lease back as a new term, and binds a pod created afterwards. SIGTERM still
exits 0.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import free_ports
from tests.helpers.processes import stop_daemon
from tests.reliability.helpers import FreezableControlPlane, http_get, wait_for

pytestmark = pytest.mark.apiserver

RENEW_DEADLINE, RETRY_PERIOD = 10.0, 2.0  # koord-scheduler's (docs/architecture.md#leader-election)
LEASE_DURATION = 15.0
OUTAGE = RENEW_DEADLINE + RETRY_PERIOD + 8.0
IDENTITY = "sched-outage"


def _node(core: Any, custom: Any, name: str, tag: str) -> None:
    """A schedulable node (8 cpu) with a fresh NodeMetric, as the load-aware plugin needs."""
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    core.create_node({"metadata": {"name": name, "labels": {"koord-test": tag}},
                      "status": {"allocatable": capacity, "capacity": capacity}})  # fmt: skip
    core.patch_node(name, {"spec": {"taints": None}})  # admission's not-ready taint: no node controller
    custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, {
        "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": "NodeMetric", "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}},
    })  # fmt: skip
    status = {
        "updateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1", "memory": "4Gi"}}},
    }
    custom.patch_cluster_custom_object_status(
        SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, name, {"status": status}
    )


def _pod(core: Any, ns: str, name: str, tag: str) -> None:
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {
        "schedulerName": "koord-scheduler", "nodeSelector": {"koord-test": tag},
        "containers": [{"name": "c", "image": "registry.invalid/pause:1",
                        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}],
    }})  # fmt: skip


def _bound(core: Any, ns: str, name: str) -> bool:
    return bool(core.read_namespaced_pod(name, ns).spec.node_name)


def _lease(kube: Any, ns: str) -> tuple[str, int]:
    spec = client.CoordinationV1Api(kube).read_namespaced_lease("koord-scheduler", ns).spec
    return str(spec.holder_identity or ""), int(spec.lease_transitions or 0)


def test_the_standalone_scheduler_survives_an_api_outage_and_schedules_again(
    own_control_plane: FreezableControlPlane, own_kube: Any, own_namespace: str, tmp_path: Path
) -> None:
    core, custom = client.CoreV1Api(own_kube), client.CustomObjectsApi(own_kube)
    ns, tag = own_namespace, uuid.uuid4().hex[:6]
    node = f"sched-out-{tag}"
    _node(core, custom, node, tag)
    [port] = free_ports(1)
    log_path = tmp_path / "scheduler.log"
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scheduler.main", f"--kubeconfig={own_control_plane.cp.kubeconfig_path}",
             f"--metrics-port={port}", "--bind-workers=2", f"--leader-elect-identity={IDENTITY}",
             f"--leader-elect-resource-namespace={ns}"],
            stdout=log_file, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def log_tail() -> str:
        return "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])

    try:
        _pod(core, ns, "before", tag)
        wait_for(lambda: _bound(core, ns, "before"), 60, what="the scheduler to bind while leading")
        identity, transitions = _lease(own_kube, ns)
        assert identity == IDENTITY

        with own_control_plane.frozen() as frozen_at:
            while time.monotonic() < frozen_at + OUTAGE:
                assert proc.poll() is None, f"koord-scheduler exited during the outage:\n{log_tail()}"
                assert http_get(port, "/healthz")[0] == 200, "/healthz stopped answering"
                time.sleep(0.5)

        # It waits out one lease duration of the unchanged Lease, then takes it back as a new term.
        wait_for(
            lambda: _lease(own_kube, ns) == (IDENTITY, transitions + 1), LEASE_DURATION + 25,
            what="the scheduler to take its Lease back",
        )  # fmt: skip
        assert proc.poll() is None
        _pod(core, ns, "after", tag)
        wait_for(lambda: _bound(core, ns, "after"), 30, what="a pod created after the outage to be bound")
    except AssertionError as e:
        raise AssertionError(f"{e}\nkoord-scheduler log:\n{log_tail()}") from None
    finally:
        own_control_plane.resume()
        stop_daemon(proc, 40)
        for name in ("before", "after"):
            with contextlib.suppress(ApiException):
                core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL, node)
        with contextlib.suppress(ApiException):
            core.delete_node(node)
    assert proc.returncode == 0, log_tail()
