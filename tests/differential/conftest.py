"""Differential-test fixtures: koord-scheduler and the real kube-scheduler v1.20.2 running against the
session's control plane (tests/conftest.py), for the whole module (docs/testing.md#the-kube-scheduler-oracle).

kube-scheduler is taken from build-kube.sh's cache, as kube-apiserver is (`make deps` builds both); a
missing binary is an error naming the command that builds it, not a skip.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koord.localcluster.controlplane import ControlPlane
from tests.differential.harness import Differential


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "differential: compares koord-scheduler with the real kube-scheduler")


@pytest.fixture(scope="module")
def differential(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Differential]:
    with Differential(control_plane, tmp_path_factory.mktemp("differential")) as d:
        yield d
