"""BEResourceCollector: request, real-limit cases, usage arithmetic, first round, read errors and vanished
container cgroups."""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from agent.metriccache.cache import MetricCache, Sample
from agent.metricsadvisor import beresource
from agent.metricsadvisor.beresource import (
    BEResourceCollector,
    be_real_limit_milli,
    be_request_milli,
    be_usage_milli,
)
from agent.metricsadvisor.runner import CollectorRunner
from agent.system import cgroup as cg
from agent.system import readers
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from tests.unit.agent.metricsadvisor.conftest import Env, make_pod

BATCH = "kubernetes.io/batch-cpu"


def _be_pod(
    uid: str,
    requests: list[str | None],
    init: Sequence[tuple[str, str | None]] = (),
    cids: Sequence[str] = (),
) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "resources": {"requests": {BATCH: r}} if r is not None else {}}
        for i, r in enumerate(requests)
    ]
    inits = [
        {"name": f"i{i}", "restartPolicy": policy, "resources": {"requests": {BATCH: r}}}
        for i, (policy, r) in enumerate(init)
    ]
    return make_pod(
        uid,
        "BestEffort",
        cids,
        labels={"koordinator.sh/qosClass": "BE"},
        spec={"containers": containers, "initContainers": inits},
    )


def test_request() -> None:
    pods = [
        _be_pod("a", ["500", "250", None], init=[("Always", "100"), ("OnFailure", "1000")]),
        _be_pod("b", ["-300", "1"]),  # negative → 0
        make_pod(
            "c", "BestEffort", spec={"containers": [{"resources": {"requests": {BATCH: "9999"}}}]}
        ),  # not BE
    ]
    assert be_request_milli(pods) == 500 + 250 + 100 + 0 + 1


@pytest.mark.parametrize(
    ("sizes", "quota", "period", "expected"),
    [
        ([8, 4, 6], -1, 100000, 4000),  # smallest cpuset, no quota
        ([8], 250000, 100000, 2500),  # quota below cpuset
        ([2], 250000, 100000, 2000),  # cpuset below quota
        ([8], 33333, 100000, 333),  # int64 division truncates (333.33)
        ([0, 8], -1, 100000, 0),  # an empty cpuset
    ],
)
def test_real_limit(sizes: list[int], quota: int, period: int, expected: int) -> None:
    assert be_real_limit_milli(sizes, quota, period) == expected


def test_usage_arithmetic() -> None:
    # 1_999_999 ns → 1 ms (truncated); wall 1_999_999_999 ns → 1999 ms; 1/1999*1000 = 0.50… → 0
    assert be_usage_milli(1_999_999, 0, 1_999_999_999) == 0
    # 2.5 s CPU over 1.0009 s wall (1000 ms) → 2500
    assert be_usage_milli(3_500_000_999, 1_000_000_000, 1_000_900_000) == 2500
    assert be_usage_milli(5, 10, 1_000_000_000) == int(float((5 - 10) % 2**64 // 1_000_000) / 1000.0 * 1000)
    assert be_usage_milli(10, 0, 999_999) == 0  # < 1 ms of wall: no division by zero


def _values(samples: list[Sample]) -> dict[str, float]:
    assert len({s.timestamp_ms for s in samples}) == 1
    assert all(s.kind == "node_be" and s.labels["be_resource"] == "cpu" for s in samples)
    return {s.labels["be_allocation"]: s.value for s in samples}


def test_collector(env: Env) -> None:
    host = env.host
    be_dir = qos_cgroup_dir(host.driver, KubeQOS.BESTEFFORT)
    meta = env.add_pod(_be_pod("uid-be", ["700", "300"], cids=["be1", "be2"]))
    env.add_pod(make_pod("uid-ls", "Burstable", ["ls1"]))  # not in the cpuset minimum
    pod = _be_pod("uid-be2", ["1"])
    pod["status"]["containerStatuses"] = [{"name": "c0", "containerID": "docker://be2c0"}]
    meta2 = env.add_pod(pod)
    assert len(meta.containers) == 2 and len(meta2.containers) == 1
    host.set_cpuset(be_dir, "0-7")
    host.set_cpuset(meta.containers[0].cgroup_dir, "0-3")
    host.set_cpuset(meta.containers[1].cgroup_dir, "0-5")
    host.set_cpuset(meta2.containers[0].cgroup_dir, "0-2,4-6")
    host.set_cpu_limit(be_dir, -1)
    host.set_cpu_usage(be_dir, 10_000_000_000)
    c = BEResourceCollector()
    first = _values(c.collect(env.ctx))
    assert first == {"request": 1001.0, "real-limit": 4000.0, "usage": 0.0}  # first round: usage 0, stored
    assert c.started
    host.set_cpu_limit(be_dir, 350000, 100000)
    host.set_cpu_usage(be_dir, 13_000_000_000)  # 3 s of CPU in 2 s → 1500 milli
    env.clock.advance(2.0)
    assert _values(c.collect(env.ctx)) == {"request": 1001.0, "real-limit": 3500.0, "usage": 1500.0}


def test_no_be_pods_still_reports(env: Env) -> None:
    be_dir = qos_cgroup_dir(env.host.driver, KubeQOS.BESTEFFORT)
    env.host.set_cpuset(be_dir, "0-1")
    env.host.set_cpu_limit(be_dir, -1)
    env.host.set_cpu_usage(be_dir, 0)
    assert _values(BEResourceCollector().collect(env.ctx)) == {
        "request": 0.0,
        "real-limit": 2000.0,
        "usage": 0.0,
    }


def test_read_error_aborts_round(env: Env) -> None:
    be_dir = qos_cgroup_dir(env.host.driver, KubeQOS.BESTEFFORT)
    env.host.set_cpuset(be_dir, "0-1")
    env.host.set_cpu_usage(be_dir, 0)  # quota missing
    c = BEResourceCollector()
    with pytest.raises(OSError):
        c.collect(env.ctx)
    assert not c.started
    env.host.set_cpu_limit(be_dir, -1)
    assert len(c.collect(env.ctx)) == 3
    env.add_pod(make_pod("y", "BestEffort", ["nocpuset"]))  # a BE container dir without a cpuset file
    with pytest.raises(OSError):
        c.collect(env.ctx)
    env.host.write(cg.CPUSET_CPUS, env.pods.metas[0].containers[0].cgroup_dir, "0-x\n")
    with pytest.raises(ValueError, match="bad cpuset"):
        c.collect(env.ctx)


def test_request_follows_pod_updates(env: Env) -> None:
    be_dir = qos_cgroup_dir(env.host.driver, KubeQOS.BESTEFFORT)
    env.host.set_cpuset(be_dir, "0-1")
    env.host.set_cpu_limit(be_dir, -1)
    env.host.set_cpu_usage(be_dir, 0)
    env.add_pod(_be_pod("u", ["100"]))
    c = BEResourceCollector()
    assert _values(c.collect(env.ctx))["request"] == 100.0
    env.pods.metas[0] = env.add_pod(_be_pod("u", ["300"]))  # the informer replaced the pod object
    env.pods.metas.pop()
    assert _values(c.collect(env.ctx))["request"] == 300.0
    env.pods.metas.clear()
    assert _values(c.collect(env.ctx))["request"] == 0.0


def test_vanished_container_is_skipped_quietly(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """A BE pod deleted between listing pods and reading its cpuset: through the collector runner, no
    ERROR record and the round still stores the BE samples."""
    host = env.host
    be_dir = qos_cgroup_dir(host.driver, KubeQOS.BESTEFFORT)
    host.set_cpuset(be_dir, "0-7")
    host.set_cpu_limit(be_dir, -1)
    host.set_cpu_usage(be_dir, 0)
    gone = env.add_pod(_be_pod("uid-gone", ["200"], cids=["g1"]))
    stays = env.add_pod(_be_pod("uid-stays", ["300"], cids=["s1"]))
    host.set_cpuset(gone.containers[0].cgroup_dir, "0")
    host.set_cpuset(stays.containers[0].cgroup_dir, "0-3")
    cache = MetricCache()
    collector = BEResourceCollector()
    runner = CollectorRunner([collector], env.ctx, cache)

    def stored(alloc: str) -> list[float]:
        labels = {"be_resource": "cpu", "be_allocation": alloc}
        return [float(v) for v in cache.query("node_be", labels, 0, 2**62).values]

    assert runner.run_collector(collector)
    assert stored("real-limit") == [1000.0]  # the 1-CPU container counts
    # the kernel removes the pod's cgroup (its containers' with it) in every hierarchy; the pod list lags
    host.rmdir(gone.cgroup_dir)
    assert not host.path_of(cg.CPUSET_CPUS, gone.containers[0].cgroup_dir).parent.exists()
    env.clock.advance(1.0)
    with caplog.at_level(logging.DEBUG, logger="agent.metricsadvisor"):
        assert runner.run_collector(collector)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("vanished" in r.getMessage() and r.levelno == logging.DEBUG for r in caplog.records)
    assert runner.failures == {"be_resource": 0}
    assert stored("real-limit") == [1000.0, 4000.0]
    assert stored("request") == [500.0, 500.0]  # the pod is still listed: its request still counts
    env.pods.metas.remove(gone)  # the next round's pod list no longer has it
    env.clock.advance(1.0)
    assert runner.run_collector(collector)
    assert stored("request") == [500.0, 500.0, 300.0]


def test_vanished_besteffort_dir_stays_an_error(env: Env) -> None:
    be_dir = qos_cgroup_dir(env.host.driver, KubeQOS.BESTEFFORT)
    env.host.set_cpu_limit(be_dir, -1)
    env.host.set_cpu_usage(be_dir, 0)
    env.host.rmdir(be_dir)
    with pytest.raises(FileNotFoundError):
        BEResourceCollector().collect(env.ctx)


def _cpuset_read_fails(env: Env, monkeypatch: pytest.MonkeyPatch, error: OSError) -> BEResourceCollector:
    """A host (besteffort cpuset 0-1, one BE container on CPU 0) where the container's cpuset read raises
    ``error``; the collector to run on it."""
    be_dir = qos_cgroup_dir(env.host.driver, KubeQOS.BESTEFFORT)
    env.host.set_cpuset(be_dir, "0-1")
    env.host.set_cpu_limit(be_dir, -1)
    env.host.set_cpu_usage(be_dir, 0)
    meta = env.add_pod(_be_pod("u", ["100"], cids=["c1"]))
    env.host.set_cpuset(meta.containers[0].cgroup_dir, "0")
    failing = str(env.host.path_of(cg.CPUSET_CPUS, meta.containers[0].cgroup_dir))

    def read_files(paths: Sequence[str]) -> list[bytes | None]:
        return [None if p == failing else readers.read_bytes(p) for p in paths]

    def read_bytes(path: str) -> bytes:
        if path == failing:
            raise error
        return readers.read_bytes(path)

    monkeypatch.setattr(beresource, "read_files", read_files)
    monkeypatch.setattr(beresource, "read_bytes", read_bytes)
    return BEResourceCollector()


def test_other_container_errors_stay_errors(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """EACCES on a container's cpuset (its cgroup still there) fails the round as before."""
    c = _cpuset_read_fails(env, monkeypatch, PermissionError(errno.EACCES, "Permission denied"))
    with pytest.raises(PermissionError):
        c.collect(env.ctx)


def test_enodev_is_a_vanished_cgroup(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel answers ENODEV for a cgroup being torn down: skipped like ENOENT, the dir still there."""
    c = _cpuset_read_fails(env, monkeypatch, OSError(errno.ENODEV, "No such device"))
    assert _values(c.collect(env.ctx))["real-limit"] == 2000.0
