"""PSI, resctrl, network and node-info collectors."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from agent.metriccache.kv import NODE_CPU_INFO, NODE_NUMA_INFO
from agent.metricsadvisor.network import NetworkCollector, interface_rates
from agent.metricsadvisor.nodeinfo import NodeInfoCollector
from agent.metricsadvisor.psi import PSICollector
from agent.metricsadvisor.resctrl import ResctrlCollector
from agent.system import cgroup as cg
from agent.system.netlink import InterfaceCounters
from agent.system.nodeinfo import NodeTopology
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from tests.unit.agent.metricsadvisor.conftest import Env, make_pod

PSI_TEXT = "some avg10=1.50 avg60=0.00 avg300=0.00 total=1\nfull avg10=0.25 avg60=0.00 avg300=0.00 total=1\n"


def test_psi(env: Env) -> None:
    c = PSICollector()
    assert not c.enabled(env.ctx)  # no cgroup pressure files, no /proc/pressure
    env.host.write_proc("pressure/cpu", "some avg10=3.00 avg60=0.00 avg300=0.00 total=1\n")
    env.host.write_proc("pressure/memory", PSI_TEXT)
    assert PSICollector().enabled(env.ctx)
    meta = env.add_pod(make_pod("p1", "Burstable", ["c1"]))
    env.host.set_pressure(cg.CPU_PRESSURE, qos_cgroup_dir(env.host.driver, KubeQOS.GUARANTEED), 0.0)
    env.host.set_pressure(cg.CPU_PRESSURE, meta.cgroup_dir, 2.5)  # no full line
    env.host.set_pressure(cg.MEMORY_PRESSURE, meta.cgroup_dir, 1.0, 0.5)
    env.host.set_pressure(cg.CPU_PRESSURE, meta.containers[0].cgroup_dir, 4.0, 3.0)
    c = PSICollector()
    assert c.enabled(env.ctx) and c.interval_seconds == 10.0
    got = {(s.kind, tuple(sorted(s.labels.items()))): s.value for s in c.collect(env.ctx)}

    def key(kind: str, res: str, degree: str, **extra: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        labels = {"psi_resource": res, "psi_precision": "10", "psi_degree": degree, **extra}
        return kind, tuple(sorted(labels.items()))

    assert got[key("node_psi", "cpu", "some")] == 3.0
    assert got[key("node_psi", "mem", "full")] == 0.25
    assert got[key("pod_psi", "cpu", "some", pod_uid="p1")] == 2.5
    assert key("pod_psi", "cpu", "full", pod_uid="p1") not in got
    assert got[key("pod_psi", "mem", "full", pod_uid="p1")] == 0.5
    assert got[("pod_psi_cpu_full_supported", (("pod_uid", "p1"),))] == 0.0
    assert got[key("container_psi", "cpu", "full", pod_uid="p1", container_id="c1")] == 3.0
    assert got[("container_psi_cpu_full_supported", (("container_id", "c1"), ("pod_uid", "p1")))] == 1.0
    assert len(got) == 3 + 1 + 3 + 2 + 1  # node: cpu some, mem some+full; pods; container


def test_resctrl(env: Env) -> None:
    c = ResctrlCollector()
    assert not c.enabled(env.ctx)
    env.host.write_resctrl({"LS": {"0": (4096, 10, 20)}, "BE": {"0": (8192, 30, 40), "1": (1, 2, 3)}})
    assert c.enabled(env.ctx)
    got = {(s.labels["qos"], s.labels["cache_id"]): s.value for s in c.collect(env.ctx)}
    assert got == {("LS", "0"): 4096.0, ("BE", "0"): 8192.0, ("BE", "1"): 1.0}
    assert c.last_mb[("BE", "1", "mbm_total")] == 3 and c.last_mb[("LS", "0", "mbm_local")] == 10


def _counters(n: int, rx_dropped: int = 0) -> InterfaceCounters:
    return InterfaceCounters(n * 100, n * 200, n, 2 * n, 0, 0, rx_dropped, 0)


def test_interface_rates() -> None:
    got = interface_rates(_counters(1), _counters(3), 2_000_000_000)
    assert got is not None
    assert got["node_network_rx_bytes"] == 100.0 and got["node_network_tx_packets"] == 2.0
    assert interface_rates(_counters(3), _counters(1), 1) is None
    assert interface_rates(_counters(1), _counters(1), 0) is None


def test_network_collector(env: Env) -> None:
    readings: list[Mapping[str, InterfaceCounters]] = [
        {"eth1": _counters(1), "eth0": _counters(10, 5), "lo": _counters(1), "veth9a": _counters(1)},
        {
            "eth1": _counters(2),
            "eth0": _counters(20, 4),
            "new0": _counters(1),
            "lo": _counters(5),
            "veth9a": _counters(7),
        },
    ]
    c = NetworkCollector(read_links=lambda: readings.pop(0))
    assert c.collect(env.ctx) == [] and c.started
    env.clock.advance(0.5)
    got = {(s.kind, s.labels["interface"]): s.value for s in c.collect(env.ctx)}
    assert got == {
        ("node_network_rx_bytes", "eth1"): 200.0,
        ("node_network_tx_bytes", "eth1"): 400.0,
        ("node_network_rx_packets", "eth1"): 2.0,
        ("node_network_tx_packets", "eth1"): 4.0,
        ("node_network_rx_errors", "eth1"): 0.0,
        ("node_network_tx_errors", "eth1"): 0.0,
        ("node_network_rx_drops", "eth1"): 0.0,
        ("node_network_tx_drops", "eth1"): 0.0,
    }  # eth0's drop counter went backwards; new0 only primes; lo and the pod-side veth are skipped


def test_node_info(env: Env) -> None:
    env.host.write_topology({0: [0, 1], 1: [2]})
    env.host.write_node_meminfo(0, {"MemTotal": 1})
    env.host.write_node_meminfo(1, {"MemTotal": 2})
    c = NodeInfoCollector()
    assert c.interval_seconds == 60.0
    assert c.collect(env.ctx) == [] and c.started
    topo = env.ctx.kv.get(NODE_CPU_INFO)
    assert isinstance(topo, NodeTopology) and topo.numa_nodes == (0, 1)
    assert env.ctx.kv.get(NODE_NUMA_INFO) == {0: {"MemTotal": 1024}, 1: {"MemTotal": 2048}}


def test_node_info_without_meminfo_fails(env: Env) -> None:
    env.host.write_topology({0: [0]})
    with pytest.raises(OSError):
        NodeInfoCollector().collect(env.ctx)
