"""manager.webhook.certkeeper against an in-memory gateway that behaves like the API server for the calls
it makes (create conflicts, resourceVersion-guarded updates, JSON patches with test operations): the
first replica wins, an empty Secret is filled, a lost update is re-planned on the winner's Secret,
files and caBundles follow a rotation, and a missing configuration is patched once it exists."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from manager.certs import CA_CRT, NEXT_CRT, TLS_CRT, decode_data
from manager.kubeapi import GatewayError
from manager.webhook.certkeeper import CertKeeper, ca_bundle_patch
from manager.webhook.gateway import WebhookConfigKind

NS, SECRET = "koordinator-system", "webhook-certs"
MUTATING: WebhookConfigKind = "MutatingWebhookConfiguration"
VALIDATING: WebhookConfigKind = "ValidatingWebhookConfiguration"
HOSTS = ["koord-manager-webhook.koordinator-system.svc", "127.0.0.1"]
T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


class _StatusError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


def _error(op: str, status: int) -> GatewayError:
    return GatewayError(op, "Secret", SECRET, status, _StatusError(status))


class FakeAPI:
    def __init__(self) -> None:
        self.secret: dict[str, Any] | None = None
        self.rv = 0
        self.configs: dict[tuple[str, str], dict[str, Any]] = {}
        self.before_update: Callable[[], object] | None = None
        self.updates = 0
        self.patches = 0

    def _store(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.rv += 1
        self.secret = copy.deepcopy(dict(body))
        self.secret["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.secret)

    def create_or_read_secret(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.secret is None:
            return self._store(body)
        return copy.deepcopy(self.secret)

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.secret)

    def update_secret(self, secret: Mapping[str, Any]) -> dict[str, Any]:
        hook, self.before_update = self.before_update, None
        if hook is not None:
            hook()
        assert self.secret is not None
        if secret["metadata"].get("resourceVersion") != self.secret["metadata"]["resourceVersion"]:
            raise _error("update", 409)
        self.updates += 1
        return self._store(secret)

    def read_webhook_configuration(self, kind: WebhookConfigKind, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.configs.get((kind, name)))

    def patch_webhook_configuration(
        self, kind: WebhookConfigKind, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        config = copy.deepcopy(self.configs[(kind, name)])
        for op in ops:
            _, _, index, *rest = op["path"].split("/")
            webhook = config["webhooks"][int(index)]
            if op["op"] == "test":
                if webhook["name"] != op["value"]:
                    raise GatewayError("patch", kind, name, 422, _StatusError(422))
            else:
                assert op["op"] == "add" and rest == ["clientConfig", "caBundle"]
                webhook["clientConfig"]["caBundle"] = op["value"]
        self.configs[(kind, name)] = config
        self.patches += 1
        return config


def _configuration(*names: str) -> dict[str, Any]:
    return {"webhooks": [{"name": n, "clientConfig": {"service": {"name": "svc"}}} for n in names]}


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> dt.datetime:
        return self.now


def _keeper(api: FakeAPI, tmp: Path, clock: Clock, **kw: Any) -> CertKeeper:
    return CertKeeper(
        api, name="koord-manager-webhook", hosts=HOSTS, secret=SECRET, namespace=NS, cert_dir=tmp,
        configurations=[(MUTATING, "m"), (VALIDATING, "v")], days=30, clock=clock, **kw,
    )  # fmt: skip


def _bundle(api: FakeAPI, kind: WebhookConfigKind, name: str) -> list[bytes]:
    return [
        base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in api.configs[(kind, name)]["webhooks"]
    ]


def test_two_replicas_agree_on_one_pair_and_the_bundles_are_set(tmp_path: Path) -> None:
    api, clock = FakeAPI(), Clock()
    api.configs[(MUTATING, "m")] = _configuration("mpod")
    api.configs[(VALIDATING, "v")] = _configuration("vpod", "vconfigmap")
    a = _keeper(api, tmp_path / "a", clock).bootstrap()
    b = _keeper(api, tmp_path / "b", clock).bootstrap()
    assert a == b and api.rv == 1 and api.updates == 0
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "tls.key").stat().st_mode & 0o777 == 0o600
    assert _bundle(api, MUTATING, "m") == [a.ca] and _bundle(api, VALIDATING, "v") == [a.ca, a.ca]
    assert api.patches == 2  # the second replica found the bundles set
    assert ca_bundle_patch(api.configs[(MUTATING, "m")], a.ca) == []


def test_an_empty_secret_is_filled_and_a_lost_update_uses_the_winners_pair(tmp_path: Path) -> None:
    api, clock = FakeAPI(), Clock()
    api._store({"metadata": {"name": SECRET, "namespace": NS}, "type": "kubernetes.io/tls",
                "data": {"tls.crt": "", "tls.key": ""}})  # fmt: skip
    winner = _keeper(api, tmp_path / "w", clock)
    loser = _keeper(api, tmp_path / "l", clock)
    api.before_update = winner.bootstrap  # the winner writes between the loser's read and its update
    got = loser.bootstrap()
    assert api.updates == 1 and got == winner.current
    assert decode_data(api.secret)[TLS_CRT] == got.cert
    assert api.secret is not None and api.secret["type"] == "kubernetes.io/tls"


def test_a_rotation_reaches_the_files_and_keeps_both_cas_in_the_bundles(tmp_path: Path) -> None:
    api, clock = FakeAPI(), Clock()
    api.configs[(MUTATING, "m")] = _configuration("mpod")
    keeper = _keeper(api, tmp_path, clock)
    first = keeper.bootstrap()
    clock.now = T0 + dt.timedelta(days=21)
    staged = keeper.sync()
    assert staged.cert == first.cert and staged.ca.count(b"BEGIN CERTIFICATE") == 2
    assert NEXT_CRT in decode_data(api.secret) and _bundle(api, MUTATING, "m") == [staged.ca]
    clock.now += dt.timedelta(minutes=11)
    promoted = keeper.sync()
    assert promoted.cert == decode_data(api.secret)[TLS_CRT] != first.cert
    assert (tmp_path / "tls.crt").read_bytes() == promoted.cert
    assert (tmp_path / "ca.crt").read_bytes() == promoted.ca == decode_data(api.secret)[CA_CRT]
    assert promoted.ca.count(b"BEGIN CERTIFICATE") == 2 and _bundle(api, MUTATING, "m") == [promoted.ca]
    assert keeper.sync() == promoted and api.updates == 2


def test_a_missing_configuration_is_logged_once_and_patched_when_it_appears(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, clock = FakeAPI(), Clock()
    keeper = _keeper(api, tmp_path, clock)
    with caplog.at_level(logging.WARNING, logger="manager.webhook.certkeeper"):
        cert = keeper.bootstrap()
        keeper.sync()
    assert caplog.text.count("does not exist") == 2  # once for each of the two configurations
    api.configs[(VALIDATING, "v")] = _configuration("vpod")
    keeper.sync()
    assert _bundle(api, VALIDATING, "v") == [cert.ca]


def test_a_failed_patch_is_not_fatal_and_a_failed_round_is_retried(tmp_path: Path) -> None:
    api, clock = FakeAPI(), Clock()
    api.configs[(MUTATING, "m")] = _configuration("mpod")

    def moved(kind: WebhookConfigKind, name: str, ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        raise GatewayError("patch", kind, name, 422, _StatusError(422))

    keeper = _keeper(api, tmp_path, clock, interval=0.01, retry_interval=0.01)
    api.patch_webhook_configuration = moved  # type: ignore[method-assign]
    keeper.bootstrap()
    assert "HTTP 422" in keeper.last_error
    calls = []

    def broken(namespace: str, name: str) -> dict[str, Any] | None:
        calls.append(name)
        raise _error("get", 500)

    api.read_secret = broken  # type: ignore[method-assign]
    stop = threading.Event()
    t = keeper.start(stop)
    try:
        while len(calls) < 3:
            stop.wait(0.01)
    finally:
        stop.set()
        t.join(5)
    assert "HTTP 500" in keeper.last_error and keeper.rounds == 1


def test_a_keeper_needs_hosts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="host"):
        CertKeeper(FakeAPI(), name="x", hosts=[], secret=SECRET, namespace=NS, cert_dir=tmp_path)
