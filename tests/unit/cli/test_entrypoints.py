"""The console scripts: `koord version`, every daemon's --version, koord-manager serving the hub."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import grpc
import pytest

from koord import __version__
from koord.cli import main as koord_main
from koord.localcluster.controlplane import free_ports
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc


def test_koord_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert koord_main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"koord {__version__}"
    assert __version__ != "0.0.0+unknown"


@pytest.mark.parametrize("module", ["agent.daemon", "manager.main", "scheduler.main"])
def test_daemons_print_their_version(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip().endswith(__version__)


def test_koordlet_needs_a_node_name() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NODE_NAME"}
    out = subprocess.run([sys.executable, "-m", "agent.daemon"], capture_output=True, text=True, env=env)
    assert out.returncode == 2
    assert "--node-name" in out.stderr and "NODE_NAME" in out.stderr


def test_koordlet_without_a_cluster_says_what_it_tried() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    out = subprocess.run([sys.executable, "-m", "agent.daemon", "--node-name=n1"], capture_output=True,
                         text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 1
    assert "no usable Kubernetes configuration" in out.stderr and "Traceback" not in out.stderr


def test_scheduler_without_a_cluster_says_what_it_tried() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    out = subprocess.run([sys.executable, "-m", "scheduler.main", "--metrics-port=0"], capture_output=True,
                         text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 1
    assert "no usable Kubernetes configuration" in out.stderr and "Traceback" not in out.stderr


def test_koord_manager_serves_the_hub_until_sigterm() -> None:
    [port] = free_ports(1)
    with subprocess.Popen(
        [sys.executable, "-m", "manager.main", f"--hub-addr=127.0.0.1:{port}", "--no-enable-scheduler",
         "--no-enable-leader-election", "--controllers=", "--hub-auth=none", "--metrics-addr=127.0.0.1:0",
         "--health-probe-addr=127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        try:
            assert proc.stdout is not None
            assert f"listening on port {port}" in proc.stdout.readline()
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = pb_grpc.MetricHubStub(ch)
                ack = stub.Report(iter([pb.NodeMetricReport(node_name="n1")]), timeout=10)
                assert ack.accepted == 1
                assert [i.report.node_name for i in stub.List(pb.ListRequest(), timeout=10).items] == ["n1"]
        finally:
            proc.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            # communicate() drains both pipes (a full stderr pipe would block the daemon's exit).
            _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert time.monotonic() - t0 < 10


def test_koord_manager_rejects_a_bad_hub_address() -> None:
    argv = [
        sys.executable,
        "-m",
        "manager.main",
        "--hub-addr=256.1.1.1:x",
        "--no-enable-scheduler",
        "--hub-auth=none",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "--hub-addr=256.1.1.1:x" in out.stderr
