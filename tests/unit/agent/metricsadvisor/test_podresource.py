"""PodResourceCollector and PodThrottledCollector on known counter sequences."""

from __future__ import annotations

from agent.metriccache.cache import Sample
from agent.metriccache.kv import NODE_CPU_INFO
from agent.metricsadvisor.framework import PODS
from agent.metricsadvisor.podresource import PodResourceCollector, usage_cores
from agent.metricsadvisor.podthrottled import PodThrottledCollector, throttle_ratio
from agent.system.cgroup import CpuStat
from agent.system.nodeinfo import NodeTopology
from tests.unit.agent.metricsadvisor.conftest import Env, make_pod

UID_A, UID_B = "aaaa-1111", "bbbb-2222"


def _by(samples: list[Sample]) -> dict[tuple[str, str], float]:
    return {(s.kind, next(iter(s.labels.values()))): s.value for s in samples}


def _setup(env: Env) -> None:
    a = env.add_pod(make_pod(UID_A, "Burstable", ["ca1", "ca2"]))
    b = env.add_pod(make_pod(UID_B, "BestEffort", ["cb1"]))
    for d in (a.cgroup_dir, b.cgroup_dir, *(c.cgroup_dir for c in a.containers + b.containers)):
        env.host.set_cpu_usage(d, 0)
        env.host.set_memory_stat(d, inactive_anon=1000, active_anon=2000, unevictable=30, active_file=10**6)


def test_usage_formula() -> None:
    assert usage_cores(250_000_000, 500_000_000) == 0.5


def test_first_observation_skipped_then_exact(env: Env) -> None:
    _setup(env)
    a, b = env.pods.metas
    c = PodResourceCollector()
    assert c.collect(env.ctx) == []
    assert c.started
    first = env.ctx.shared.latest(PODS)
    assert first is not None and first.cpu_cores == 0 and first.memory_bytes == 0
    env.host.set_cpu_usage(a.cgroup_dir, 1_500_000_000)  # 1.5 s of CPU in 2 s → 0.75 cores
    env.host.set_cpu_usage(a.containers[0].cgroup_dir, 1_000_000_000)
    env.host.set_cpu_usage(b.cgroup_dir, 400_000_000)
    env.host.set_memory_stat(a.cgroup_dir, inactive_anon=10, active_anon=20, unevictable=3, inactive_file=999)
    env.clock.advance(2.0)
    got = _by(c.collect(env.ctx))
    assert got[("pod_cpu_usage", UID_A)] == 0.75
    assert got[("pod_memory_usage", UID_A)] == 33.0  # anon only, page cache excluded
    assert got[("pod_cpu_usage", UID_B)] == 0.2
    assert got[("pod_memory_usage", UID_B)] == 3030.0
    assert got[("container_cpu_usage", "ca1")] == 0.5
    assert got[("container_cpu_usage", "ca2")] == 0.0
    assert got[("container_memory_usage", "cb1")] == 3030.0
    assert len(got) == 10
    totals = env.ctx.shared.latest(PODS)
    assert totals is not None
    assert totals.cpu_cores == 0.95 and totals.memory_bytes == 33 + 3030
    assert totals.timestamp_ns == env.clock.ns


def test_missing_memory_key_skips_pod_from_totals(env: Env) -> None:
    _setup(env)
    b = env.pods.metas[1]
    c = PodResourceCollector()
    c.collect(env.ctx)
    env.host.set_memory_stat(b.cgroup_dir, inactive_anon=1, omit="unevictable")
    env.host.set_cpu_usage(b.cgroup_dir, 10**9)
    env.clock.advance(1.0)
    got = _by(c.collect(env.ctx))
    assert ("pod_cpu_usage", UID_B) not in got and ("pod_memory_usage", UID_B) not in got
    assert ("container_cpu_usage", "cb1") in got  # containers are independent
    totals = env.ctx.shared.latest(PODS)
    assert totals is not None and totals.cpu_cores == 0.0 and totals.memory_bytes == 3030


def test_new_pod_and_forgotten_pod(env: Env) -> None:
    _setup(env)
    c = PodResourceCollector()
    c.collect(env.ctx)
    gone = env.pods.metas.pop()  # pod B disappears
    env.clock.advance(1.0)
    assert {k[1] for k in _by(c.collect(env.ctx))} == {UID_A, "ca1", "ca2"}
    env.pods.metas.append(gone)  # back again: a first observation, skipped
    env.clock.advance(1.0)
    assert UID_B not in {k[1] for k in _by(c.collect(env.ctx))}
    env.clock.advance(1.0)
    assert ("pod_cpu_usage", UID_B) in _by(c.collect(env.ctx))


def test_state_expires_after_20_intervals(env: Env) -> None:
    _setup(env)
    c = PodResourceCollector(interval_seconds=1.0)
    c.collect(env.ctx)
    env.clock.advance(21.0)
    assert c.collect(env.ctx) == []  # too old: a fresh first observation
    env.clock.advance(20.0)
    assert len(c.collect(env.ctx)) == 10


def test_pod_numa_memory_when_topology_known(env: Env) -> None:
    _setup(env)
    a, b = env.pods.metas
    env.host.set_numa_stat(a.cgroup_dir, {0: 10, 1: 5})
    env.host.set_numa_stat(b.cgroup_dir, {0: 1})
    c = PodResourceCollector()
    c.collect(env.ctx)
    env.clock.advance(1.0)
    c.collect(env.ctx)
    totals = env.ctx.shared.latest(PODS)
    assert totals is not None and dict(totals.numa_memory_bytes) == {}  # no topology yet: not read
    env.ctx.kv.set(NODE_CPU_INFO, NodeTopology((), (0, 1)))
    env.clock.advance(1.0)
    c.collect(env.ctx)
    totals = env.ctx.shared.latest(PODS)
    assert totals is not None and dict(totals.numa_memory_bytes) == {0: 11 * 4096.0, 1: 5 * 4096.0}


def test_throttle_ratio() -> None:
    assert throttle_ratio(CpuStat(10, 2, 0), CpuStat(20, 7, 0)) == 0.5
    assert throttle_ratio(CpuStat(10, 2, 0), CpuStat(10, 2, 0)) == 0.0


def test_throttled_collector(env: Env) -> None:
    _setup(env)
    a, b = env.pods.metas
    dirs = [a.cgroup_dir, b.cgroup_dir, *(c.cgroup_dir for c in a.containers + b.containers)]
    for d in dirs:
        env.host.set_cpu_stat(d, 100, 10, 0)
    c = PodThrottledCollector()
    assert c.collect(env.ctx) == []
    env.host.set_cpu_stat(a.cgroup_dir, 110, 14, 5000)
    env.host.set_cpu_stat(a.containers[0].cgroup_dir, 200, 35, 0)
    env.clock.advance(1.0)
    got = _by(c.collect(env.ctx))
    assert got[("pod_cpu_throttled", UID_A)] == 0.4
    assert got[("container_cpu_throttled", "ca1")] == 0.25
    assert got[("pod_cpu_throttled", UID_B)] == 0.0  # no period elapsed
    assert len(got) == 5
    # a container whose cgroup vanished is skipped, the rest continue
    env.host.path_of(__import__("agent.system.cgroup", fromlist=["CPU_STAT"]).CPU_STAT, b.cgroup_dir).unlink()
    env.clock.advance(1.0)
    got = _by(c.collect(env.ctx))
    assert ("pod_cpu_throttled", UID_B) not in got and len(got) == 4
