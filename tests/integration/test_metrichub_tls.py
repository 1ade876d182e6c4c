"""The MetricHub over TLS on 127.0.0.1 with a certificate from manager.certs: an agent with --hub-ca
reports, one without it (plaintext) or with another CA fails, the scheduler's watcher follows over
TLS, and a hub given no certificate still serves plaintext. Against the REAL API server: the
certificate Secret is created once through the manager's gateway and read back by a second replica."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.reporter.hubpush import HubPusher
from koord.localcluster.controlplane import ControlPlane
from manager.certs import new_serving_cert
from manager.hubsetup import hub_tls
from manager.metrichub.auth import Authorizer, StaticTokenAuthenticator
from manager.metrichub.server import serve, tls_credentials
from manager.metrichub.store import HubStore
from manager.options import build_parser
from proto.koord.v1 import metrichub_pb2 as pb
from scheduler.metricsource import FreshestMerger, HubWatcher
from tests.integration.podhelpers import wait_for

HOSTS = ["koord-manager-hub", "localhost", "127.0.0.1"]


def _report(node: str, second: int) -> pb.NodeMetricReport:
    r = pb.NodeMetricReport(node_name=node)
    r.status.update_time.FromSeconds(1_700_000_000 + second)
    return r


class TLSHub:
    """A TLS hub with static tokens: `agent` reports for node n1, `sched` reads."""

    def __init__(self, tmp: Path) -> None:
        made = new_serving_cert("koord-manager-hub", HOSTS)
        self.cert, self.key, self.ca = tmp / "tls.crt", tmp / "tls.key", tmp / "ca.crt"
        self.cert.write_bytes(made.cert)
        self.key.write_bytes(made.key)
        self.ca.write_bytes(made.ca)
        tokens = tmp / "tokens.csv"
        tokens.write_text("agent-tok,system:node:n1\nsched-tok,reader\n")
        self.agent_token, self.sched_token = tmp / "agent-token", tmp / "sched-token"
        self.agent_token.write_text("agent-tok")
        self.sched_token.write_text("sched-tok")
        self.store = HubStore()
        self.server, port = serve(
            self.store,
            "127.0.0.1:0",
            authenticator=StaticTokenAuthenticator(tokens),
            authorizer=Authorizer(reader_users={"reader"}, reader_groups=()),
            credentials=tls_credentials(self.cert, self.key),
        )
        self.target = f"127.0.0.1:{port}"


@pytest.fixture()
def hub(tmp_path: Path) -> Iterator[TLSHub]:
    h = TLSHub(tmp_path)
    try:
        yield h
    finally:
        assert h.server.stop(grace=None).wait(5)


def _push(target: str, token: Path, ca: Path | None, report: pb.NodeMetricReport) -> tuple[bool, str | None]:
    pusher = HubPusher(target, token_file=token, ca_file=ca, timeout=3.0)
    try:
        return pusher.push(report), pusher.last_error
    finally:
        pusher.close()


def test_an_agent_with_the_ca_reports_over_tls(hub: TLSHub) -> None:
    assert _push(hub.target, hub.agent_token, hub.ca, _report("n1", 1)) == (True, None)
    assert hub.store.list().items[0].report == _report("n1", 1)


def test_an_agent_without_the_ca_or_with_another_ca_fails(hub: TLSHub, tmp_path: Path) -> None:
    delivered, error = _push(hub.target, hub.agent_token, None, _report("n1", 1))  # plaintext to a TLS port
    assert not delivered and error is not None and error.startswith("UNAVAILABLE")
    other = tmp_path / "other-ca.crt"
    other.write_bytes(new_serving_cert("impostor", HOSTS).ca)
    delivered, error = _push(hub.target, hub.agent_token, other, _report("n1", 2))
    assert not delivered and error is not None and error.startswith("UNAVAILABLE")
    assert hub.store.revision == 0


def test_the_scheduler_watches_over_tls(hub: TLSHub) -> None:
    hub.store.put(_report("n1", 1))
    seen: dict[str, Any] = {}
    lock = threading.Lock()

    def consume(name: str, metric: Any) -> None:
        with lock:
            seen[name] = metric

    watcher = HubWatcher(hub.target, FreshestMerger(consume), token_file=hub.sched_token, ca_file=hub.ca)
    stop = threading.Event()
    t = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    t.start()
    try:
        assert watcher.synced.wait(10)
        hub.store.put(_report("n2", 2))
        assert wait_for(lambda: "n1" in seen and "n2" in seen)
    finally:
        stop.set()
        watcher.stop()
        t.join(10)
    assert not t.is_alive()


def test_without_a_certificate_the_hub_serves_plaintext(tmp_path: Path) -> None:
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0")
    try:
        assert _push(f"127.0.0.1:{port}", _token(tmp_path), None, _report("n1", 1)) == (True, None)
        assert store.revision == 1
        with_ca = _push(f"127.0.0.1:{port}", _token(tmp_path), hub_ca(tmp_path), _report("n1", 2))
        assert with_ca[0] is False  # a TLS client does not fall back to plaintext
        assert store.revision == 1
    finally:
        assert server.stop(grace=None).wait(5)


def hub_ca(tmp: Path) -> Path:
    ca = tmp / "ca.crt"
    ca.write_bytes(new_serving_cert("koord-manager-hub", HOSTS).ca)
    return ca


def _token(tmp: Path) -> Path:
    token = tmp / "token"
    token.write_text("any")
    return token


@pytest.mark.apiserver
def test_manager_replicas_share_the_certificate_secret_made_through_the_gateway(
    control_plane: ControlPlane, kube: Any, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """koord-manager's --hub-tls-secret path (manager.hubsetup.hub_tls) on the real API server."""
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    secret = f"hub-tls-{uuid.uuid4().hex[:6]}"
    trusted = []
    for replica in ("a", "b"):  # two replicas starting: the first creates the Secret, the second reads it
        d = tmp_path / replica
        args = build_parser().parse_args([
            f"--kubeconfig={control_plane.kubeconfig_path}", f"--hub-tls-secret={secret}",
            f"--hub-tls-cert={d}/tls.crt", f"--hub-tls-key={d}/tls.key",
        ])  # fmt: skip
        credentials, ca = hub_tls(args)
        assert ca == d / "ca.crt"
        trusted.append(ca)
    a, b = tmp_path / "a", tmp_path / "b"
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    stored: Any = client.CoreV1Api(kube).read_namespaced_secret(secret, namespace)
    assert stored.type == "kubernetes.io/tls" and set(stored.data) == {"ca.crt", "tls.crt", "tls.key"}
    store = HubStore()
    server, port = serve(store, "127.0.0.1:0", credentials=credentials)  # replica b's credentials
    try:
        assert _push(f"127.0.0.1:{port}", _token(tmp_path), trusted[0], _report("n1", 1))[0]
        assert store.revision == 1
    finally:
        assert server.stop(grace=None).wait(5)
