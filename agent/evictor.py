"""The koordlet's evictor (docs/rules/koordlet.md#how-a-pod-is-evicted): carries out
the ``Evict`` actions of the memory/CPU evict strategies, always through the Eviction API (``policy/v1``, or
``policy/v1beta1`` on servers without it, discovered by ``start``) with a UID precondition, so
PodDisruptionBudgets hold.

Outcomes: 201 → evicted (UID remembered 2 minutes: not evicted again, reported as pending release by
``pending_uids``); 429 (PDB or API rate) → "pending", retried on a later tick (the strategy's cool-down
paces it); 404 → gone; anything else (409 UID mismatch, 500, transport) → failed, retried on a later tick
but not before its backoff (``retry_backoff_seconds`` doubled per consecutive failure, at most
``retry_backoff_max_seconds``): asked sooner, the evictor answers "backoff" without calling the API, so
a failing API server is not hammered. Every attempt writes one audit JSON
line; success and failure raise a Warning Event on the pod (``evictPodSuccess`` / ``evictPodFail``,
upstream's message), a 429 for the same pod at most once a minute. Success increments
``koordlet_pod_eviction{node,reason}`` and
``koordlet_pod_eviction_detail{node,pod_namespace,pod_name,reason}``; detail series are removed after
``detail_ttl_seconds`` without increments.

Imports: standard library, prometheus_client, agent.{gateway,resourceexecutor.actions}.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from prometheus_client import CollectorRegistry, Counter

from agent.gateway import GatewayError, KubeGateway
from agent.resourceexecutor.actions import Evict

__all__ = ["EvictOutcome", "EvictReport", "Evictor"]

log = logging.getLogger(__name__)
audit_log = logging.getLogger("koordlet.audit")

EVICTED_TTL_SECONDS: Final = 120.0
DETAIL_TTL_SECONDS: Final = 600.0
FAIL_EVENT_INTERVAL_SECONDS: Final = 60.0
RETRY_BACKOFF_SECONDS: Final = 5.0
RETRY_BACKOFF_MAX_SECONDS: Final = 60.0
REASON_SUCCESS: Final = "evictPodSuccess"
REASON_FAIL: Final = "evictPodFail"


class EvictOutcome:
    EVICTED: Final = "evicted"
    PENDING: Final = "pending"
    GONE: Final = "gone"
    FAILED: Final = "failed"
    SKIPPED: Final = "skipped"
    """Already evicted within the TTL: not evicted again."""
    BACKOFF: Final = "backoff"
    """Failed lately and its retry time has not come: not attempted (no API call)."""


@dataclass
class EvictReport:
    outcomes: dict[str, str] = field(default_factory=dict)
    """pod UID → outcome."""

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Evictor:
    def __init__(
        self,
        gateway: KubeGateway,
        registry: CollectorRegistry,
        *,
        audit: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        evicted_ttl_seconds: float = EVICTED_TTL_SECONDS,
        detail_ttl_seconds: float = DETAIL_TTL_SECONDS,
        retry_backoff_seconds: float = RETRY_BACKOFF_SECONDS,
        retry_backoff_max_seconds: float = RETRY_BACKOFF_MAX_SECONDS,
    ) -> None:
        self.gateway = gateway
        self.node = gateway.node_name
        self._audit = audit or audit_log.info
        self._clock = clock
        self._evicted_ttl = evicted_ttl_seconds
        self._detail_ttl = detail_ttl_seconds
        self._backoff = retry_backoff_seconds
        self._backoff_max = max(retry_backoff_seconds, retry_backoff_max_seconds)
        self._lock = threading.Lock()
        self._evicted: dict[str, float] = {}  # uid → eviction time
        self._fail_events: dict[str, float] = {}  # uid → last 429 Event time
        self._retry: dict[str, tuple[float, int]] = {}  # uid → (not before, consecutive failures)
        self._detail_seen: dict[tuple[str, str, str, str], float] = {}
        self.api_version: str | None = None
        self.evictions = Counter(
            "koordlet_pod_eviction", "Pods evicted by the koordlet", ["node", "reason"], registry=registry
        )
        # koord: every attempt by strategy, reason and outcome (upstream's counters count successes only).
        self.attempts = Counter(
            "koordlet_eviction_attempts",
            "Eviction attempts by strategy, reason and outcome (evicted, pending, gone, failed)",
            ["node", "strategy", "reason", "outcome"],
            registry=registry,
        )
        self.eviction_detail = Counter(
            "koordlet_pod_eviction_detail",
            "Pods evicted by the koordlet, per pod (series removed after a while)",
            ["node", "pod_namespace", "pod_name", "reason"],
            registry=registry,
        )

    def start(self) -> str:
        """Discover the Eviction API version (``policy/v1`` or ``policy/v1beta1``)."""
        self.api_version = self.gateway.eviction_api_version()
        log.info("evictor: using %s Eviction", self.api_version)
        return self.api_version

    def pending_uids(self) -> frozenset[str]:
        """UIDs evicted within the TTL (pending release: the strategies do not evict them again)."""
        with self._lock:
            self._expire(self._clock())
            return frozenset(self._evicted)

    def _expire(self, now: float) -> None:
        for uid in [u for u, t in self._evicted.items() if now - t >= self._evicted_ttl]:
            del self._evicted[uid]
        for uid in [u for u, t in self._fail_events.items() if now - t >= FAIL_EVENT_INTERVAL_SECONDS]:
            del self._fail_events[uid]
        # A pod not asked for again a whole cap after its retry time is no longer a candidate (or gone):
        # forgotten, so the memory holds only the pods refused lately.
        for uid in [u for u, (t, _) in self._retry.items() if now - t >= self._backoff_max]:
            del self._retry[uid]
        for key in [k for k, t in self._detail_seen.items() if now - t >= self._detail_ttl]:
            del self._detail_seen[key]
            with contextlib.suppress(KeyError):
                self.eviction_detail.remove(*key)

    def evict(self, actions: Sequence[Evict]) -> EvictReport:
        """Carry out one round of evictions (in order); never raises for a single pod's failure."""
        if self.api_version is None:
            self.start()
        report = EvictReport()
        for action in actions:
            report.outcomes[action.pod.uid] = self._evict_one(action)
        return report

    def _evict_one(self, action: Evict) -> str:
        pod = action.pod
        now = self._clock()
        with self._lock:
            self._expire(now)
            if pod.uid in self._evicted:
                return EvictOutcome.SKIPPED
            retry = self._retry.get(pod.uid)
            if retry is not None and now < retry[0]:
                log.debug("evicting pod %s/%s: retry in %.1fs", pod.namespace, pod.name, retry[0] - now)
                return EvictOutcome.BACKOFF
        status: int | None = None
        error = ""
        try:
            self.gateway.evict_pod(pod.namespace, pod.name, pod.uid, self.api_version or "policy/v1")
            outcome = EvictOutcome.EVICTED
        except GatewayError as e:
            status, error = e.status, str(e)
            outcome = {429: EvictOutcome.PENDING, 404: EvictOutcome.GONE}.get(
                status or 0, EvictOutcome.FAILED
            )
        self._write_audit(action, outcome, status, error, now)
        self.attempts.labels(self.node, action.strategy, action.reason, str(outcome)).inc()
        with self._lock:
            if outcome in (EvictOutcome.EVICTED, EvictOutcome.GONE):
                self._evicted[pod.uid] = now
            if outcome == EvictOutcome.FAILED:  # retried from a later tick, after a growing pause
                failures = (retry[1] if retry is not None else 0) + 1
                delay = min(self._backoff * 2.0 ** min(failures - 1, 32), self._backoff_max)
                self._retry[pod.uid] = (now + delay, failures)
            else:  # the API answered: evicted, gone, or a 429 the strategy's cool-down paces
                self._retry.pop(pod.uid, None)
        if outcome == EvictOutcome.EVICTED:
            self.evictions.labels(self.node, action.reason).inc()
            key = (self.node, pod.namespace, pod.name, action.reason)
            self.eviction_detail.labels(*key).inc()
            with self._lock:
                self._detail_seen[key] = now
            self._event(action, REASON_SUCCESS, now)
            log.info("evicted pod %s/%s (%s): %s", pod.namespace, pod.name, action.strategy, action.message)
        elif outcome != EvictOutcome.GONE:
            with self._lock:
                quiet = outcome == EvictOutcome.PENDING and pod.uid in self._fail_events
                if outcome == EvictOutcome.PENDING and not quiet:
                    self._fail_events[pod.uid] = now
            if not quiet:
                self._event(action, REASON_FAIL, now, error)
            log.warning(
                "evicting pod %s/%s (%s) %s: %s", pod.namespace, pod.name, action.strategy, outcome, error
            )
        return outcome

    def _write_audit(self, action: Evict, outcome: str, status: int | None, error: str, now: float) -> None:
        record = {
            "time": _rfc3339(now),
            "node": self.node,
            "action": "evictPod",
            "strategy": action.strategy,
            "pod": {"namespace": action.pod.namespace, "name": action.pod.name, "uid": action.pod.uid},
            "reason": action.reason,
            "message": action.message,
            "releasedBytes": action.released_bytes,
            "releasedMilliCPU": action.released_milli_cpu,
            "apiVersion": self.api_version,
            "outcome": outcome,
            "status": status,
            "error": error or None,
        }
        try:
            self._audit(json.dumps(record, sort_keys=True))
        except Exception:
            log.exception("audit record lost")

    def _event(self, action: Evict, reason: str, now: float, error: str = "") -> None:
        pod = action.pod
        message = (
            f"evict Pod:{pod.namespace}/{pod.name}, reason: {action.reason}, message: {action.message}"
            + (f", error: {error}" if error else "")
        )
        stamp = _rfc3339(now)
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{pod.name}.{time.time_ns():x}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": pod.namespace,
                "name": pod.name,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "koordlet", "host": self.node},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": "koordlet",
            "reportingInstance": self.node,
        }
        try:
            self.gateway.create_event(event)
        except GatewayError as e:
            log.warning("event %s for pod %s/%s not recorded: %s", reason, pod.namespace, pod.name, e)
