"""manager.webhook.server: real HTTPS on 127.0.0.1 with a certificate from manager.certs — reviews in and
out, a handler's exception as an errored answer, the HTTP refusals (path, method, media type, body
limit, not a review), the per-connection timeout, metrics, and a certificate replaced under the running
server."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from manager.certs import ServingCert, new_serving_cert
from manager.webhook.admission import AdmissionRequest, AdmissionResponse, allowed, denied, patched
from manager.webhook.server import WebhookServer

HOSTS = ["koord-manager-webhook.koordinator-system.svc", "localhost", "127.0.0.1"]


def _validate(req: AdmissionRequest) -> AdmissionResponse:
    labels = ((req.object or {}).get("metadata") or {}).get("labels") or {}
    return denied(f"{req.name}: label bad") if "bad" in labels else allowed()


def _mutate(req: AdmissionRequest) -> AdmissionResponse:
    return patched([{"op": "add", "path": "/metadata/labels", "value": {"seen": "yes"}}])


def _crash(req: AdmissionRequest) -> AdmissionResponse:
    raise RuntimeError("priorityclasses koord-batch not found")


def _write(cert: ServingCert, tmp: Path) -> tuple[Path, Path, Path]:
    paths = (tmp / "tls.crt", tmp / "tls.key", tmp / "ca.crt")
    for path, data in zip(paths, (cert.cert, cert.key, cert.ca), strict=True):
        tmp_path = path.with_suffix(".tmp")
        tmp_path.write_bytes(data)
        tmp_path.replace(path)
    return paths


class Served:
    def __init__(self, tmp: Path, **kw: Any) -> None:
        self.tmp = tmp
        self.cert_file, self.key_file, self.ca_file = _write(new_serving_cert("webhook", HOSTS), tmp)
        self.registry = CollectorRegistry()
        self.server = WebhookServer(
            "127.0.0.1:0",
            {"/validate": _validate, "/mutate": _mutate, "/crash": _crash},
            cert_file=self.cert_file, key_file=self.key_file, registry=self.registry, **kw,
        ).start()  # fmt: skip

    def client(self, ca: Path | None = None, timeout: float = 5) -> http.client.HTTPSConnection:
        ctx = ssl.create_default_context(cafile=str(ca or self.ca_file))
        return http.client.HTTPSConnection("127.0.0.1", self.server.port, context=ctx, timeout=timeout)

    def post(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        conn = self.client()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": content_type})
            resp = conn.getresponse()
            return resp.status, resp.read(), resp
        finally:
            conn.close()

    def count(self, webhook: str, result: str) -> float:
        value = self.registry.get_sample_value(
            "koord_manager_webhook_requests_total", {"webhook": webhook, "result": result}
        )
        return value or 0.0


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[Served]:
    s = Served(tmp_path, request_timeout=2.0, max_body=64 * 1024)
    try:
        yield s
    finally:
        s.server.stop()


def _review(version: str = "admission.k8s.io/v1", **obj: Any) -> bytes:
    request = {
        "uid": "uid-7", "operation": "CREATE", "name": "p", "namespace": "ns",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": {"metadata": obj},
    }  # fmt: skip
    return json.dumps({"apiVersion": version, "kind": "AdmissionReview", "request": request}).encode()


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_reviews_are_answered_in_their_version_and_counted(served: Served, version: str) -> None:
    status, body, resp = served.post("/validate", _review(version, labels={"ok": "1"}))
    answer = json.loads(body)
    assert (status, resp.getheader("Content-Type")) == (200, "application/json")
    assert answer["apiVersion"] == version and answer["kind"] == "AdmissionReview"
    assert answer["response"] == {"uid": "uid-7", "allowed": True, "status": {"code": 200}}
    status, body, _ = served.post("/validate", _review(version, labels={"bad": "1"}))
    assert json.loads(body)["response"]["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "p: label bad",
    }
    status, body, _ = served.post("/mutate", _review(version))
    assert json.loads(body)["response"]["patchType"] == "JSONPatch"
    assert (served.count("/validate", "allowed"), served.count("/validate", "denied")) == (1, 1)
    assert served.count("/mutate", "allowed") == 1
    latency = served.registry.get_sample_value(
        "koord_manager_webhook_latency_seconds_count", {"webhook": "/validate"}
    )
    assert latency == 2


def test_a_handler_that_raises_refuses_with_500_and_is_counted_as_error(served: Served) -> None:
    status, body, _ = served.post("/crash", _review())
    assert status == 200
    assert json.loads(body)["response"] == {
        "uid": "uid-7",
        "allowed": False,
        "status": {"code": 500, "message": "priorityclasses koord-batch not found"},
    }
    assert served.count("/crash", "error") == 1


def test_http_refusals(served: Served) -> None:
    assert served.post("/nowhere", _review())[0] == 404
    assert served.post("/validate", _review(), content_type="text/plain")[0] == 415
    assert served.post("/validate", _review(), content_type="application/json; charset=utf-8")[0] == 200
    status, body, _ = served.post("/validate", b'{"kind": "Pod"}')
    assert status == 400 and b"not an AdmissionReview" in body
    status, body, resp = served.post("/validate", b"x" * (64 * 1024 + 1))
    assert status == 413 and resp.getheader("Connection") == "close"
    assert served.count("/validate", "error") == 3
    for method, path, code in [("GET", "/validate", 405), ("PUT", "/validate", 405), ("GET", "/healthz", 200),
                               ("GET", "/other", 404), ("DELETE", "/mutate", 405)]:  # fmt: skip
        conn = served.client()
        try:
            conn.request(method, path)
            assert conn.getresponse().status == code, (method, path)
        finally:
            conn.close()


def test_keep_alive_serves_several_requests_on_one_connection(served: Served) -> None:
    conn = served.client()
    try:
        for _ in range(3):
            conn.request("POST", "/validate", body=_review(), headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["response"]["allowed"]
    finally:
        conn.close()


def test_a_silent_connection_is_closed_after_the_request_timeout(tmp_path: Path) -> None:
    s = Served(tmp_path, request_timeout=0.3, max_workers=1)
    try:
        with socket.create_connection(("127.0.0.1", s.server.port), timeout=5) as raw:
            start = time.monotonic()
            assert raw.recv(1) == b""  # no handshake from us: the server gives up
            assert time.monotonic() - start < 3
        assert s.post("/validate", _review())[0] == 200  # the one worker is free again
    finally:
        s.server.stop()


def test_stop_cuts_an_idle_keep_alive_connection(tmp_path: Path) -> None:
    s = Served(tmp_path, request_timeout=30)
    conn = s.client()
    try:
        conn.request("POST", "/validate", body=_review(), headers={"Content-Type": "application/json"})
        conn.getresponse().read()
        start = time.monotonic()
        s.server.stop()
        assert time.monotonic() - start < 5
    finally:
        conn.close()


def test_a_replaced_certificate_is_served_to_new_connections(served: Served, tmp_path: Path) -> None:
    old_ca = tmp_path / "old-ca.crt"
    old_ca.write_bytes(served.ca_file.read_bytes())
    kept = served.client(old_ca)  # a connection opened before the change keeps working
    kept.request("GET", "/healthz")
    assert kept.getresponse().read() == b"ok\n"
    _write(new_serving_cert("webhook", HOSTS), tmp_path)
    assert served.post("/validate", _review())[0] == 200  # trusts the new ca.crt
    stale = served.client(old_ca)
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            stale.request("GET", "/healthz")
    finally:
        stale.close()
    try:
        kept.request("GET", "/healthz")
        assert kept.getresponse().status == 200
    finally:
        kept.close()
    assert served.server.cert.loads == 2


def test_a_pair_that_does_not_load_keeps_the_previous_certificate(served: Served, tmp_path: Path) -> None:
    other = new_serving_cert("webhook", HOSTS)
    served.cert_file.write_bytes(other.cert)  # the new certificate, still the old key
    assert served.post("/validate", _review())[0] == 200  # still the old pair
    assert served.server.cert.loads == 1
    served.key_file.write_bytes(other.key)
    ca = tmp_path / "new-ca.crt"
    ca.write_bytes(other.ca)
    conn = served.client(ca)
    try:
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
    finally:
        conn.close()
    assert served.server.cert.loads == 2


def test_a_server_needs_a_certificate_and_sane_paths(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        WebhookServer("127.0.0.1:0", {}, cert_file=tmp_path / "no.crt", key_file=tmp_path / "no.key",
                      registry=CollectorRegistry())  # fmt: skip
    cert, key, _ = _write(new_serving_cert("webhook", HOSTS), tmp_path)
    with pytest.raises(ValueError, match="/healthz"):
        WebhookServer("127.0.0.1:0", {"/healthz": _validate}, cert_file=cert, key_file=key,
                      registry=CollectorRegistry())  # fmt: skip
