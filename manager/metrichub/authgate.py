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

Imports: asyncio, standard library, manager.metrichub (auth, limits).
"""

from __future__ import annotations

import asyncio
from concurrent import futures

from manager.metrichub.auth import Authenticator, AuthUnavailableError, Identity, lookup
from manager.metrichub.limits import BucketMap, Counts, HubLimits, RefusedError, Tarpit, peer_host

__all__ = ["AuthGate"]

UNAUTHENTICATED = "UNAUTHENTICATED"
UNAVAILABLE = "UNAVAILABLE"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


class AuthGate:
    def __init__(
        self,
        authenticator: Authenticator,
        limits: HubLimits,
        pool: futures.Executor,
        refused: Counts,
        failures: BucketMap | None = None,
        tarpit: Tarpit | None = None,
    ) -> None:
        self._auth = authenticator
        self._limits = limits
        self._pool = pool
        self.refused = refused
        self.failures = failures or BucketMap(
            limits.auth_failure_rate, limits.auth_failure_burst, limits.peers_tracked
        )
        self.tarpit = tarpit or Tarpit(limits.refusal_delay, limits.max_delayed)
        self.in_flight = 0
        self.reviews = 0  # calls sent to the blocking authenticator

    def _refuse(self, code: str, reason: str, details: str) -> RefusedError:
        self.refused.inc(reason)
        return RefusedError(code, reason, details)

    async def identity(self, token: str, peer: str) -> Identity:
        """The caller's identity; RefusedError (already counted) when the call may not go on."""
        if not token:
            raise self._refuse(UNAUTHENTICATED, "missing_token", "missing 'authorization: Bearer <token>'")
        known = lookup(self._auth, token)
        if isinstance(known, Identity):
            return known
        if known is None:
            raise self._refuse(UNAUTHENTICATED, "invalid_token", "invalid bearer token")
        return await self._review(token, peer_host(peer))

    async def _review(self, token: str, host: str) -> Identity:
        # An attempt takes one of the peer's failure tokens up front (so a peer never has more reviews
        # running than it has tokens, and spinning on a full review cap drains it), given back when
        # the token proves valid or the API server cannot answer.
        wait = self.failures.take(host)
        if wait > 0:
            await self.tarpit.hold()
            raise self._refuse(
                RESOURCE_EXHAUSTED, "peer_rate_limited",
                f"too many failed authentications from {host}; retry in {wait:.0f}s",
            )  # fmt: skip
        cap = self._limits.concurrent_reviews
        if self.in_flight >= cap:
            raise self._refuse(UNAVAILABLE, "reviews_busy", f"{cap} token reviews in flight already; retry")
        self.in_flight += 1
        self.reviews += 1
        try:
            loop = asyncio.get_running_loop()
            ident = await loop.run_in_executor(self._pool, self._auth.authenticate, token)
        except AuthUnavailableError as e:
            self.failures.charge(host, -1.0)
            raise self._refuse(UNAVAILABLE, "auth_unavailable", f"cannot authenticate now: {e}") from None
        finally:
            self.in_flight -= 1
        if ident is None:
            raise self._refuse(UNAUTHENTICATED, "invalid_token", "invalid bearer token")
        self.failures.charge(host, -1.0)
        return ident
