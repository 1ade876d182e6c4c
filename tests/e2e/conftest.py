"""End-to-end fixtures: a real one-node cluster per test session — its OWN control plane (separate
from tests/conftest.py's `control_plane`, whose fake nodes the integration tests own) plus a
LocalNode (containerd, kubelet, kube-controller-manager) running real busybox pods.

Needs root; without it the e2e tests are skipped with the reason. A missing binary is an error, not
a skip, so CI (root) fails loudly. Every e2e test is marked `e2e` and `apiserver` and runs in the
normal `pytest` invocation.

The e2e session runs with a TMPDIR of its own (``e2e_tmpdir``), inherited by everything it starts; at the
end it must be empty: no temporary folder of the code under test is left behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from koord.localcluster.bootstrap import bootstrap
from koord.localcluster.controlplane import ControlPlane
from koord.localcluster.hoststate import HostSnapshot
from koord.localcluster.node import LocalNode
from tests.conftest import SessionOwner


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs root; runs a real one-node cluster (kubelet, containerd)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.apiserver)
    # `koord up` starts the host's one real node itself: run it before any test starts the session's
    # `real_node` fixture (which keeps the node until the session ends).
    items.sort(key=lambda item: item.path.name != "test_koord_up.py")


def _mounts_under(d: Path) -> list[str]:
    """Mount points at or below ``d`` (/proc/self/mountinfo's fifth field)."""
    inside = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point == str(d) or point.startswith(f"{d}/"):
            inside.append(point)
    return inside


@pytest.fixture(scope="session", autouse=True)
def e2e_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own TMPDIR, for this process (``tempfile``) and every process it starts (`koord up`,
    the node's containerd and kubelet, koord's daemons). Set up before the other session fixtures, so torn
    down after them: then it must be empty. pytest's tmp_path folders stay where they were (their base is
    fixed first)."""
    tmp_path_factory.getbasetemp()
    d = Path(tempfile.mkdtemp(prefix="koord-e2e-tmp-"))
    saved_env, saved_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = str(d), str(d)
    try:
        yield d
    finally:
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        tempfile.tempdir = saved_tempdir
    left = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    mounts = _mounts_under(d)
    if not mounts:  # never delete through a mount point: what is mounted there is not ours to remove
        shutil.rmtree(d, ignore_errors=True)
    assert not left and not mounts, f"left in the session's TMPDIR {d}: {left}; mounts {mounts}"


class RealNode:
    """What e2e tests use: the cluster, an admin API client and the node's facts (read from the
    LocalNode each time, so they stay right after a test restarts the node)."""

    def __init__(self, control_plane: ControlPlane, node: LocalNode, api: Any) -> None:
        self.control_plane = control_plane
        self.node = node
        self.api = api  # kubernetes.client.ApiClient (admin)
        self.core: Any = client.CoreV1Api(api)

    @property
    def node_name(self) -> str:
        return self.node.node_name

    @property
    def node_ip(self) -> str:
        return self.node.node_ip

    @property
    def cgroup_root(self) -> Path:
        return self.node.cgroup_root

    @property
    def cgroup_driver(self) -> str:
        return self.node.cgroup_driver

    @property
    def kubelet_port(self) -> int:
        return self.node.kubelet_port

    @property
    def kubelet_url(self) -> str:
        return self.node.kubelet_url

    @property
    def image(self) -> str:
        return self.node.image

    @property
    def token(self) -> str:
        """The admin bearer token (the API server's and, via webhook authn, the kubelet's)."""
        return self.control_plane.token

    @property
    def ca_cert(self) -> Path:
        return self.control_plane.ca_cert

    def pod(self, name: str, **kwargs: Any) -> dict[str, Any]:
        """A busybox pod manifest bound to the node (LocalNode.pod_manifest / podspec.busybox_pod)."""
        return self.node.pod_manifest(name, **kwargs)


def _node_pids(node: LocalNode) -> list[int]:
    """The node's processes now, from the state file LocalNode keeps while it runs."""
    try:
        return list(HostSnapshot.from_json(json.loads(node.state_file.read_text())).pids.values())
    except (OSError, ValueError):
        return []


@pytest.fixture(scope="session")
def real_node(
    tmp_path_factory: pytest.TempPathFactory, session_processes: list[SessionOwner]
) -> Iterator[RealNode]:
    if os.geteuid() != 0:
        pytest.skip("the real node needs root (kubelet and containerd manage cgroups, mounts and netns)")
    base = tmp_path_factory.mktemp("realnode")
    cp = ControlPlane(state_dir=base / "controlplane")
    cp.start()
    etcd_data = json.loads(cp.state_file.read_text())["etcdData"]  # on /dev/shm, outside TMPDIR
    node = LocalNode(cp, state_dir=base / "node")
    # A test may stop and restart the node: its new processes are still the session's.
    session_processes.append(lambda: _node_pids(node))
    api = None
    try:
        api = cp.api_client()
        bootstrap(api)
        node.start()
        yield RealNode(cp, node, api)
    finally:
        if api is not None:
            api.close()
        node.stop()
        cp.stop()
    # A teardown error (not a silent pass) when the node left anything on the host.
    left = node.leftovers()
    assert not left, f"LocalNode.stop() left {left}"
    assert not Path(etcd_data).exists(), f"ControlPlane.stop() left etcd's data {etcd_data}"


@pytest.fixture()
def e2e_namespace(real_node: RealNode) -> Iterator[str]:
    """A fresh namespace on the real cluster; its pods are force-deleted at the end."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    core = real_node.core
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        for pod in core.list_namespaced_pod(name).items:
            try:
                core.delete_namespaced_pod(pod.metadata.name, name, grace_period_seconds=0)
            except ApiException as e:
                if e.status != 404:
                    raise
        core.delete_namespace(name)


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Polls probe until it returns something truthy (returned) or fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
