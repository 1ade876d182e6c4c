"""`koord up --nodes 3`, the README's first command, end to end: the whole system on this machine.

Runs the real command as a child process for a bounded time and checks, through its kubeconfig: a
NodeMetric with node usage for every node (the real one and three simulated), batch resources on every
node, the demo pods bound by koord-scheduler by load (none on the simulated node above the 65 % CPU
threshold, the idlest simulated node taking at least as many as the middling one), the plain batch
Deployment's pods rewritten to BE by the demo's ClusterColocationProfile, the real node's
demo pods really running, the status view printed; then Ctrl-C, after which no process, mount,
cgroup, bridge, iptables chain or sysctl change of the run is left.

This test owns the host's one real node, so tests/e2e/conftest.py runs it before the session's
`real_node` fixture starts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from koord.localcluster.components import STATE_FILE as COMPONENTS_FILE
from koord.localcluster.components import reap_stale as reap_components
from koord.localcluster.controlplane import reap_stale as reap_control_plane
from koord.localcluster.hoststate import HostSnapshot, leftovers
from koord.localcluster.node import STATE_FILE as NODE_STATE_FILE
from koord.localcluster.node import reap_stale as reap_node
from koord.localcluster.procs import alive
from koord.status import scrape

REAL = "koord-node-0"
SIMS = ("sim-node-1", "sim-node-2", "sim-node-3")  # background load 85 %, 45 %, 15 %


def _wait(what: str, probe: Callable[[], Any], timeout: float, out: Path) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(1.0)
    tail = "\n".join(out.read_text(errors="replace").splitlines()[-40:])
    pytest.fail(f"koord up: {what} not within {timeout:.0f}s (last: {last!r}); output:\n{tail}")


@pytest.fixture()
def koord_up(tmp_path: Path) -> Any:
    if os.geteuid() != 0:
        pytest.skip("koord up's real node needs root")
    state, out = tmp_path / "up", tmp_path / "koord-up.out"
    argv = [
        sys.executable,
        "-c",
        "import sys; from koord.cli import main; sys.exit(main())",
        "up",
        "--nodes",
        "3",
        "--state-dir",
        str(state),
        "--prometheus",
        "off",
        "--status-interval",
        "5",
        "--duration",
        "400",
    ]
    with out.open("wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc, state, out
    finally:
        # A failed test still shuts the system down the operator's way (Ctrl-C), so the host is clean
        # for the tests after it; a hung shutdown is killed and its recorded processes reaped.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=150)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
                reap_components(state)
                reap_node(state / "node")
                reap_control_plane(state)


def test_koord_up_nodes_3(koord_up: Any) -> None:
    proc, state, out = koord_up
    _wait("'Press Ctrl-C'", lambda: proc.poll() is not None or "Press Ctrl-C" in out.read_text(), 240, out)
    assert proc.poll() is None, out.read_text()
    text = out.read_text()
    assert f"real node {REAL}" in text, f"no real node (is another LocalNode holding the host?):\n{text}"
    snap = HostSnapshot.from_json(json.loads((state / "node" / NODE_STATE_FILE).read_text()))
    pids = json.loads((state / COMPONENTS_FILE).read_text())["pids"]
    assert len(pids) == 1 + 1 + len(SIMS)  # the manager and one koordlet per node
    manager_metrics = re.search(r"koord-manager: metrics (\S+),", text)
    assert manager_metrics is not None, text

    api = config.new_client_from_config(str(state / "kubeconfig"))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    nodes = (REAL, *SIMS)
    try:

        def node_usage() -> dict[str, Any] | None:
            items = custom.list_cluster_custom_object(SLO_GROUP, SLO_VERSION, NODE_METRIC_PLURAL)["items"]
            got = {
                m["metadata"]["name"]: (
                    ((m.get("status") or {}).get("nodeMetric") or {}).get("nodeUsage") or {}
                )
                .get("resources", {})
                .get("cpu")
                for m in items
            }
            return got if all(got.get(n) for n in nodes) else None

        usage = _wait("a NodeMetric with node usage for every node", node_usage, 150, out)
        assert set(usage) == set(nodes)

        def batch() -> dict[str, str] | None:
            alloc = {n.metadata.name: n.status.allocatable or {} for n in core.list_node().items}
            got = {n: alloc.get(n, {}).get("kubernetes.io/batch-cpu") for n in nodes}
            return got if all(v is not None for v in got.values()) else None

        batch_cpu = _wait("batch-cpu on every node", batch, 90, out)
        assert batch_cpu["sim-node-1"] == "0", batch_cpu  # 85 % busy: nothing to reclaim

        def bound() -> dict[str, str] | None:
            pods = core.list_namespaced_pod("koord-demo").items
            placed = {p.metadata.name: p.spec.node_name for p in pods}
            return placed if len(placed) == 8 and all(placed.values()) else None

        placed = _wait("every demo pod bound", bound, 120, out)
        assert "sim-node-1" not in placed.values(), placed
        assert placed["ls-web"] == REAL and placed["be-burner"] == REAL, placed
        batch_nodes = [n for name, n in placed.items() if name.startswith("be-batch-")]
        # The batch workload is a plain Deployment: the demo's ClusterColocationProfile, applied by
        # koord-manager's mutating webhook, made every one of its pods BE on batch resources.
        for pod in core.list_namespaced_pod("koord-demo", label_selector="app=be-batch").items:
            assert pod.metadata.labels["koordinator.sh/qosClass"] == "BE", pod.metadata.name
            assert (pod.spec.priority_class_name, pod.spec.priority) == ("koord-batch", 5000)
            assert pod.spec.containers[0].resources.requests == {
                "kubernetes.io/batch-cpu": "200",
                "kubernetes.io/batch-memory": "64Mi",
            }
        assert re.search(r"^koord-demo/be-batch-\S+\s.*koord-demo-batch", out.read_text(), re.M), "MUTATED BY"
        assert batch_nodes.count("sim-node-3") >= batch_nodes.count("sim-node-2"), placed
        samples = scrape(manager_metrics.group(1))
        scheduled = sum(
            v
            for k, v in samples.items()
            if k.startswith("scheduler_schedule_attempts_total{") and 'result="scheduled"' in k
        )
        assert scheduled >= 8, samples

        def really_running() -> bool:
            for name in ("ls-web", "be-burner"):
                st = core.read_namespaced_pod(name, "koord-demo").status
                if (
                    st.phase != "Running"
                    or not st.container_statuses
                    or not st.container_statuses[0].state.running
                ):
                    return False
            return True

        _wait("the real node's demo pods running in containerd", really_running, 90, out)
        _wait(
            "a status view with every node's usage",
            lambda: all(re.search(rf"^{n}\s+(real|simulated)\s+\d", out.read_text(), re.M) for n in nodes),
            30,
            out,
        )
    finally:
        api.close()

    os.killpg(proc.pid, signal.SIGINT)
    rc = proc.wait(timeout=120)
    text = out.read_text()
    assert rc == 0, text[-3000:]
    assert "koord stopped" in text
    assert leftovers(snap) == []
    assert [p for p in pids if alive(p)] == []
    assert not (state / "sim").exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(manager_metrics.group(1), timeout=2)
