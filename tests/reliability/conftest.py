"""Fault-test fixtures: a control plane of these tests' own (etcd + kube-apiserver, koord's CRDs and
base objects), shared by the tests of this folder, whose API server a test may freeze (SIGSTOP) and
resume (SIGCONT) — never the session's shared one, which other tests use — and a fresh namespace on it
per test.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane
from tests.reliability.helpers import FreezableControlPlane


@pytest.fixture(scope="package")
def own_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreezableControlPlane]:
    cp = ControlPlane(state_dir=tmp_path_factory.mktemp("reliability-controlplane"))
    cp.start()
    plane: FreezableControlPlane | None = None
    try:
        api = cp.api_client()
        try:
            bootstrap(api)
        finally:
            api.close()
        plane = FreezableControlPlane(cp)
        yield plane
    finally:
        if plane is not None:
            plane.resume()  # never stop it frozen
        cp.stop()


@pytest.fixture()
def own_kube(own_control_plane: FreezableControlPlane) -> Iterator[Any]:
    api = own_control_plane.cp.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture()
def own_namespace(own_kube: Any) -> Iterator[str]:
    name = f"r-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(own_kube)
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)
