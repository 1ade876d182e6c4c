"""`koord up --nodes 3`, the README's first command, end to end: the whole system on this machine.

Runs the real command as a child process for a bounded time and checks, through its kubeconfig: a
NodeMetric with node usage for every node (the real one and three simulated), batch resources on every
node, the demo pods on the simulated nodes bound by koord-scheduler by load (none on the simulated node
above the 65 % CPU threshold, the idlest simulated node taking at least as many as the middling one), the
plain batch Deployment's pods rewritten to BE by the demo's ClusterColocationProfile, the status view
printed; then Ctrl-C, after which no process, mount, cgroup, bridge, iptables chain, sysctl change or
etcd data of the run is left.

The real node's CPU is the whole host's, so on a busy machine (other test runs) its batch-cpu shrinks and
its usage can pass the load-aware threshold: its pinned demo pods (``ls-web``, ``be-burner``) then rightly
wait. The test does what README.md tells an operator on such a host: it measures the host's load and,
when a real-node pod waits, raises that node's own reclaim and load thresholds by annotation, as far as
the measured load needs (reclaiming stops at 100 %; a load threshold needed above 100 % turns that node's
CPU load check off). It then checks koord's decision for each real-node pod
against the state the test watched: bound (and its containers running in containerd) only when a
sample showed room for it, or Pending with the scheduler's reason, which the state of the last seconds
bears out (no free batch-cpu, or the host near the threshold), and that reason in the status view.

This test owns the host's one real node, so tests/e2e/conftest.py runs it before the session's
`real_node` fixture starts.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from apis.constants import (
    ANNOTATION_NODE_COLOCATION_STRATEGY,
    ANNOTATION_USAGE_THRESHOLDS,
    BATCH_CPU,
    NODE_METRIC_PLURAL,
    SLO_GROUP,
    SLO_VERSION,
)
from apis.quantity import Quantity
from koord.localcluster.components import STATE_FILE as COMPONENTS_FILE
from koord.localcluster.components import reap_stale as reap_components
from koord.localcluster.controlplane import reap_stale as reap_control_plane
from koord.localcluster.hoststate import HostSnapshot, leftovers
from koord.localcluster.node import STATE_FILE as NODE_STATE_FILE
from koord.localcluster.node import reap_stale as reap_node
from koord.localcluster.procs import alive
from koord.status import scrape
from tests.e2e.hostload import CpuMeter, host_cpus

REAL = "koord-node-0"
SIMS = ("sim-node-1", "sim-node-2", "sim-node-3")  # background load 85 %, 45 %, 15 %
DEMO_PODS = 8  # ls-web, be-burner and the batch Deployment's 6 replicas (koord/localcluster/demo.py)
BURNER_BATCH_MILLI = 200  # be-burner's kubernetes.io/batch-cpu request (koord/localcluster/demo.py)
# The scheduler's reasons for keeping a real-node demo pod Pending (docs/rules/scheduler.md#filter-reasons).
NO_BATCH = "Insufficient kubernetes.io/batch-cpu"
OVER_LOAD = "node(s) cpu usage exceed threshold"
REASONS = {"ls-web": (OVER_LOAD,), "be-burner": (NO_BATCH, OVER_LOAD)}
RECLAIM_DEFAULT = 60  # cpuReclaimThresholdPercent (docs/configuration.md#colocation-config)
LOAD_DEFAULT = 65  # LoadAwareScheduling usageThresholds.cpu (docs/configuration.md#loadawarescheduling-args)
MEMORY_LOAD_DEFAULT = 95  # its memory threshold, kept: an annotation section replaces the whole vector
# A real-node demo pod's estimated CPU: max(limit, request) 200m × 85 %
# (docs/rules/scheduler.md#estimating-a-pod).
ESTIMATE_CORES = 0.17
SWING_CORES = 0.3  # how far the background may rise between the test's measurement and the scheduling
# Load points between the test's /proc/stat samples and what Filter compares: the pod's own estimate and
# those of pods placed on the node within the last report interval
# (docs/rules/scheduler.md#pods-already-on-the-node), plus sampling noise.
LOAD_SLACK = 25
# A state that lets a Pending pod fit binds it within one Node/NodeMetric event and the queue's backoff cap
# (docs/rules/scheduler.md#queue-and-backoff): a pod still Pending must have been refused that long.
SETTLE_S = 15.0
BIND_WAIT_S = 120.0
MEASURE_S = 5


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


def headroom(busy_cores: float, cpus: int) -> tuple[int, int]:
    """Pure: the real node's (cpuReclaimThresholdPercent, LoadAware cpu threshold) for ``busy_cores`` of
    background: batch-cpu to cover be-burner's request and usage room for a demo pod's estimate, each
    with SWING_CORES to spare, never below the defaults. Reclaiming stops at 100 %; a load threshold the
    background would need above 100 % could never pass, so the node's CPU load check is turned off (0)."""

    def percent(cores: float) -> int:
        return math.ceil(100 * cores / cpus)

    reclaim = min(100, max(RECLAIM_DEFAULT, percent(busy_cores + BURNER_BATCH_MILLI / 1000 + SWING_CORES)))
    load = max(LOAD_DEFAULT, percent(busy_cores + ESTIMATE_CORES + SWING_CORES))
    return reclaim, load if load <= 100 else 0


@dataclass(frozen=True, slots=True)
class Seen:
    """One look at the real node and the demo pods, about a second after the previous one."""

    at: float  # time.monotonic()
    busy_percent: float  # the host's CPU use since the previous look, % of the real node's CPUs
    free_batch: int  # REAL's batch-cpu allocatable − the batch-cpu requests of the other pods bound to it
    placed: dict[str, str]  # demo pod → its node ("" while unbound)


def _batch_request(pod: Any) -> int:
    total = 0
    for ctr in pod.spec.containers:
        req = (ctr.resources.requests if ctr.resources else None) or {}
        if BATCH_CPU in req:
            total += Quantity.parse(str(req[BATCH_CPU])).value()
    return total


def _look(core: Any, meter: CpuMeter) -> Seen:
    """Pods first, then the Node: a batch-cpu change the scheduler acted on is seen by this look or the
    next."""
    pods = core.list_namespaced_pod("koord-demo").items
    node = core.read_node(REAL)
    busy = meter.sample() * 100 / host_cpus()
    alloc = (node.status.allocatable or {}).get(BATCH_CPU)
    used = sum(
        _batch_request(p)
        for p in pods
        if p.spec.node_name == REAL and p.metadata.name != "be-burner" and not p.metadata.deletion_timestamp
    )
    free = (Quantity.parse(str(alloc)).value() if alloc is not None else 0) - used
    placed = {p.metadata.name: p.spec.node_name or "" for p in pods}
    return Seen(time.monotonic(), busy, free, placed)


def _waiting_reason(core: Any, name: str) -> str:
    """The pod's PodScheduled=False message ("" when it has none)."""
    for cond in core.read_namespaced_pod(name, "koord-demo").status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == "False":
            return str(cond.message or "")
    return ""


def _give_headroom(core: Any, seen: list[Seen]) -> int:
    """The operator's step of README.md on a busy host: the real node's own reclaim and load thresholds,
    raised as far as the peak load measured needs (docs/configuration.md#node-labels-and-annotations);
    a cpu threshold of 0 turns the check off (docs/configuration.md#loadawarescheduling-args). Returns
    the node's load threshold."""
    busy = max(s.busy_percent for s in seen) * host_cpus() / 100
    reclaim, load = headroom(busy, host_cpus())
    core.patch_node(REAL, {"metadata": {"annotations": {
        ANNOTATION_NODE_COLOCATION_STRATEGY: json.dumps({"cpuReclaimThresholdPercent": reclaim}),
        ANNOTATION_USAGE_THRESHOLDS: json.dumps(
            {"usageThresholds": {"cpu": load, "memory": MEMORY_LOAD_DEFAULT}}
        ),
    }}})  # fmt: skip
    return load


def _check_real_pod(core: Any, name: str, seen: list[Seen], load: int) -> bool:
    """koord's decision on a real-node demo pod against the state the test saw; whether it is bound."""
    when = next((i for i, s in enumerate(seen) if s.placed.get(name)), None)
    trail = "\n".join(f"{s.at - seen[0].at:5.0f}s busy {s.busy_percent:3.0f}% free batch-cpu {s.free_batch}"
                       f" {name}→{s.placed.get(name) or '-'}" for s in seen)  # fmt: skip
    if when is not None:
        assert seen[when].placed[name] == REAL, trail
        if when > 0:  # placed while the test watched: some look before showed room for it
            before = seen[: when + 1]
            if name == "be-burner":
                assert any(s.free_batch >= BURNER_BATCH_MILLI for s in before), trail
            assert not load or any(s.busy_percent <= load + LOAD_SLACK for s in before), trail
        return True
    why = _waiting_reason(core, name)
    assert any(r in why for r in REASONS[name]), f"{name} Pending without a reason of its own: {why!r}"
    recent = [s for s in seen if s.at >= seen[-1].at - SETTLE_S]
    if NO_BATCH in why:
        assert any(s.free_batch < BURNER_BATCH_MILLI for s in recent), f"{why}\n{trail}"
    if OVER_LOAD in why:
        assert load, f"{why} with the node's CPU load check off"
        assert any(s.busy_percent >= load - LOAD_SLACK for s in recent), f"{why} (threshold {load}%)\n{trail}"
    return False


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
        "800",  # only if this test dies first: it stops the run itself, within its 900 s timeout
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


@pytest.mark.timeout(900)  # start, reports, up to BIND_WAIT_S of watching, and the stop
def test_koord_up_nodes_3(koord_up: Any) -> None:
    proc, state, out = koord_up
    _wait("'Press Ctrl-C'", lambda: proc.poll() is not None or "Press Ctrl-C" in out.read_text(), 240, out)
    assert proc.poll() is None, out.read_text()
    text = out.read_text()
    assert f"real node {REAL}" in text, f"no real node (is another LocalNode holding the host?):\n{text}"
    snap = HostSnapshot.from_json(json.loads((state / "node" / NODE_STATE_FILE).read_text()))
    pids = json.loads((state / COMPONENTS_FILE).read_text())["pids"]
    assert len(pids) == 1 + 1 + len(SIMS)  # the manager and one koordlet per node
    etcd_data = Path(json.loads((state / "state.json").read_text())["etcdData"])  # the control plane's
    assert etcd_data.is_dir()
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

        # Watch the real node and the demo pods; the first looks measure the host's load. On a busy host a
        # real-node pod waits: give that node headroom as README.md tells an operator, then watch on.
        meter = CpuMeter()
        seen: list[Seen] = []
        for _ in range(MEASURE_S):
            time.sleep(1.0)
            seen.append(_look(core, meter))
        load = LOAD_DEFAULT
        if not all(seen[-1].placed.get(name) for name in REASONS):
            load = _give_headroom(core, seen)
        deadline = time.monotonic() + BIND_WAIT_S
        while time.monotonic() < deadline:
            if len(seen[-1].placed) == DEMO_PODS and all(seen[-1].placed.values()):
                break
            time.sleep(1.0)
            seen.append(_look(core, meter))
        placed = seen[-1].placed
        assert len(placed) == DEMO_PODS, placed
        # The simulated nodes' loads are generated, not the host's: the batch pods always find room there.
        batch_nodes = [n for name, n in placed.items() if name.startswith("be-batch-")]
        assert all(batch_nodes), f"a batch pod unbound: {placed}"
        assert "sim-node-1" not in placed.values(), placed
        assert batch_nodes.count("sim-node-3") >= batch_nodes.count("sim-node-2"), placed
        running = [name for name in REASONS if _check_real_pod(core, name, seen, load)]
        # What koord decided on this host (shown by pytest -rP): the load seen and the real node's pods.
        peak = max(s.busy_percent for s in seen)
        print(f"host CPU up to {peak:.0f}%, {REAL}'s load threshold {f'{load}%' if load else 'off'}, "
              f"bound there: {running or 'none'}")  # fmt: skip
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
        samples = scrape(manager_metrics.group(1))
        scheduled = sum(
            v
            for k, v in samples.items()
            if k.startswith("scheduler_schedule_attempts_total{") and 'result="scheduled"' in k
        )
        assert scheduled >= len(batch_nodes) + len(running), samples

        def really_running() -> bool:
            for name in running:
                st = core.read_namespaced_pod(name, "koord-demo").status
                if (
                    st.phase != "Running"
                    or not st.container_statuses
                    or not st.container_statuses[0].state.running
                ):
                    return False
            return True

        _wait("the real node's bound demo pods running in containerd", really_running, 90, out)
        waiting = [f"koord-demo/{name} pending: " for name in REASONS if name not in running]
        _wait(
            f"the status view saying why {waiting} wait",
            lambda: all(line in out.read_text() for line in waiting),
            30,
            out,
        )
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
    assert not etcd_data.exists()  # on /dev/shm, outside the state folder
    with pytest.raises(OSError):
        urllib.request.urlopen(manager_metrics.group(1), timeout=2)
