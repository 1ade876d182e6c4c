"""A TokenReview `review` callable over a kubernetes ApiClient (the caller's; it needs `create
tokenreviews`, e.g. the system:auth-delegator ClusterRole), and the cached authenticator built on it
(kube.grpcauth.tokens; docs/shards.md#security).

Imports: the kubernetes client, standard library, kube.grpcauth.tokens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubernetes import client as _client

from kube.grpcauth.tokens import ReviewFunc, TokenReviewAuthenticator

__all__ = ["token_reviewer", "tokenreview_authenticator"]

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


def tokenreview_authenticator(
    api: Any, audiences: Sequence[str] = (), **kwargs: Any
) -> TokenReviewAuthenticator:
    """A TokenReviewAuthenticator over api (kwargs: ttl, negative_ttl, max_entries)."""
    return TokenReviewAuthenticator(token_reviewer(api, audiences), **kwargs)
