"""koordlet restarts (docs/rules/koordlet.md#metric-cache): the agent, a real process reading an emulated
node's host tree and pushing to a MetricHub, is killed (SIGKILL: a crash, no shutdown save), started
again, then stopped gracefully (SIGTERM) and started once more. Each new process reports the node's
aggregated window at once, warm, from the history its predecessor checkpointed or saved: history it
could not have collected itself in the time it took to send that report.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.controlplane import ControlPlane
from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import EmulatedNode
from manager.metrichub.server import serve
from manager.metrichub.store import HubStore
from proto.koord.v1 import metrichub_pb2 as pb
from tests.reliability.agent_fault_procs import Daemon, koordlet, reports, wait_for, warm

pytestmark = pytest.mark.apiserver

WINDOW = 40
"""The NodeMetric's aggregation window (s): empty until the node CPU series spans half of it (20 s)."""
BUSY_CORES = 0.3 * 4  # EmulatedHost's default background load on its 4 CPUs


@pytest.fixture()
def emulated(kube: Any, tmp_path: Path) -> Iterator[EmulatedNode]:
    name = f"restart-{uuid.uuid4().hex[:6]}"
    node = EmulatedNode(kube, name, EmulatedHost(tmp_path / "host")).start()
    custom = client.CustomObjectsApi(kube)
    # What koord-manager would write: the collect policy with one short window, and an empty NodeSLO.
    policy = {"aggregateDurationSeconds": 60, "reportIntervalSeconds": 30,
              "nodeAggregatePolicy": {"durations": [f"{WINDOW}s"]}}  # fmt: skip
    for plural, kind, spec in (
        (NODE_METRIC_PLURAL, "NodeMetric", {"metricCollectPolicy": policy}),
        ("nodeslos", "NodeSLO", {}),
    ):
        custom.create_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, {
            "apiVersion": f"{SLO_GROUP}/{SLO_VERSION}", "kind": kind, "metadata": {"name": name},
            "spec": spec,
        })  # fmt: skip
    try:
        yield node
    finally:
        for plural in (NODE_METRIC_PLURAL, "nodeslos"):
            with contextlib.suppress(client.ApiException):
                custom.delete_cluster_custom_object(SLO_GROUP, SLO_VERSION, plural, name)
        node.stop()


@pytest.fixture()
def hub() -> Iterator[tuple[HubStore, int]]:
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0")
    try:
        yield store, port
    finally:
        server.stop(0)


def _first_report_after(store: HubStore, node: str, daemon: Daemon, revision: int) -> pb.NodeMetricItem:
    """The first report ``daemon``'s current process pushed (the hub's entry newer than ``revision``)."""

    def newer() -> pb.NodeMetricItem | None:
        items = reports(store, node)
        return items[0] if items and items[0].revision > revision else None

    try:
        item: pb.NodeMetricItem = wait_for(newer, 45, 0.05, f"{daemon.name}'s first report")
    except AssertionError:
        raise AssertionError(f"no report; the koordlet's log:\n{daemon.tail()}") from None
    return item


def _avg_cpu_cores(report: pb.NodeMetricReport) -> float:
    [agg] = report.status.node_metric.aggregated_node_usages
    text = agg.usage["avg"].resources["cpu"]
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def test_restarted_koordlet_reports_its_aggregated_window_at_once(
    control_plane: ControlPlane,
    emulated: EmulatedNode,
    hub: tuple[HubStore, int],
    tmp_path: Path,
) -> None:
    store, hub_port = hub
    node = emulated.name
    cache = tmp_path / "koordlet" / "metric-cache.npz"
    agent = koordlet(node, emulated.host, control_plane.kubeconfig_path, tmp_path / "koordlet", hub_port)
    try:
        agent.start()
        # First life: collect until the window is warm, then let a checkpoint land after that.
        wait_for(
            lambda: (items := reports(store, node)) and warm(items[0].report, WINDOW),
            90, 0.2, f"a warm {WINDOW}s window from the first koordlet",
        )  # fmt: skip
        warm_at = time.time()
        wait_for(lambda: cache.exists() and cache.stat().st_mtime > warm_at + 0.5, 20, 0.1, "a checkpoint")
        agent.kill()  # a crash: no shutdown save, the checkpoint is all there is
        size = cache.stat().st_size
        assert 0 < size < 1 << 20  # bounded by the cache's retention and series count

        for life, stop in (("after a crash", agent.stop), ("after a graceful stop", None)):
            revision = store.revision
            agent.start()
            item = _first_report_after(store, node, agent, revision)
            sent = item.report.status.update_time.ToNanoseconds() / 1e9
            own_history = sent - agent.starts[-1]
            # The new process could not have collected half the window itself: the history is reloaded.
            assert own_history < WINDOW / 2, f"{life}: the first report came {own_history:.1f}s after start"
            assert warm(item.report, WINDOW), f"{life}: cold window in {item.report.status}"
            assert abs(_avg_cpu_cores(item.report) - BUSY_CORES) < 0.3, item.report.status.node_metric
            if stop is not None:
                saved_before = cache.stat().st_mtime
                assert stop() == 0, agent.tail()  # SIGTERM: the graceful stop saves the cache
                assert cache.stat().st_mtime >= saved_before
                assert "metric cache: shutdown: saved" in agent.tail(20000)
        assert "restored" in agent.tail(20000)
    finally:
        agent.stop()
