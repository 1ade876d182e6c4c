"""Fixtures: a fake host (cgroup v1, v2) and an executor wired to an audit log, a fake clock and recorders."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.resourceexecutor import AuditLog, ResourceExecutor
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupFile, CgroupVersion
from agent.system.podcgroup import CgroupDriver, KubeQOS
from tests.fixtures.hosttree import HostTree


class Env:
    def __init__(self, host: HostTree, tmp_path: Path) -> None:
        self.host = host
        self.now = datetime(2024, 1, 1, tzinfo=UTC)
        self.audit_path = tmp_path / "audit" / "writes.log"
        self.audit = AuditLog(self.audit_path)
        self.timings: list[tuple[str, str, float, str]] = []
        self.drifts: list[tuple[str, str]] = []
        self.pod_dir = host.add_pod("uid-1", KubeQOS.BESTEFFORT)

    def executor(self, **kwargs: Any) -> ResourceExecutor:
        return ResourceExecutor(
            self.host.paths,
            self.host.version,
            "node-1",
            audit=self.audit,
            clock=lambda: self.now,
            on_write=lambda *a: self.timings.append(a),
            on_drift=lambda *a: self.drifts.append(a),
            **kwargs,
        )

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    def path(self, spec: CgroupFile[Any], cgroup_dir: str | None = None) -> Path:
        d = self.pod_dir if cgroup_dir is None else cgroup_dir
        return cg.cgroup_write_path(self.host.paths.cgroup_root, self.host.version, spec, d)

    def put(self, spec: CgroupFile[Any], text: str, cgroup_dir: str | None = None) -> Path:
        path = self.path(spec, cgroup_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def text(self, spec: CgroupFile[Any], cgroup_dir: str | None = None) -> str:
        return self.path(spec, cgroup_dir).read_text().strip()

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]

    @property
    def v2(self) -> bool:
        return self.host.version is CgroupVersion.V2


@pytest.fixture(params=list(CgroupVersion), ids=lambda v: v.value)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    e = Env(HostTree(tmp_path / "host", request.param, CgroupDriver.CGROUPFS), tmp_path)
    with e.audit:  # closes the log file, as the koordlet does on stop
        yield e
