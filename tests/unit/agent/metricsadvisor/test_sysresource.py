"""SystemResourceCollector: node − pods − host apps, clamped at 0, NUMA split, stale guard, start rules;
and HostApplicationCollector: NodeSLO gating, cgroup dirs, values, published totals."""

from __future__ import annotations

import pytest

from agent.metriccache.cache import Sample
from agent.metricsadvisor.framework import HOST_APPS, NODE, PODS, Totals
from agent.metricsadvisor.hostapplication import HostApplicationCollector, host_app_cgroup_dir
from agent.metricsadvisor.sysresource import SystemResourceCollector, system_usage
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import CgroupPath, HostApplicationSpec
from tests.unit.agent.metricsadvisor.conftest import T0, Env

S = 1_000_000_000
OUT = 10 * S


def _kv(samples: list[Sample]) -> dict[tuple[str, str], float]:
    return {
        (s.kind, s.labels.get("numa_node_id", s.labels.get("host_app_name", ""))): s.value for s in samples
    }


def test_system_usage_pure() -> None:
    node = Totals(4.0, 1000.0, T0, {0: 1.0, 1: 3.0}, {0: 600.0, 1: 400.0})
    pods = Totals(1.5, 300.0, T0, {}, {0: 100.0, 1: 500.0})
    apps = Totals(0.5, 100.0, T0)
    got = system_usage(node, pods, apps, T0 + OUT, OUT)
    assert got is not None
    assert (got.cpu, got.memory) == (2.0, 600.0)
    assert got.numa_cpu == {0: 0.5, 1: 1.5}  # system CPU × NUMA share
    assert got.numa_memory == {0: 500.0, 1: 0.0}  # clamped, host apps not excluded


def test_clamped_at_zero_and_zero_numa_sum() -> None:
    node = Totals(1.0, 100.0, T0, {0: 0.0}, {})
    got = system_usage(node, Totals(2.0, 500.0, T0), Totals(0.0, 0.0, T0), T0, OUT)
    assert got is not None and (got.cpu, got.memory, got.numa_cpu) == (0.0, 0.0, {0: 0.0})


@pytest.mark.parametrize("stale", [NODE, PODS, HOST_APPS])
def test_stale_guard(stale: str) -> None:
    fresh = {src: Totals(1.0, 1.0, T0 + 5 * S) for src in (NODE, PODS, HOST_APPS)}
    fresh[stale] = Totals(1.0, 1.0, T0 - 1)
    now = T0 + OUT
    assert system_usage(fresh[NODE], fresh[PODS], fresh[HOST_APPS], now, OUT) is None
    fresh[stale] = Totals(1.0, 1.0, T0)  # exactly 10 s old is still fresh
    assert system_usage(fresh[NODE], fresh[PODS], fresh[HOST_APPS], now, OUT) is not None


def test_collector_waits_for_all_three(env: Env) -> None:
    c = SystemResourceCollector()
    shared = env.ctx.shared
    shared.publish(NODE, Totals(3.0, 900.0, env.clock.ns))
    shared.publish(PODS, Totals(1.0, 100.0, env.clock.ns))
    assert c.collect(env.ctx) == [] and not c.started  # no host-app total: no NodeSLO yet
    shared.publish(HOST_APPS, Totals(0.5, 50.0, env.clock.ns))
    env.clock.advance(3.0)
    got = _kv(c.collect(env.ctx))
    assert got == {("sys_cpu_usage", ""): 1.5, ("sys_memory_usage", ""): 750.0}
    assert c.started
    env.clock.advance(7.5)
    assert c.collect(env.ctx) == []  # now 10.5 s old


def _app(name: str, qos: str | None = "LS", path: CgroupPath | None = None) -> HostApplicationSpec:
    return HostApplicationSpec(name=name, qos=qos, cgroup_path=path)


@pytest.mark.parametrize(
    ("app", "driver", "expected"),
    [
        (_app("nginx", "LS"), CgroupDriver.CGROUPFS, "host-latency-sensitive/nginx/"),
        (_app("nginx", "LSR"), CgroupDriver.SYSTEMD, "host-latency-sensitive/nginx/"),
        (_app("spark", "BE"), CgroupDriver.CGROUPFS, "host-best-effort/spark/"),
        (_app("x", None), CgroupDriver.CGROUPFS, "x/"),
        (
            _app("a", "BE", CgroupPath(base="CgroupRoot", parent_dir="p/", relative_path="r")),
            CgroupDriver.SYSTEMD,
            "p/r/",
        ),
        (
            _app("a", "BE", CgroupPath(base="KubepodsBesteffort", parent_dir="host", relative_path="a")),
            CgroupDriver.CGROUPFS,
            "kubepods/besteffort/host/a/",
        ),
        (
            _app("a", "LS", CgroupPath(base="KubepodsBurstable", relative_path="a")),
            CgroupDriver.SYSTEMD,
            "kubepods.slice/kubepods-burstable.slice/a/",
        ),
        (
            _app("a", "LS", CgroupPath(base="Kubepods", relative_path="a")),
            CgroupDriver.SYSTEMD,
            "kubepods.slice/a/",
        ),
    ],
)
def test_host_app_dir(app: HostApplicationSpec, driver: CgroupDriver, expected: str) -> None:
    assert host_app_cgroup_dir(app, driver) == expected


@pytest.mark.parametrize("policy", [None, "usageWithPageCache"])
def test_host_app_collector(env: Env, policy: str | None) -> None:
    env.policy = policy
    c = HostApplicationCollector()
    assert c.collect(env.ctx) == [] and not c.started
    assert env.ctx.shared.latest(HOST_APPS) is None
    env.host_apps = [_app("nginx"), _app("gone")]
    d = "host-latency-sensitive/nginx/"
    env.host.mkdir(d)
    env.host.set_cpu_usage(d, 1_000_000_000)
    env.host.set_memory_stat(d, inactive_anon=100, active_anon=200, unevictable=0, active_file=5000)
    env.host.set_memory_usage(d, 9000)
    assert c.collect(env.ctx) == [] and c.started  # first observation skipped, but a zero total is published
    published = env.ctx.shared.latest(HOST_APPS)
    assert published is not None and published.cpu_cores == 0.0
    env.host.set_cpu_usage(d, 1_250_000_000)
    env.clock.advance(1.0)
    got = _kv(c.collect(env.ctx))
    assert got == {
        ("host_application_cpu_usage", "nginx"): 0.25,
        ("host_application_memory_usage", "nginx"): 300.0,
        ("host_application_memory_usage_with_page_cache", "nginx"): 9000.0,
    }
    total = env.ctx.shared.latest(HOST_APPS)
    assert total is not None and total.cpu_cores == 0.25
    assert total.memory_bytes == (9000.0 if policy == "usageWithPageCache" else 300.0)
