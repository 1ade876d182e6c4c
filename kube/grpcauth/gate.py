"""How a gRPC server authenticates one call without letting invalid tokens starve valid ones
(docs/rules/manager.md#metrichub-limits; the shard arbiter's, docs/shards.md#security).

1. No bearer token: UNAUTHENTICATED.
2. The authenticator's caches answer first (`lookup`): a known token costs no thread and never waits
   behind TokenReviews; a token known to be invalid (negative cache) is refused.
3. Otherwise a TokenReview is needed. A peer address whose failed-authentication bucket is empty gets
   RESOURCE_EXHAUSTED without one (the asynchronous form after the tarpit's delay); when
   `concurrent_reviews` TokenReviews are already running the call gets UNAVAILABLE at once (it is never
   queued); the API server unreachable: UNAVAILABLE.
4. Every attempt at a review takes one of the peer's failure tokens, given back when the token
   proves valid (or the API server cannot answer); an invalid token: UNAUTHENTICATED.

Two forms of the same steps: `identity` for an asyncio server (the MetricHub: the review runs in the
given pool) and `identity_blocking` for a threaded server (the shard arbiter: the review runs on the
calling thread, the tarpit is skipped so a refusal never holds one of its few threads). Every refusal is
counted by reason (`AuthGate.refused`).

Imports: asyncio, standard library, kube.grpcauth (limits, tokens).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent import futures
from dataclasses import dataclass

from kube.grpcauth.limits import BucketMap, Counts, RefusedError, Tarpit, peer_host
from kube.grpcauth.tokens import Authenticator, AuthUnavailableError, Identity, lookup

__all__ = ["RESOURCE_EXHAUSTED", "UNAUTHENTICATED", "UNAVAILABLE", "AuthGate", "GateLimits"]

UNAUTHENTICATED = "UNAUTHENTICATED"
UNAVAILABLE = "UNAVAILABLE"
RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"


@dataclass(frozen=True)
class GateLimits:
    """The limits the gate reads, with the documented defaults (the MetricHub's HubLimits extends
    them with its own)."""

    concurrent_reviews: int = 4
    auth_failure_rate: float = 0.5  # per second, per peer address
    auth_failure_burst: float = 10.0
    peers_tracked: int = 10_000
    # A rate-limited call is answered only after 0.5-1 x refusal_delay seconds, so a flooder's
    # concurrency, not its speed, bounds what it costs; past max_delayed such calls, at once.
    refusal_delay: float = 2.0
    max_delayed: int = 1_000


class AuthGate:
    def __init__(
        self,
        authenticator: Authenticator,
        limits: GateLimits,
        pool: futures.Executor | None,
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
        self._lock = threading.Lock()  # in_flight: the asyncio form and the threads of a blocking server
        self.in_flight = 0
        self.reviews = 0  # calls sent to the blocking authenticator

    def _refuse(self, code: str, reason: str, details: str) -> RefusedError:
        self.refused.inc(reason)
        return RefusedError(code, reason, details)

    def _cached(self, token: str) -> Identity | None:
        """The identity the caches know; None when a review is needed; RefusedError when refused."""
        if not token:
            raise self._refuse(UNAUTHENTICATED, "missing_token", "missing 'authorization: Bearer <token>'")
        known = lookup(self._auth, token)
        if isinstance(known, Identity):
            return known
        if known is None:
            raise self._refuse(UNAUTHENTICATED, "invalid_token", "invalid bearer token")
        return None

    def _admit(self, host: str) -> float:
        """Takes a failure token and a review slot; returns the peer's wait (> 0: rate-limited, nothing
        taken) or 0.0; RefusedError when every review slot is busy."""
        # An attempt takes one of the peer's failure tokens up front (so a peer never has more reviews
        # running than it has tokens, and spinning on a full review cap drains it), given back when
        # the token proves valid or the API server cannot answer.
        wait = self.failures.take(host)
        if wait > 0:
            return wait
        cap = self._limits.concurrent_reviews
        with self._lock:
            if self.in_flight >= cap:
                busy = True
            else:
                busy = False
                self.in_flight += 1
                self.reviews += 1
        if busy:
            raise self._refuse(UNAVAILABLE, "reviews_busy", f"{cap} token reviews in flight already; retry")
        return 0.0

    def _rate_limited(self, host: str, wait: float) -> RefusedError:
        return self._refuse(
            RESOURCE_EXHAUSTED, "peer_rate_limited",
            f"too many failed authentications from {host}; retry in {wait:.0f}s",
        )  # fmt: skip

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _verdict(self, ident: Identity | None, host: str) -> Identity:
        if ident is None:
            raise self._refuse(UNAUTHENTICATED, "invalid_token", "invalid bearer token")
        self.failures.charge(host, -1.0)
        return ident

    def _unavailable(self, e: AuthUnavailableError, host: str) -> RefusedError:
        self.failures.charge(host, -1.0)
        return self._refuse(UNAVAILABLE, "auth_unavailable", f"cannot authenticate now: {e}")

    async def identity(self, token: str, peer: str) -> Identity:
        """The caller's identity; RefusedError (already counted) when the call may not go on."""
        known = self._cached(token)
        if known is not None:
            return known
        host = peer_host(peer)
        wait = self._admit(host)
        if wait > 0:
            await self.tarpit.hold()
            raise self._rate_limited(host, wait)
        try:
            loop = asyncio.get_running_loop()
            ident = await loop.run_in_executor(self._pool, self._auth.authenticate, token)
        except AuthUnavailableError as e:
            raise self._unavailable(e, host) from None
        finally:
            self._done()
        return self._verdict(ident, host)

    def identity_blocking(self, token: str, peer: str) -> Identity:
        """`identity` for a threaded server: the review runs on the calling thread."""
        known = self._cached(token)
        if known is not None:
            return known
        host = peer_host(peer)
        wait = self._admit(host)
        if wait > 0:
            raise self._rate_limited(host, wait)
        try:
            ident = self._auth.authenticate(token)
        except AuthUnavailableError as e:
            raise self._unavailable(e, host) from None
        finally:
            self._done()
        return self._verdict(ident, host)
