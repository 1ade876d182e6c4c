"""The webhooks' certificates on the REAL API server: the first replica creates the Secret and a second
reads the same CA; a restart keeps it; an empty Secret is filled. Then the API server itself calls the
webhook server (URL webhooks on 127.0.0.1, AdmissionReview v1 for the mutating and v1beta1 for the
validating configuration) through the caBundle the keeper patched, before and after a rotation forced
with an injected clock, with old and new CA in the bundle."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import http.client
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from koord.localcluster.controlplane import ControlPlane
from manager.certs import NEXT_CRT, decode_data, new_serving_cert
from manager.webhook.admission import AdmissionRequest, AdmissionResponse, allowed, denied, json_patch
from manager.webhook.certkeeper import CertKeeper
from manager.webhook.gateway import WebhookGateway
from manager.webhook.service import start_webhooks
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

HOSTS = ["koord-manager-webhook.koordinator-system.svc", "127.0.0.1"]


@pytest.fixture()
def api(control_plane: ControlPlane) -> Iterator[Any]:
    """A client of our own for the code under test (the test's `kube` is the admin's)."""
    a = control_plane.api_client()
    try:
        yield a
    finally:
        a.close()


def _keeper(api: Any, tmp: Path, secret: str, namespace: str, **kw: Any) -> CertKeeper:
    return CertKeeper(WebhookGateway(api), name="koord-manager-webhook", hosts=HOSTS, secret=secret,
                      namespace=namespace, cert_dir=tmp, **kw)  # fmt: skip


def _cas(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def test_replicas_share_one_ca_a_restart_keeps_it_and_an_empty_secret_is_filled(
    api: Any, kube: Any, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube)
    secret = f"webhook-certs-{uuid.uuid4().hex[:6]}"
    a = _keeper(api, tmp_path / "a", secret, namespace).bootstrap()
    b = _keeper(api, tmp_path / "b", secret, namespace).bootstrap()
    assert a == b
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    stored: Any = core.read_namespaced_secret(secret, namespace)
    assert stored.type == "kubernetes.io/tls" and set(stored.data) == {"ca.crt", "tls.crt", "tls.key"}
    version = stored.metadata.resource_version
    restarted = _keeper(api, tmp_path / "c", secret, namespace).bootstrap()  # a replica restarting
    assert restarted == a
    assert core.read_namespaced_secret(secret, namespace).metadata.resource_version == version

    empty = f"webhook-empty-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_secret(namespace, {
        "metadata": {"name": empty}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""},
    })  # fmt: skip
    filled = _keeper(api, tmp_path / "d", empty, namespace).bootstrap()
    got = decode_data({"data": core.read_namespaced_secret(empty, namespace).data})
    assert got["tls.crt"] == filled.cert and _cas(got["ca.crt"]) == _cas(filled.ca)


class Clock:
    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


def _label(req: AdmissionRequest) -> AdmissionResponse:
    before = req.object or {}
    after = copy.deepcopy(dict(before))
    after.setdefault("metadata", {}).setdefault("labels", {})["webhook-seen"] = req.api_version.replace(
        "/", "."
    )
    return AdmissionResponse(True, patch=tuple(json_patch(before, after)))


def _refuse_forbidden(req: AdmissionRequest) -> AdmissionResponse:
    return (
        denied("the key 'forbidden' is refused")
        if "forbidden" in ((req.object or {}).get("data") or {})
        else allowed()
    )


def _configurations(kube: Any, tag: str, name: str, port: int) -> None:
    admission = client.AdmissionregistrationV1Api(kube)

    def webhook(kind: str, path: str, versions: list[str]) -> dict[str, Any]:
        return {
            "name": f"{kind}.{tag}.koordinator.sh", "admissionReviewVersions": versions,
            "sideEffects": "None", "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"url": f"https://127.0.0.1:{port}{path}"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"koord-webhook-test": tag}},
        }  # fmt: skip

    admission.create_mutating_webhook_configuration({
        "metadata": {"name": name}, "webhooks": [webhook("m", "/label", ["v1", "v1beta1"])],
    })  # fmt: skip
    admission.create_validating_webhook_configuration({
        "metadata": {"name": name}, "webhooks": [webhook("v", "/refuse", ["v1beta1"])],
    })  # fmt: skip


def _bundles(kube: Any, name: str) -> list[bytes]:
    admission = client.AdmissionregistrationV1Api(kube)
    out = []
    for read in (
        admission.read_mutating_webhook_configuration,
        admission.read_validating_webhook_configuration,
    ):
        config: Any = read(name)
        out.append(base64.b64decode(config.webhooks[0].client_config.ca_bundle or ""))
    return out


def test_the_api_server_calls_the_webhooks_through_a_rotation(
    api: Any, kube: Any, namespace: str, tmp_path: Path
) -> None:
    core = client.CoreV1Api(kube)
    tag = uuid.uuid4().hex[:6]
    core.patch_namespace(namespace, {"metadata": {"labels": {"koord-webhook-test": tag}}})
    secret, configuration = f"webhook-certs-{tag}", f"koord-test-{tag}"
    real_now = dt.datetime.now(dt.UTC)
    clock = Clock(real_now - dt.timedelta(days=21))  # the first certificate: 9 of its 30 days left
    stop = threading.Event()
    service = start_webhooks(
        api, addr="127.0.0.1:0", namespace=namespace, secret=secret, service_name="koord-manager-webhook",
        hosts=HOSTS, mutating_config=configuration, validating_config=configuration, cert_dir=tmp_path,
        registry=CollectorRegistry(), stop=stop,
        handlers_factory=lambda reads: {"/label": _label, "/refuse": _refuse_forbidden},
        keeper_interval=3600, days=30, clock=clock,
    )  # fmt: skip
    try:
        assert isinstance(service.gateway, WebhookGateway) and service.ready()[0]
        _configurations(kube, tag, configuration, service.port)  # after the first round: not patched yet
        keeper = service.keeper
        assert keeper is not None
        first = keeper.sync()  # the configurations exist now: their caBundle is set
        assert _bundles(kube, configuration) == [first.ca, first.ca]
        _admitted(core, namespace, "before")

        clock.now = real_now  # a third of the lifetime left: a new pair is staged
        staged = keeper.sync()
        assert staged.cert == first.cert and len(_cas(staged.ca)) == 2
        assert NEXT_CRT in decode_data({"data": core.read_namespaced_secret(secret, namespace).data})
        assert _bundles(kube, configuration) == [staged.ca, staged.ca]
        _admitted(core, namespace, "staged")

        clock.now = real_now + dt.timedelta(minutes=11)  # the staged pair is promoted
        promoted = keeper.sync()
        assert promoted.cert != first.cert and _cas(promoted.ca) == _cas(staged.ca)[::-1]
        assert (tmp_path / "tls.crt").read_bytes() == promoted.cert
        _admitted(core, namespace, "promoted")
        assert service.server.cert.loads == 2  # the server took the new certificate without a restart
        assert _bundles(kube, configuration) == [promoted.ca, promoted.ca]
    finally:
        admission = client.AdmissionregistrationV1Api(kube)
        for delete in (admission.delete_mutating_webhook_configuration,
                       admission.delete_validating_webhook_configuration):  # fmt: skip
            try:
                delete(configuration)
            except ApiException as e:
                if e.status != 404:
                    raise
        stop.set()
        service.stop()


def _admitted(core: Any, namespace: str, name: str) -> None:
    """The API server mutates (v1 review) and refuses (v1beta1 review) through our server."""

    def created() -> bool:
        try:
            made: Any = core.create_namespaced_config_map(
                namespace, {"metadata": {"name": name}, "data": {"a": "b"}}
            )
        except ApiException as e:  # the API server may still hold the previous caBundle for a moment
            if "x509" in str(e.body) or "certificate" in str(e.body):
                return False
            raise
        assert made.metadata.labels == {"webhook-seen": "admission.k8s.io.v1"}
        return True

    assert wait_for(created, timeout=20)
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_config_map(
            namespace, {"metadata": {"name": f"{name}-x"}, "data": {"forbidden": "1"}}
        )
    assert refused.value.status == 403 and "the key 'forbidden' is refused" in str(refused.value.body)


def test_without_a_secret_the_files_given_are_served_as_they_are(api: Any, tmp_path: Path) -> None:
    """cert-manager's way: tls.crt/tls.key are someone else's; no keeper, no Secret, no caBundle patch."""
    made = new_serving_cert("koord-manager-webhook", HOSTS)
    (tmp_path / "tls.crt").write_bytes(made.cert)
    (tmp_path / "tls.key").write_bytes(made.key)
    (tmp_path / "ca.crt").write_bytes(made.ca)
    stop = threading.Event()
    service = start_webhooks(
        api, addr="127.0.0.1:0", namespace="unused", secret="", service_name="koord-manager-webhook",
        cert_dir=tmp_path, registry=CollectorRegistry(), stop=stop,
    )  # fmt: skip
    try:
        assert service.keeper is None and service.paths == [
            "/mutate-pod",
            "/validate-configmap",
            "/validate-pod",
        ]
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        conn = http.client.HTTPSConnection("127.0.0.1", service.port, context=ctx, timeout=5)
        try:
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 200
        finally:
            conn.close()
    finally:
        stop.set()
        service.stop()
    assert (tmp_path / "tls.crt").read_bytes() == made.cert  # not touched, not removed
