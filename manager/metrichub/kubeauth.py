"""The hub's Kubernetes adapters for authentication: a TokenReview `review` callable and a pod → node
lookup, both over a kubernetes ApiClient (the manager's; it needs `create tokenreviews` — e.g. the
system:auth-delegator ClusterRole — and `get pods`).

Imports: the kubernetes client (the only module of manager.metrichub that does), standard library,
manager.metrichub.auth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client as _client

from manager.metrichub.auth import PodNodeFunc, ReviewFunc, TokenReviewAuthenticator

k8s: Any = _client  # the kubernetes client is treated as untyped


def token_reviewer(api: Any, audiences: Sequence[str] = ()) -> ReviewFunc:
    """review(token) → TokenReview status dict, via POST authentication.k8s.io/v1 tokenreviews."""
    authn = k8s.AuthenticationV1Api(api)

    def review(token: str) -> Mapping[str, Any]:
        spec = k8s.V1TokenReviewSpec(token=token, audiences=list(audiences) or None)
        result = authn.create_token_review(k8s.V1TokenReview(spec=spec))
        status = result.status
        if status is None:
            return {"authenticated": False}
        user = status.user
        return {
            "authenticated": bool(status.authenticated),
            "error": status.error or "",
            "user": {
                "username": user.username if user else "",
                "groups": list(user.groups or []) if user else [],
                "extra": dict(user.extra or {}) if user else {},
            },
        }

    return review


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


def tokenreview_authenticator(
    api: Any, audiences: Sequence[str] = (), **kwargs: Any
) -> TokenReviewAuthenticator:
    """A TokenReviewAuthenticator over api (kwargs: ttl, negative_ttl, max_entries)."""
    return TokenReviewAuthenticator(token_reviewer(api, audiences), **kwargs)
