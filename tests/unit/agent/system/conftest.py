"""Fixtures: a fake host tree parametrised over cgroup v1/v2 and the cgroupfs/systemd drivers."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from tests.fixtures.hosttree import HostTree


@pytest.fixture(
    params=[(v, d) for v in CgroupVersion for d in CgroupDriver],
    ids=lambda p: f"{p[0].value}-{p[1].value}",
)
def host(request: pytest.FixtureRequest, tmp_path: Path) -> HostTree:
    version, driver = request.param
    return HostTree(tmp_path, version, driver)
