"""The local control plane: starts on free ports, serves a real API, stops cleanly by PID, reaps a
crashed run's leftovers, and fails with a clear message when a binary is missing; `koord up` runs
it until interrupted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from koord.localcluster.binaries import MissingBinaryError, find_binaries
from koord.localcluster.controlplane import ControlPlane


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture()
def short_tmp() -> Iterator[Path]:
    """A temporary folder with a short path under /tmp, removed afterwards."""
    d = Path(tempfile.mkdtemp(prefix="ku-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_missing_binaries_give_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(MissingBinaryError) as e:
        find_binaries()
    assert str(tmp_path / "kube-apiserver") in str(e.value)
    assert str(tmp_path / "etcd") in str(e.value)
    monkeypatch.delenv("KUBEBUILDER_ASSETS")
    monkeypatch.setenv("KOORD_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(MissingBinaryError, match="make deps"):
        find_binaries()


def test_start_serve_stop_leaves_nothing(tmp_path: Path) -> None:
    cp = ControlPlane(state_dir=tmp_path / "cp").start()
    try:
        pids = json.loads(cp.state_file.read_text())["pids"]
        assert set(pids) == {"etcd", "kube-apiserver"}
        assert all(_running(p) for p in pids.values())
        api = cp.api_client()
        assert client.VersionApi(api).get_code().git_version.startswith("v1.")
        # The kubeconfig works for any client.
        kc = config.new_client_from_config(config_file=str(cp.kubeconfig_path))

        def namespaces() -> set[str]:
            return {n.metadata.name for n in client.CoreV1Api(kc).list_namespace().items}

        # The API server's bootstrap controller creates "default" shortly after /readyz.
        deadline = time.monotonic() + 20
        while "default" not in namespaces() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "default" in namespaces()
    finally:
        cp.stop()
    assert not any(_running(p) for p in pids.values())
    assert not cp.state_file.exists()


def test_a_crashed_run_is_reaped_by_the_next_start(tmp_path: Path) -> None:
    state_dir = tmp_path / "cp"
    crashed = ControlPlane(state_dir=state_dir).start()
    old = json.loads(crashed.state_file.read_text())["pids"]
    # No stop(): the next start in the same folder must stop the old processes by PID.
    again = ControlPlane(state_dir=state_dir).start()
    try:
        assert not any(_running(p) for p in old.values())
        # Here the crashed run's processes are this test's children: their handles see them gone.
        assert set(crashed.exited()) == {"etcd", "kube-apiserver"}
        assert client.VersionApi(again.api_client()).get_code().git_version == "v1.20.2"
    finally:
        again.stop()


def test_koord_up_runs_until_interrupted(short_tmp: Path) -> None:
    tmp_path = short_tmp  # containerd's socket paths must stay under 104 bytes (xdist's tmp_path is deep)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "koord.cli", "up", "--no-build", "--state-dir", str(tmp_path / "up")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert proc.stdout is not None
    out: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            out.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        text = "".join(out)
        assert "koord is up" in text, text
        kubeconfig = next(ln.split("=", 1)[1].strip() for ln in out if "KUBECONFIG=" in ln)
        pids = json.loads((tmp_path / "up" / "state.json").read_text())["pids"]
        api = config.new_client_from_config(config_file=kubeconfig)
        crd_list = client.ApiextensionsV1Api(api).list_custom_resource_definition()
        crds = {c.metadata.name for c in crd_list.items}
        assert {"nodemetrics.slo.koordinator.sh", "nodeslos.slo.koordinator.sh"} <= crds
        pcs = {p.metadata.name: p.value for p in client.SchedulingV1Api(api).list_priority_class().items}
        assert pcs["koord-prod"] == 9000 and pcs["koord-batch"] == 5000
        cm = client.CoreV1Api(api).read_namespaced_config_map("slo-controller-config", "koordinator-system")
        assert json.loads(cm.data["colocation-config"]) == {"enable": True}
    finally:
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(out) + rest
    assert "koord stopped" in rest
    assert not any(_running(p) for p in pids.values())
