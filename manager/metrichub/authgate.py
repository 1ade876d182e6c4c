"""How the MetricHub authenticates one call without letting invalid tokens starve valid ones
(docs/rules/manager.md#metrichub-limits). Runs on the hub's event loop.

1. No bearer token: UNAUTHENTICATED.
2. The authenticator's caches answer first, on the loop (`auth.lookup`): a known token costs no thread
   and never waits behind TokenReviews; a token known to be invalid (negative cache) is refused.
3. Otherwise a TokenReview is needed. A peer address whose failed-authentication bucket is empty gets
   RESOURCE_EXHAUSTED without one (after the tarpit's delay); when `concurrent_reviews` TokenReviews
   are already running the call gets UNAVAILABLE at once (it is never queued); the API server
   unreachable: UNAVAILABLE.
4. Every attempt at a review takes one of the peer's failure tokens, given back when the token
   proves valid (or the API server cannot answer); an invalid token: UNAUTHENTICATED.

Every refusal is counted by reason (`AuthGate.refused`). The in-flight count is touched only on the
loop, so it needs no lock.

The gate itself is kube.grpcauth.gate (shared with the shard arbiter); the hub builds it with its
HubLimits and its blocking pool (manager.metrichub.server).
Imports: kube.grpcauth.gate.
"""

from __future__ import annotations

from kube.grpcauth.gate import RESOURCE_EXHAUSTED, UNAUTHENTICATED, UNAVAILABLE, AuthGate

__all__ = ["RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "UNAVAILABLE", "AuthGate"]
