"""Running a koordlet in-process against the real node, with the NodeMetric and NodeSLO koord-manager
would create (the e2e tests play its part), and a MetricHub to push to."""

from __future__ import annotations

import contextlib
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
    agent = Koordlet(opts, rest=KubeRest.from_kubeconfig(str(real_node.control_plane.kubeconfig_path)))
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
