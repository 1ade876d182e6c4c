"""`koord up`'s simulated node on the real API server: admission taints a new Node not-ready and, where no
kube-controller-manager runs (`koord up --no-node`, non-root), nothing else would lift it, so the simulated
node lifts it itself once Ready; its other taints stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from koord.localcluster.emulated import EmulatedHost
from koord.localcluster.emunode import NOT_READY_TAINT, EmulatedNode

pytestmark = pytest.mark.apiserver


def test_a_simulated_node_is_schedulable_without_a_node_lifecycle_controller(
    kube: Any, tmp_path: Path
) -> None:
    node = EmulatedNode(kube, "sim-untaint-test", EmulatedHost(tmp_path / "host", cpus=2)).start()
    try:
        taints = client.CoreV1Api(kube).read_node("sim-untaint-test").spec.taints or []
        assert NOT_READY_TAINT not in {t.key for t in taints}
        ready = [
            c
            for c in client.CoreV1Api(kube).read_node("sim-untaint-test").status.conditions
            if c.type == "Ready"
        ]
        assert ready and ready[0].status == "True"
    finally:
        node.stop()
