"""HostApplicationCollector over the pods' round machinery: the same counter sequence read as a pod and as a
host application gives the same CPU rate and anon memory; an app whose usage (or memory.stat) file does not
read yields nothing that round but its CPU state moves on, while an unreadable CPU counter keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import HOST_APPS
from agent.metricsadvisor.hostapplication import HostApplicationCollector
from agent.metricsadvisor.podresource import PodResourceCollector
from agent.system import cgroup as cg
from apis.nodeslo import CgroupPath, HostApplicationSpec
from tests.unit.agent.metricsadvisor.conftest import Env, make_pod

U64 = 2**64


def _kv(samples: list[Sample]) -> dict[tuple[str, str], float]:
    return {(s.kind, next(iter(s.labels.values()))): s.value for s in samples}


def _at(cgroup_dir: str, name: str) -> HostApplicationSpec:
    return HostApplicationSpec(
        name=name, qos="LS", cgroup_path=CgroupPath(base="CgroupRoot", relative_path=cgroup_dir)
    )


def test_host_app_and_pod_give_the_same_rate(env: Env) -> None:
    meta = env.add_pod(make_pod("uid-same", "Burstable"))
    d = meta.cgroup_dir
    env.host_apps = [_at(d, "same")]
    env.host.set_memory_stat(d, inactive_anon=100, active_anon=20, unevictable=3, active_file=10**6)
    env.host.set_memory_usage(d, 10**7)
    pods, apps = PodResourceCollector(), HostApplicationCollector()
    # (counter ns, clock step s): a wrap past 2**64, a counter going back, a zero, a backward and a stale
    # step, an exact integer past 2**53.
    steps: list[tuple[int, float]] = [
        (0, 0.0),
        (10**9, 1.0),
        (U64 - 10**9, 1.0),
        (2 * 10**9, 1.0),
        (10**9, 0.5),
        (10**9, 0.0),
        (3 * 10**9, -1.0),
        (5 * 10**9, 2.0),
        (6 * 10**9, 25.0),
        (2**53 + 7, 1.0),
        (2**53 + 10**9 + 1, 1.0),
    ]
    rounds: list[tuple[Any, ...]] = []
    for counter, step in steps:
        env.host.set_cpu_usage(d, counter)
        env.clock.advance(step)
        pod, app = _kv(list(pods.collect(env.ctx))), _kv(apps.collect(env.ctx))
        pod_rate = (pod.get(("pod_cpu_usage", "uid-same")), pod.get(("pod_memory_usage", "uid-same")))
        app_rate = (
            app.get(("host_application_cpu_usage", "same")),
            app.get(("host_application_memory_usage", "same")),
        )
        assert app_rate == pod_rate
        rounds.append(app_rate)
    assert rounds[1] == (1.0, 123.0)
    # wrapped: 2**64 − 10**9 → 2·10**9 is 3·10**9 ns (v2 files hold µs: 2**64 − 10**9 is rounded down)
    assert rounds[3] == ((3.0 if env.v1 else pytest.approx(3.0)), 123.0)
    assert rounds[0] == rounds[5] == rounds[6] == rounds[8] == (None, None)  # first, Δwall ≤ 0, stale
    assert sum(r[0] is not None for r in rounds) == 7


def test_unreadable_memory_skips_the_app_but_moves_cpu_on(env: Env) -> None:
    env.policy = "usageWithPageCache"
    env.host_apps = [_at("apps/a", "a"), _at("apps/b", "b")]
    for d in ("apps/a", "apps/b"):
        env.host.mkdir(d)
        env.host.set_cpu_usage(d, 0)
        env.host.set_memory_stat(d, inactive_anon=100, active_anon=0, unevictable=0)
        env.host.set_memory_usage(d, 1000)
    c = HostApplicationCollector()
    assert c.collect(env.ctx) == []

    b_ns = [0]

    def step(a_ns: int | None, seconds: float) -> dict[tuple[str, str], float]:
        """a's counter to ``a_ns`` (None: left alone), b one core busy; the clock on by ``seconds``."""
        if a_ns is not None:
            env.host.set_cpu_usage("apps/a", a_ns)
        b_ns[0] += int(seconds * 1e9)
        env.host.set_cpu_usage("apps/b", b_ns[0])
        env.clock.advance(seconds)
        got = _kv(c.collect(env.ctx))
        assert got[("host_application_cpu_usage", "b")] == 1.0
        return got

    usage = env.host.path_of(cg.MEMORY_USAGE, "apps/a")
    usage.unlink()  # usage unreadable: a yields nothing and is not in the totals
    assert {k for k in step(10**9, 1.0) if k[1] == "a"} == set()
    total = env.ctx.shared.latest(HOST_APPS)
    assert total is not None and (total.cpu_cores, total.memory_bytes) == (1.0, 1000.0)
    env.host.set_memory_usage("apps/a", 1000)
    got = step(15 * 10**8, 1.0)  # over the last 1 s, not 2 s: a's CPU state moved on when usage failed
    assert got[("host_application_cpu_usage", "a")] == 0.5
    total = env.ctx.shared.latest(HOST_APPS)
    assert total is not None and (total.cpu_cores, total.memory_bytes) == (1.5, 2000.0)

    usage.write_text("garbage\n")  # a bad usage file is the same
    assert {k for k in step(2 * 10**9, 1.0) if k[1] == "a"} == set()
    env.host.set_memory_usage("apps/a", 1000)
    assert step(3 * 10**9, 1.0)[("host_application_cpu_usage", "a")] == 1.0

    env.host.path_of(cg.MEMORY_STAT, "apps/a").unlink()  # memory.stat unreadable: the same
    assert {k for k in step(4 * 10**9, 1.0) if k[1] == "a"} == set()
    env.host.set_memory_stat("apps/a", inactive_anon=100, active_anon=0, unevictable=0)
    assert step(45 * 10**8, 1.0)[("host_application_cpu_usage", "a")] == 0.5

    cpu = env.host.path_of(cg.CPU_USAGE, "apps/a")
    cpu.unlink()  # CPU unreadable: a yields nothing and its state is kept
    assert {k for k in step(None, 1.0) if k[1] == "a"} == set()
    got = step(65 * 10**8, 1.0)  # a: 4.5 s → 6.5 s over 2 s
    assert got[("host_application_cpu_usage", "a")] == 1.0
    total = env.ctx.shared.latest(HOST_APPS)
    assert total is not None and (total.cpu_cores, total.memory_bytes) == (2.0, 2000.0)
