"""The MetricHub's limits on what one sender may cost it (docs/rules/manager.md#metrichub-limits), as
pure decisions over an injected clock: the numbers (`HubLimits`), a token bucket, a bounded map of
buckets (one per node for reports, one per peer address for failed authentications), the refusal
(a gRPC status by name, and the reason it is counted under) and the thread-safe counts the Prometheus
view reads.

Reports: each node has a bucket of `report_burst` tokens refilled at `report_rate` per second; a report
costs one token per started REPORT_TOKEN_BYTES of its length, so a node sends at most ~2 small reports
a second, or one report of 1 MiB every 8 s. Failed authentication: each peer address has a bucket of
`auth_failure_burst` refilled at `auth_failure_rate` per second; every attempt at a TokenReview takes
one (given back when the token proves valid or the API server cannot answer), and a peer with an
empty bucket gets no TokenReview until it refills. At most
`concurrent_reviews` TokenReviews run at once; a call beyond that is refused at once, never queued.
A call refused for its rate is answered after 0.5-1 x `refusal_delay` seconds: a flooder then pays
with its concurrency instead of the hub's CPU (`Tarpit`).
The buckets, tarpit, refusal and counts are kube.grpcauth.limits (shared with the shard arbiter),
re-exported here.
Imports: apis.reportlimits, kube.grpcauth (gate, limits).
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.reportlimits import MAX_REPORT_BYTES
from kube.grpcauth.gate import GateLimits
from kube.grpcauth.limits import BucketMap, Counts, RefusedError, Tarpit, TokenBucket, peer_host

__all__ = [
    "REPORT_TOKEN_BYTES", "BucketMap", "Counts", "HubLimits", "RefusedError", "Tarpit", "TokenBucket",
    "peer_host", "report_cost",
]  # fmt: skip

REPORT_TOKEN_BYTES = 64 * 1024


@dataclass(frozen=True)
class HubLimits(GateLimits):
    """Every limit of the hub (the authentication gate's, GateLimits, and the reports'); the defaults
    are the documented ones."""

    report_bytes: int = MAX_REPORT_BYTES
    report_rate: float = 2.0  # tokens per second, per node
    report_burst: float = 20.0  # a bucket's size: one report of MAX_REPORT_BYTES costs 16
    report_nodes_tracked: int = 100_000  # buckets kept (least recently used dropped first)
    # A report larger than this is checked off the event loop, in the hub's blocking pool.
    inline_check_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        if report_cost(self.report_bytes) > self.report_burst:
            raise ValueError(
                f"report_burst {self.report_burst} is below the cost of a largest report "
                f"({report_cost(self.report_bytes)} tokens)"
            )


def report_cost(size: int) -> int:
    """Tokens a report of `size` bytes costs: one per started REPORT_TOKEN_BYTES (at least one)."""
    return max(1, -(-size // REPORT_TOKEN_BYTES))
