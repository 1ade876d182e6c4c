"""The admission webhooks' Kubernetes gateway: the only module of manager.webhook that talks to the API
server.

Reads, from shared informers (manager.kubeapi.SharedInformer): ClusterColocationProfiles, Namespaces
and PriorityClasses, which the pod mutation consults on every request. The profiles' CRD may not be
installed: its informer then lists, gets 404, retries with backoff, and until it lists the
webhooks see no profiles (``profiles_synced`` says which). ``wait_synced`` waits for the namespaces
and priority classes only. Writes, for the certificate keeper (manager.webhook.certkeeper): the
certificate Secret (create unless it exists, get, update guarded by its resourceVersion) and JSON
patches of the two webhook configurations (their caBundle). Every API failure leaves as a
``GatewayError`` (``conflict``, ``not_found``).
Imports: the standard library, the kubernetes client, apis.{constants,kubeobjects}, manager.kubeapi.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kubernetes import client

from apis import constants as c
from apis.kubeobjects import CustomResource, KubeObject
from manager.kubeapi import GatewayError, SharedInformer, call

__all__ = ["WebhookConfigKind", "WebhookGateway"]

PROFILE_GROUP, PROFILE_VERSION = c.CONFIG_GROUP, c.CONFIG_VERSION
PROFILE_PLURAL = c.CLUSTER_COLOCATION_PROFILE_PLURAL
JSON_PATCH = "application/json-patch+json"

WebhookConfigKind = Literal["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


class WebhookGateway:
    """Informer caches and writes for the admission webhooks (see the module docstring). ``api`` is a
    ``kubernetes.client.ApiClient``."""

    def __init__(self, api: Any, *, resync_seconds: float = 0) -> None:
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.scheduling: Any = client.SchedulingV1Api(api)
        self.admission: Any = client.AdmissionregistrationV1Api(api)
        self.profiles_informer: SharedInformer[CustomResource] = SharedInformer(
            self.custom.list_cluster_custom_object,
            kwargs={"group": PROFILE_GROUP, "version": PROFILE_VERSION, "plural": PROFILE_PLURAL},
            name="clustercolocationprofiles",
            resync_seconds=resync_seconds,
        )
        self.namespaces: SharedInformer[KubeObject] = SharedInformer(
            self.core.list_namespace, name="namespaces", resync_seconds=resync_seconds
        )
        self.priority_classes_informer: SharedInformer[KubeObject] = SharedInformer(
            self.scheduling.list_priority_class, name="priorityclasses", resync_seconds=resync_seconds
        )
        self.informers = (self.profiles_informer, self.namespaces, self.priority_classes_informer)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        return [inf.start(stop) for inf in self.informers]

    def wait_synced(self, timeout: float) -> bool:
        """Namespaces and PriorityClasses listed (the profiles' CRD may be missing: not waited for)."""
        deadline = time.monotonic() + timeout
        return all(
            inf.wait_synced(max(0.0, deadline - time.monotonic()))
            for inf in (self.namespaces, self.priority_classes_informer)
        )

    @property
    def profiles_synced(self) -> bool:
        return self.profiles_informer.has_synced

    # -- reads (informer caches; objects are read-only) ---------------------------------------------------

    def profiles(self) -> list[CustomResource]:
        """Every ClusterColocationProfile known (none before the first successful list)."""
        store = self.profiles_informer.informer.store()
        return [store[k] for k in sorted(store)]

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of Namespace ``name``; None when it is not known (not listed yet, or absent)."""
        ns = self.namespaces.get(name)
        if ns is None:
            return None
        return (ns.get("metadata") or {}).get("labels") or {}

    def priority_classes(self) -> dict[str, KubeObject]:
        """PriorityClasses by name."""
        return dict(self.priority_classes_informer.informer.store())

    # -- the certificate Secret ---------------------------------------------------------------------------

    def create_or_read_secret(self, body: dict[str, Any]) -> dict[str, Any]:
        """Creates the Secret ``body`` unless one of its name exists; the stored Secret either way (of
        replicas starting at once the first writer wins and the others read its Secret)."""
        name, namespace = body["metadata"]["name"], body["metadata"]["namespace"]
        try:
            return call("create", "Secret", name, self.core.create_namespaced_secret, namespace, body)
        except GatewayError as e:
            if not e.conflict:
                raise
        return call("get", "Secret", name, self.core.read_namespaced_secret, name, namespace)

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return call("get", "Secret", name, self.core.read_namespaced_secret, name, namespace)
        except GatewayError as e:
            if e.not_found:
                return None
            raise

    def update_secret(self, secret: Mapping[str, Any]) -> dict[str, Any]:
        """PUT ``secret`` as read and changed: its metadata.resourceVersion guards the write (a
        ``GatewayError`` with ``conflict`` when another replica wrote first)."""
        meta = secret.get("metadata") or {}
        name, namespace = str(meta.get("name")), str(meta.get("namespace"))
        replace = self.core.replace_namespaced_secret
        return call("update", "Secret", name, replace, name, namespace, dict(secret))

    # -- webhook configurations ---------------------------------------------------------------------------

    def read_webhook_configuration(self, kind: WebhookConfigKind, name: str) -> dict[str, Any] | None:
        """The configuration ``name``; None when it does not exist."""
        read = (
            self.admission.read_mutating_webhook_configuration
            if kind == "MutatingWebhookConfiguration"
            else self.admission.read_validating_webhook_configuration
        )
        try:
            return call("get", kind, name, read, name)
        except GatewayError as e:
            if e.not_found:
                return None
            raise

    def patch_webhook_configuration(
        self, kind: WebhookConfigKind, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """A JSON patch (RFC 6902) of the configuration; its ``test`` operations make it fail (422) when
        the webhooks moved since they were read."""
        patch = (
            self.admission.patch_mutating_webhook_configuration
            if kind == "MutatingWebhookConfiguration"
            else self.admission.patch_validating_webhook_configuration
        )
        body = [dict(op) for op in ops]
        return call("patch", kind, name, patch, name, body, _content_type=JSON_PATCH)
