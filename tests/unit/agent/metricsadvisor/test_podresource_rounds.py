"""PodResourceCollector (its rounds computed over numpy columns) and PodThrottledCollector against oracles
that state their rules cgroup by cgroup in Python integers, reading each file with the strict parser: random
sequences of ticks (clock steps forward, backward and past the 20-interval expiry; counters that wrap at
2**64, go backwards or pass 2**53; a file missing or broken; pods leaving and coming back) give the same
samples, in the same order, and the same published totals."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import PODS, udelta
from agent.metricsadvisor.podresource import PodResourceCollector, usage_cores
from agent.metricsadvisor.podthrottled import PodThrottledCollector, throttle_ratio
from agent.podmeta import PodMeta
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.metricsadvisor.conftest import Env, make_pod

U64 = 2**64
step_st = st.one_of(
    st.tuples(st.just("tick"), st.sampled_from([1.0, 1.0, 0.5, 2.0, 0.0, -1.0, 25.0])),
    st.tuples(
        st.just("cpu"), st.tuples(st.integers(0, 5), st.sampled_from([10**8, 3 * 10**9, U64 - 10**9, 0]))
    ),
    st.tuples(st.just("mem"), st.tuples(st.integers(0, 5), st.integers(0, 10**12))),
    st.tuples(st.just("break"), st.tuples(st.integers(0, 5), st.sampled_from(["usage", "mem", "bad"]))),
    st.tuples(st.just("leave"), st.integers(0, 2)),
)


def _three_pods(env: Env) -> tuple[list[PodMeta], list[str]]:
    """Three pods of one or two containers; their cgroup dirs, pods first."""
    metas = [
        env.add_pod(make_pod(f"uid-{i}", "Burstable", [f"c{i}a", f"c{i}b"][: 1 + i % 2])) for i in range(3)
    ]
    return metas, [d for m in metas for d in (m.cgroup_dir, *(c.cgroup_dir for c in m.containers))]


def _leave_or_return(env: Env, meta: PodMeta) -> None:
    if meta in env.pods.metas:
        env.pods.metas.remove(meta)
    else:
        env.pods.metas.append(meta)


class _UsageOracle:
    """docs/rules/koordlet.md#collectors, cgroup by cgroup: each pod, then its containers; a cgroup whose CPU
    counter reads moves its state on, and yields CPU then memory samples when its memory reads too and its
    last counter is fresh (seen, older than this read, at most 20 intervals old). Totals: the counted pods."""

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], tuple[int, int]] = {}  # (uid or container id, dir) → (ns, wall)

    def collect(self, env: Env) -> tuple[list[Sample], float, float]:
        root, version = env.host.paths.cgroup_root, env.host.version
        samples: list[Sample] = []
        total_cpu, total_mem = 0.0, 0
        last, self.last = self.last, {}
        for pod in env.pods.pods():
            members = [(pod.uid, pod.cgroup_dir, True)]
            members += [(c.container_id, c.cgroup_dir, False) for c in pod.containers]
            for name, cgroup_dir, is_pod in members:
                wall = env.clock()
                try:
                    cur = cg.read_cgroup(root, version, cg.CPU_USAGE, cgroup_dir)
                except (OSError, ValueError):
                    if (name, cgroup_dir) in last:
                        self.last[(name, cgroup_dir)] = last[(name, cgroup_dir)]
                    continue
                self.last[(name, cgroup_dir)] = (cur, wall)
                try:
                    anon = cg.read_cgroup(root, version, cg.MEMORY_STAT, cgroup_dir).usage_anon
                except (OSError, ValueError):
                    continue
                before = last.get((name, cgroup_dir))
                if before is None or not 0 < wall - before[1] <= 20 * 10**9:
                    continue
                cpu = usage_cores(udelta(cur, before[0]), wall - before[1])
                labels = {"pod_uid": name} if is_pod else {"container_id": name}
                kinds = ("pod_cpu_usage", "pod_memory_usage") if is_pod else _CONTAINER_KINDS
                samples.append(Sample(kinds[0], labels, wall // 10**6, cpu))
                samples.append(Sample(kinds[1], labels, wall // 10**6, float(anon)))
                if is_pod:
                    total_cpu += cpu
                    total_mem += anon
        return samples, total_cpu, float(total_mem)


_CONTAINER_KINDS = ("container_cpu_usage", "container_memory_usage")


def _run(version: CgroupVersion, steps: list[tuple[str, Any]], oracle: bool) -> list[object]:
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(HostTree(Path(tmp), version))
        metas, dirs = _three_pods(env)
        usage = dict.fromkeys(dirs, 0)
        for d in dirs:
            env.host.set_cpu_usage(d, 0)
            env.host.set_memory_stat(d, inactive_anon=1, active_anon=2, unevictable=3)
        collector, rule = PodResourceCollector(), _UsageOracle()
        seen: list[object] = []
        for op, arg in [("tick", 1.0), *steps, ("tick", 1.0)]:
            if op == "tick":
                env.clock.advance(arg)
                if oracle:
                    seen.append(rule.collect(env))
                    continue
                batch = collector.collect(env.ctx)
                totals = env.ctx.shared.latest(PODS)
                seen.append((list(batch), totals.cpu_cores, totals.memory_bytes))  # type: ignore[union-attr]
            elif op == "cpu":
                d = dirs[arg[0] % len(dirs)]
                usage[d] = (usage[d] + arg[1]) % U64
                env.host.set_cpu_usage(d, usage[d])
            elif op == "mem":
                env.host.set_memory_stat(
                    dirs[arg[0] % len(dirs)], inactive_anon=arg[1], active_anon=7, unevictable=0
                )
            elif op == "break":
                d, how = dirs[arg[0] % len(dirs)], arg[1]
                spec = cg.CPU_USAGE if how == "usage" else cg.MEMORY_STAT
                if how == "bad":
                    env.host.path_of(spec, d).write_text("garbage\n")
                else:
                    env.host.path_of(spec, d).unlink(missing_ok=True)
            else:  # a pod leaves, or comes back
                _leave_or_return(env, metas[arg])
        return seen


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(step_st, max_size=30))
@example(  # a counter that wraps past 2**64 between two reads
    steps=[("cpu", (0, U64 - 10**9)), ("tick", 1.0), ("cpu", (0, 2 * 10**9)), ("tick", 1.0)]
)
@example(steps=[("break", (0, "usage")), ("tick", 1.0), ("cpu", (0, 10**8)), ("tick", 1.0)])  # CPU state kept
@example(steps=[("break", (1, "mem")), ("tick", 1.0), ("mem", (1, 5)), ("cpu", (1, 10**8)), ("tick", 1.0)])
@example(steps=[("break", (2, "bad")), ("tick", 1.0), ("cpu", (2, 10**8)), ("tick", 1.0)])
@example(
    steps=[("leave", 0), ("tick", 1.0), ("leave", 0), ("tick", 1.0), ("cpu", (0, 10**8))]
)  # state forgotten
@example(
    steps=[("cpu", (3, 10**8)), ("tick", 25.0), ("cpu", (3, 10**8)), ("tick", 0.0), ("tick", -1.0)]
)  # stale
def test_pod_resource_follows_the_oracle(version: CgroupVersion, steps: list[tuple[str, Any]]) -> None:
    assert _run(version, steps, False) == _run(version, steps, True)


throttle_step_st = st.one_of(
    st.tuples(st.just("tick"), st.just(1.0)),
    st.tuples(
        st.just("stat"),
        st.tuples(st.integers(0, 5), st.integers(-3, 50), st.integers(-3, 60), st.sampled_from([0, 2**53])),
    ),
    st.tuples(st.just("break"), st.tuples(st.integers(0, 5), st.sampled_from(["gone", "bad"]))),
    st.tuples(st.just("leave"), st.integers(0, 2)),
)


class _ThrottleOracle:
    """Each cgroup whose ``cpu.stat`` reads moves its state on and, after its first read, yields
    ``throttle_ratio``; one timestamp for the round."""

    def __init__(self) -> None:
        self.last: dict[tuple[str, str], cg.CpuStat] = {}

    def collect(self, env: Env) -> list[Sample]:
        root, version = env.host.paths.cgroup_root, env.host.version
        ts = env.clock() // 10**6
        samples: list[Sample] = []
        last, self.last = self.last, {}
        for pod in env.pods.pods():
            members = [(pod.uid, pod.cgroup_dir, True)]
            members += [(c.container_id, c.cgroup_dir, False) for c in pod.containers]
            for name, cgroup_dir, is_pod in members:
                before = last.get((name, cgroup_dir))
                try:
                    cur = cg.read_cgroup(root, version, cg.CPU_STAT, cgroup_dir)
                except (OSError, ValueError):
                    if before is not None:
                        self.last[(name, cgroup_dir)] = before
                    continue
                self.last[(name, cgroup_dir)] = cur
                if before is not None:
                    kind, labels = (
                        ("pod_cpu_throttled", {"pod_uid": name})
                        if is_pod
                        else ("container_cpu_throttled", {"container_id": name})
                    )
                    samples.append(Sample(kind, labels, ts, throttle_ratio(before, cur)))
        return samples


def _run_throttled(version: CgroupVersion, steps: list[tuple[str, Any]], oracle: bool) -> list[object]:
    with tempfile.TemporaryDirectory() as tmp:
        env = Env(HostTree(Path(tmp), version))
        metas, dirs = _three_pods(env)
        counters = {d: [100, 10] for d in dirs}
        for d in dirs:
            env.host.set_cpu_stat(d, 100, 10, 0)
        collector, rule = PodThrottledCollector(), _ThrottleOracle()
        seen: list[object] = []
        for op, arg in [("tick", 1.0), *steps, ("tick", 1.0)]:
            if op == "tick":
                env.clock.advance(arg)
                seen.append(rule.collect(env) if oracle else list(collector.collect(env.ctx)))
            elif op == "stat":
                d = dirs[arg[0] % len(dirs)]
                counters[d][0] += arg[1] + arg[3]
                counters[d][1] += arg[2]
                env.host.set_cpu_stat(d, counters[d][0], counters[d][1], 0)
            elif op == "break":
                path = env.host.path_of(cg.CPU_STAT, dirs[arg[0] % len(dirs)])
                if arg[1] == "bad":
                    path.write_text("nr_periods x\n")
                else:
                    path.unlink(missing_ok=True)
            else:
                _leave_or_return(env, metas[arg])
        return seen


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(throttle_step_st, max_size=30))
@example(steps=[("break", (0, "gone")), ("tick", 1.0), ("stat", (0, 5, 1, 0)), ("tick", 1.0)])  # state kept
@example(steps=[("break", (1, "bad")), ("tick", 1.0), ("stat", (1, 5, 1, 0)), ("tick", 1.0)])
@example(steps=[("stat", (2, 3, 2, 2**53)), ("tick", 1.0), ("stat", (2, 1, 1, 0)), ("tick", 1.0)])
@example(steps=[("leave", 1), ("tick", 1.0), ("leave", 1), ("tick", 1.0), ("stat", (1, -3, 4, 0))])
def test_pod_throttled_follows_the_oracle(version: CgroupVersion, steps: list[tuple[str, Any]]) -> None:
    assert _run_throttled(version, steps, False) == _run_throttled(version, steps, True)
