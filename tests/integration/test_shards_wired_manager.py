"""Two koord-manager replicas with --scheduler-sharding on the real API server (docs/shards.md#wiring):
each embedded scheduler is a shard named after its replica's identity, the leader (Lease
koordinator-manager) hosts the arbiter, and both bind pods — the standby too. The shard Leases are in
koordinator-shards; the hub serves no TLS here, so neither does the arbiter (docs/shards.md#security: the
embedded scheduler follows the hub until koord-manager takes the shard TLS flags)."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from koord.localcluster.controlplane import ControlPlane, free_ports
from scheduler.shards.membership import GROUP_LABEL
from scheduler.shards.wiring import DEFAULT_SHARD_LEASE_NAMESPACE
from tests.helpers.processes import stop_all
from tests.integration.podhelpers import make_pod, wait_for

pytestmark = pytest.mark.apiserver

PODS = 40


def metrics_port(log: Path) -> int | None:
    m = re.search(r"/metrics on port (\d+)", log.read_text())
    return int(m.group(1)) if m else None


def scheduled(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "scheduler_schedule_attempts_total" and s.labels.get("result") == "scheduled"
    )


def test_two_manager_replicas_each_run_a_shard(
    control_plane: ControlPlane, kube: Any, namespace: str, cluster: dict[str, Any], tmp_path: Path
) -> None:
    core = cluster["core"]
    leases = client.CoordinationV1Api(kube)
    procs: list[subprocess.Popen[Any]] = []
    logs = [tmp_path / f"manager-{i}.out" for i in range(2)]
    try:
        for log, hub in zip(logs, free_ports(2), strict=True):
            with log.open("w") as out:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "manager.main", f"--kubeconfig={control_plane.kubeconfig_path}",
                     f"--hub-addr=127.0.0.1:{hub}", "--metrics-addr=127.0.0.1:0",
                     "--health-probe-addr=127.0.0.1:0", "--controllers=",
                     f"--leader-election-namespace={namespace}", "--scheduler-sharding",
                     "--scheduler-shard-arbiter-addr=127.0.0.1:0",
                     "--scheduler-shard-advertise-host=127.0.0.1", "--scheduler-shard-lease-duration=3"],
                    stdout=out, stderr=subprocess.STDOUT, text=True,
                ))  # fmt: skip

        def shards() -> set[str]:
            # koord-manager has no --scheduler-shard-lease-namespace yet: the default, made by deploy/base
            found = leases.list_namespaced_lease(
                DEFAULT_SHARD_LEASE_NAMESPACE, label_selector=f"{GROUP_LABEL}=koord-scheduler"
            )
            return {x.spec.holder_identity for x in found.items if x.spec.holder_identity}

        assert wait_for(lambda: len(shards()) == 2, timeout=60), shards()
        leader = leases.read_namespaced_lease("koordinator-manager", namespace).spec.holder_identity
        assert leader in shards()  # the leader's identity is its shard's
        for i in range(PODS):
            make_pod(core, namespace, f"m{i:02d}", cpu="100m", selector={"koord-test": cluster["tag"]})

        def bound() -> int:
            return sum(1 for p in core.list_namespaced_pod(namespace).items if p.spec.node_name)

        assert wait_for(lambda: bound() == PODS, timeout=60), bound()
        ports = [metrics_port(log) for log in logs]
        assert all(ports), ports
        counts = [scheduled(p) for p in ports if p]
        assert wait_for(lambda: sum(scheduled(p) for p in ports if p) == PODS, timeout=10), counts
        assert all(scheduled(p) > 0 for p in ports if p)  # the standby bound pods too
    except AssertionError:
        for log in logs:
            print(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-40:]))
        raise
    finally:
        codes = stop_all(procs, 30)
    assert codes == [0, 0]
