"""manager.webhook.gateway on the real API server: namespace labels (None for a namespace it does not
know), PriorityClasses by name, ClusterColocationProfiles listed — or, without their CRD, none and the
list retried — and a caBundle patch refused when its test operation finds the webhooks moved."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from koord.localcluster.controlplane import ControlPlane
from manager.kubeapi import GatewayError
from manager.webhook.gateway import PROFILE_GROUP, PROFILE_PLURAL, PROFILE_VERSION, WebhookGateway
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver


@pytest.fixture()
def gateway(control_plane: ControlPlane) -> Iterator[WebhookGateway]:
    api = control_plane.api_client()
    gw = WebhookGateway(api)
    stop = threading.Event()
    threads = gw.start(stop)
    try:
        assert gw.wait_synced(20)
        yield gw
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        api.close()


def _crd_installed(kube: Any) -> bool:
    try:
        client.ApiextensionsV1Api(kube).read_custom_resource_definition(f"{PROFILE_PLURAL}.{PROFILE_GROUP}")
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def test_reads(gateway: WebhookGateway, kube: Any, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    core.patch_namespace(namespace, {"metadata": {"labels": {"team": "batch"}}})
    assert wait_for(lambda: (gateway.namespace_labels(namespace) or {}).get("team") == "batch")
    assert gateway.namespace_labels(f"absent-{uuid.uuid4().hex[:6]}") is None
    assert gateway.priority_classes()["system-node-critical"].get("value") == 2000001000  # type: ignore[typeddict-item]
    if not _crd_installed(kube):
        assert gateway.profiles() == [] and not gateway.profiles_synced
        return
    assert wait_for(lambda: gateway.profiles_synced)
    name = f"profile-{uuid.uuid4().hex[:6]}"
    custom = client.CustomObjectsApi(kube)
    body = {"apiVersion": f"{PROFILE_GROUP}/{PROFILE_VERSION}", "kind": "ClusterColocationProfile",
            "metadata": {"name": name}, "spec": {"qosClass": "BE"}}  # fmt: skip
    custom.create_cluster_custom_object(PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL, body)
    try:
        assert wait_for(lambda: name in [p["metadata"]["name"] for p in gateway.profiles()])
    finally:
        custom.delete_cluster_custom_object(PROFILE_GROUP, PROFILE_VERSION, PROFILE_PLURAL, name)


def test_a_patch_whose_test_fails_is_refused(gateway: WebhookGateway, kube: Any) -> None:
    admission = client.AdmissionregistrationV1Api(kube)
    name = f"koord-test-{uuid.uuid4().hex[:6]}"
    admission.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [{
        "name": "v.koordinator.sh", "admissionReviewVersions": ["v1"], "sideEffects": "None",
        "clientConfig": {"url": "https://127.0.0.1:1/x"}, "rules": [],
    }]})  # fmt: skip
    try:
        kind = "ValidatingWebhookConfiguration"
        assert gateway.read_webhook_configuration(kind, f"{name}-absent") is None
        with pytest.raises(GatewayError) as moved:
            gateway.patch_webhook_configuration(kind, name, [
                {"op": "test", "path": "/webhooks/0/name", "value": "other.koordinator.sh"},
                {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Zm9v"},
            ])  # fmt: skip
        assert moved.value.status == 422
        patched = gateway.patch_webhook_configuration(kind, name, [
            {"op": "test", "path": "/webhooks/0/name", "value": "v.koordinator.sh"},
            {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Zm9v"},
        ])  # fmt: skip
        assert patched["webhooks"][0]["clientConfig"]["caBundle"] == "Zm9v"
        stored = gateway.read_webhook_configuration(kind, name)
        assert stored is not None and stored["webhooks"][0]["clientConfig"]["caBundle"] == "Zm9v"
    finally:
        admission.delete_validating_webhook_configuration(name)
