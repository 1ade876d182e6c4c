"""PodResourceCollector's and PodThrottledCollector's numpy rounds against their cgroup-by-cgroup rounds:
random sequences of ticks (clock steps forward, backward and past the 20-interval expiry; counters that
wrap at 2**64, go backwards or pass 2**53; a file missing or broken; pods leaving and coming back) give
the same samples, in the same order, and the same published totals."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agent.metricsadvisor import podresource, podthrottled
from agent.metricsadvisor.framework import PODS
from agent.metricsadvisor.podresource import PodResourceCollector
from agent.metricsadvisor.podthrottled import PodThrottledCollector
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


def _run(version: CgroupVersion, steps: list[tuple[str, Any]], vectorise: bool) -> list[object]:
    saved, podresource.VECTORISE = podresource.VECTORISE, vectorise
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = Env(HostTree(Path(tmp), version))
            metas, dirs = _three_pods(env)
            usage = dict.fromkeys(dirs, 0)
            for d in dirs:
                env.host.set_cpu_usage(d, 0)
                env.host.set_memory_stat(d, inactive_anon=1, active_anon=2, unevictable=3)
            collector = PodResourceCollector()
            seen: list[object] = []
            for op, arg in [("tick", 1.0), *steps, ("tick", 1.0)]:
                if op == "tick":
                    env.clock.advance(arg)
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
    finally:
        podresource.VECTORISE = saved


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(step_st, max_size=30))
@example(  # a counter that wraps past 2**64 between two reads
    steps=[("cpu", (0, U64 - 10**9)), ("tick", 1.0), ("cpu", (0, 2 * 10**9)), ("tick", 1.0)]
)
def test_numpy_round_equals_cgroup_by_cgroup(version: CgroupVersion, steps: list[tuple[str, Any]]) -> None:
    assert _run(version, steps, True) == _run(version, steps, False)


throttle_step_st = st.one_of(
    st.tuples(st.just("tick"), st.just(1.0)),
    st.tuples(
        st.just("stat"),
        st.tuples(st.integers(0, 5), st.integers(-3, 50), st.integers(-3, 60), st.sampled_from([0, 2**53])),
    ),
    st.tuples(st.just("break"), st.tuples(st.integers(0, 5), st.sampled_from(["gone", "bad"]))),
    st.tuples(st.just("leave"), st.integers(0, 2)),
)


def _run_throttled(version: CgroupVersion, steps: list[tuple[str, Any]], vectorise: bool) -> list[object]:
    saved, podthrottled.VECTORISE = podthrottled.VECTORISE, vectorise
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = Env(HostTree(Path(tmp), version))
            metas, dirs = _three_pods(env)
            counters = {d: [100, 10] for d in dirs}
            for d in dirs:
                env.host.set_cpu_stat(d, 100, 10, 0)
            collector = PodThrottledCollector()
            seen: list[object] = []
            for op, arg in [("tick", 1.0), *steps, ("tick", 1.0)]:
                if op == "tick":
                    env.clock.advance(arg)
                    seen.append(list(collector.collect(env.ctx)))
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
    finally:
        podthrottled.VECTORISE = saved


@pytest.mark.parametrize("version", [CgroupVersion.V1, CgroupVersion.V2])
@settings(max_examples=60, deadline=None)
@given(steps=st.lists(throttle_step_st, max_size=30))
def test_throttled_numpy_round_equals_cgroup_by_cgroup(
    version: CgroupVersion, steps: list[tuple[str, Any]]
) -> None:
    assert _run_throttled(version, steps, True) == _run_throttled(version, steps, False)
