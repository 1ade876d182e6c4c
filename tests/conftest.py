"""Shared fixtures: one real local control plane (etcd + kube-apiserver) per test session, started
only when a test asks for it, with the koord CRDs and base objects installed; a fresh namespace per
test for isolation.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(state_dir=tmp_path_factory.mktemp("controlplane"))
    cp.start()
    try:
        bootstrap(cp.api_client())
        yield cp
    finally:
        cp.stop()


@pytest.fixture()
def kube(control_plane: ControlPlane) -> Iterator[Any]:
    """A kubernetes.client.ApiClient authenticated as the admin."""
    api = control_plane.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture()
def namespace(kube: Any) -> Iterator[str]:
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:10]}"
    core = client.CoreV1Api(kube)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        core.delete_namespace(name)
