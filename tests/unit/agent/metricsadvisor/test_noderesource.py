"""NodeResourceCollector: first-sample priming, node CPU from /proc/stat busy ticks, memory, per-NUMA."""

from __future__ import annotations

import pytest

from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import NODE
from agent.metricsadvisor.nodeinfo import NodeInfoCollector
from agent.metricsadvisor.noderesource import NodeResourceCollector, cpu_usage_cores, numa_cpu_usage
from tests.unit.agent.metricsadvisor.conftest import Env

MEM = {"MemTotal": 1000, "MemFree": 100, "MemAvailable": 300}


def _values(samples: list) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:  # type: ignore[type-arg]
    return {(s.kind, tuple(sorted(s.labels.items()))): s.value for s in samples}


def test_pure_formulas() -> None:
    # 150 ticks of 10 ms in 1 s = 1.5 cores
    assert cpu_usage_cores(150, 1_000_000_000, 10_000_000) == 1.5
    got = numa_cpu_usage(
        {0: 100, 1: 100, 2: 100, 3: 500},
        {0: 150, 1: 200, 2: 130, 3: 400, 4: 999},
        {0: 0, 1: 0, 2: 1, 3: 1},
        (0, 1),
        2_000_000_000,
        10_000_000,
    )
    # node 0: 50 + 100 ticks over 2 s → 0.75; node 1: cpu3 decreased (skipped), cpu2 +30 → 0.15; cpu4 no NUMA
    assert got == pytest.approx({0: 0.75, 1: 0.15})


def test_first_tick_primes_then_exact(env: Env) -> None:
    host, ctx = env.host, env.ctx
    host.write_proc_stat([100, 10, 50, 1000, 40, 5, 5, 7])
    host.write_meminfo(MEM)
    c = NodeResourceCollector()
    assert c.collect(ctx) == []
    assert c.started
    assert ctx.shared.latest(NODE) is None  # nothing published on the priming tick
    # busy += user 100 + nice 20 + system 30 + irq 10 + softirq 40 = 200 ticks; idle/iowait/steal ignored
    host.write_proc_stat([200, 30, 80, 5000, 900, 15, 45, 99])
    host.write_meminfo({**MEM, "MemAvailable": 250})
    env.clock.advance(2.0)
    got = _values(c.collect(ctx))
    assert got == {("node_cpu_usage", ()): 1.0, ("node_memory_usage", ()): 750 * 1024.0}
    totals = ctx.shared.latest(NODE)
    assert totals is not None and totals.cpu_cores == 1.0 and totals.memory_bytes == 750 * 1024


def test_unsigned_delta_on_decrease(env: Env) -> None:
    env.host.write_proc_stat([100, 0, 0, 0])
    env.host.write_meminfo(MEM)
    c = NodeResourceCollector()
    c.collect(env.ctx)
    env.host.write_proc_stat([99, 0, 0, 0])
    env.clock.advance(1.0)
    cpu = _values(c.collect(env.ctx))[("node_cpu_usage", ())]
    assert cpu == float(2**64 - 1) / 100.0  # Go uint64 wrap, as upstream


def test_per_numa_after_node_info(env: Env) -> None:
    host, ctx = env.host, env.ctx
    host.write_topology({0: [0, 1], 1: [2, 3]})
    for node in (0, 1):
        host.write_node_meminfo(
            node,
            {
                "MemTotal": 1000,
                "MemFree": 100 * (node + 1),
                "Active(file)": 10,
                "Inactive(file)": 20,
                "SReclaimable": 30,
            },
        )
    host.write_meminfo(MEM)
    host.write_proc_stat([0] * 8, [[0] * 8] * 4)
    c = NodeResourceCollector()
    c.collect(ctx)
    host.write_proc_stat([400] + [0] * 7, [[100] + [0] * 7] * 4)
    env.clock.advance(1.0)
    got = _values(c.collect(ctx))
    assert not any(k[0].startswith("node_numa") for k in got)  # no CPU info in the KV store yet
    NodeInfoCollector().collect(ctx)
    assert ctx.kv.get(NODE_CPU_INFO) is not None
    host.write_proc_stat(
        [700] + [0] * 7, [[150] + [0] * 7, [150] + [0] * 7, [200] + [0] * 7, [200] + [0] * 7]
    )
    env.clock.advance(1.0)
    got = _values(c.collect(ctx))
    assert got[("node_cpu_usage", ())] == 3.0
    assert got[("node_numa_cpu_usage", (("numa_node_id", "0"),))] == 1.0
    assert got[("node_numa_cpu_usage", (("numa_node_id", "1"),))] == 2.0
    assert got[("node_numa_memory_usage", (("numa_node_id", "0"),))] == (1000 - 160) * 1024.0
    assert got[("node_numa_memory_usage", (("numa_node_id", "1"),))] == (1000 - 260) * 1024.0
    totals = ctx.shared.latest(NODE)
    assert totals is not None and dict(totals.numa_cpu_cores) == {0: 1.0, 1: 2.0}


def test_unreadable_proc_fails_round(env: Env) -> None:
    c = NodeResourceCollector()
    with pytest.raises(OSError):
        c.collect(env.ctx)
    assert not c.started
