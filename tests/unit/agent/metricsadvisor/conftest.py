"""Fixtures for collector tests: the fake host (v1/v2 × cgroupfs/systemd), a settable wall clock, a static
pod source and a CollectContext builder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agent.metricsadvisor.framework import CollectContext
from agent.podmeta import PodMeta, pod_meta
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis.nodeslo import HostApplicationSpec
from tests.fixtures.hosttree import HostTree

T0 = 1_700_000_000_000_000_000  # ns


class Clock:
    def __init__(self, ns: int = T0) -> None:
        self.ns = ns

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


class Pods:
    def __init__(self, metas: Sequence[PodMeta] = ()) -> None:
        self.metas = list(metas)

    def pods(self) -> Sequence[PodMeta]:
        return self.metas


def make_pod(
    uid: str,
    qos: str = "Burstable",
    containers: Sequence[str] = (),
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": uid, "namespace": "ns", "labels": labels or {}},
        "spec": spec or {"containers": [{"name": f"c{i}"} for i in range(len(containers))]},
        "status": {
            "qosClass": qos,
            "containerStatuses": [
                {"name": f"c{i}", "containerID": f"containerd://{cid}"} for i, cid in enumerate(containers)
            ],
        },
    }


class Env:
    """A fake host plus the context collectors see."""

    def __init__(self, host: HostTree) -> None:
        self.host = host
        self.clock = Clock()
        self.pods = Pods()
        self.host_apps: list[HostApplicationSpec] | None = None
        self.policy: str | None = None
        self.ctx = CollectContext(
            paths=host.paths,
            cgroup_version=host.version,
            cgroup_driver=host.driver,
            pods=self.pods,
            host_apps=lambda: self.host_apps,
            clock_ns=self.clock,
            node_memory_policy=lambda: self.policy,
            clk_tck=100,
            page_size=4096,
        )

    @property
    def v1(self) -> bool:
        return self.host.version is CgroupVersion.V1

    def add_pod(self, pod: dict[str, Any]) -> PodMeta:
        meta = pod_meta(pod, self.host.driver)
        self.host.mkdir(meta.cgroup_dir)
        for c in meta.containers:
            self.host.mkdir(c.cgroup_dir)
        self.pods.metas.append(meta)
        return meta


@pytest.fixture(
    params=[(v, d) for v in CgroupVersion for d in CgroupDriver],
    ids=lambda p: f"{p[0].value}-{p[1].value}",
)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Env:
    version, driver = request.param
    return Env(HostTree(tmp_path, version, driver))
