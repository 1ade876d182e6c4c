"""The hub's Kubernetes adapters for authentication: the pod → node lookup over a kubernetes ApiClient
(the manager's; it needs `get pods`), and the TokenReview authenticator of kube.grpcauth.kubeauth
(re-exported; it needs `create tokenreviews`, e.g. the system:auth-delegator ClusterRole).

Imports: the kubernetes client (the only module of manager.metrichub that does), kube.grpcauth.kubeauth,
manager.metrichub.auth.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client as _client

from kube.grpcauth.kubeauth import token_reviewer, tokenreview_authenticator
from manager.metrichub.auth import PodNodeFunc

__all__ = ["pod_node_lookup", "token_reviewer", "tokenreview_authenticator"]

k8s: Any = _client  # the kubernetes client is treated as untyped


def pod_node_lookup(api: Any) -> PodNodeFunc:
    """pod_node(namespace, name, uid) → spec.nodeName; None when the pod is gone, replaced (uid
    differs) or not scheduled."""
    core = k8s.CoreV1Api(api)

    def pod_node(namespace: str, name: str, uid: str | None) -> str | None:
        try:
            pod = core.read_namespaced_pod(name, namespace)
        except k8s.exceptions.ApiException as e:
            if e.status == 404:
                return None
            raise
        if uid and pod.metadata.uid != uid:
            return None
        return pod.spec.node_name or None

    return pod_node
