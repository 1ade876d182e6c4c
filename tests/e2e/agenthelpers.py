"""Running a koordlet in-process against the real node, with the NodeMetric and NodeSLO koord-manager
would create (the e2e tests play its part), and a MetricHub to push to."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from agent.daemon import Koordlet
from agent.options import parse
from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from kube.rest import KubeRest
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from tests.e2e.conftest import RealNode


@contextlib.contextmanager
def running_koordlet(
    real_node: RealNode,
    tmp_path: Path,
    nodeslo_spec: dict[str, Any] | None = None,
    args: list[str] | None = None,
    reassert_interval_seconds: float | None = None,
) -> Iterator[dict[str, Any]]:
    custom = client.CustomObjectsApi(real_node.api)
    node = real_node.node_name
    for plural, kind, spec in (
        (NODE_METRIC_PLURAL, "NodeMetric", {"metricCollectPolicy": {"reportIntervalSeconds": 30}}),
        ("nodeslos", "NodeSLO", nodeslo_spec or {}),
    ):
        custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": kind, "metadata": {"name": node},
            "spec": spec,
        })  # fmt: skip
    store = HubStore()
    hub, hub_port = serve(store, "127.0.0.1:0")
    opts, _ = parse(
        [
            f"--node-name={node}",
            f"--cgroup-root-dir={real_node.cgroup_root}",
            "--proc-root-dir=/proc",
            "--sys-root-dir=/sys",
            "--addr=127.0.0.1:0",
            f"--hub-address=127.0.0.1:{hub_port}",
            "--push-interval-seconds=1",
            f"--metric-cache-path={tmp_path / 'cache.npz'}",
            f"--audit-log={tmp_path / 'audit.log'}",
            *(args or []),
        ],
        {},
    )
    rest = KubeRest.from_kubeconfig(str(real_node.control_plane.kubeconfig_path))
    agent = (
        Koordlet(opts, rest=rest)
        if reassert_interval_seconds is None
        else Koordlet(opts, rest=rest, reassert_interval_seconds=reassert_interval_seconds)
    )
    agent.start()
    try:
        yield {
            "agent": agent,
            "store": store,
            "custom": custom,
            "node": node,
            "audit": tmp_path / "audit.log",
        }
    finally:
        agent.shutdown()
        hub.stop(0)
        for plural in (NODE_METRIC_PLURAL, "nodeslos"):
            with contextlib.suppress(client.ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, node)


def audit_records(path: Path) -> list[dict[str, Any]]:
    """The koordlet's audit log (JSON lines; the file may not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def meminfo() -> dict[str, int]:
    """/proc/meminfo in bytes."""
    out: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields:
            out[key] = int(fields[0]) * (1024 if len(fields) > 1 else 1)
    return out


def node_memory_usage_percent() -> float:
    """What BEMemoryEvict compares with its threshold: (MemTotal − MemAvailable) / MemTotal × 100."""
    m = meminfo()
    return (m["MemTotal"] - m["MemAvailable"]) * 100 / m["MemTotal"]
