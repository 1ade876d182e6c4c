"""Leader election on a ``coordination.k8s.io/v1`` Lease with client-go's semantics. A candidate takes
the lease when it is absent, has no holder, is already held by this identity, or has expired: its
record (holder, times, duration, transitions) has not changed for ``leaseDurationSeconds`` by the
candidate's own clock since it last *observed* a change (so clock skew between hosts does not
matter). The leader renews every ``retry_period`` and stops leading when renewing has not succeeded
for ``renew_deadline``. ``leaseTransitions`` counts holder changes; every write carries the observed
resourceVersion, so a 409 Conflict means another candidate won the race. On stop the leader releases
the lease (empty holder) so a standby takes over at once instead of after a lease duration.

Leading ends on time (docs/architecture.md#leader-election): every Lease request has a hard deadline
and is sent once (its own ApiClient, no urllib3 retries, no rate limiter), and ``is_leading()`` turns
false by the elector's own monotonic clock once the lease may have expired — the start of the last
successful renewal plus the lease duration, less a margin — even while a renewal still hangs, so
leader-only writers that check it stop before a standby can take over. ``run_forever`` campaigns
again after losing; a replica that lost the lease waits out a full lease duration of an unchanged
record before taking it again, even one naming itself, as a restarted replica would.

Imports: the kubernetes client, kube.client and the standard library only.
"""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.client import dedicated_client

__all__ = ["LeaderElector", "micro_time"]

log = logging.getLogger(__name__)

_RECORD_FIELDS = ("holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions")


def micro_time(at: datetime | None = None) -> str:
    """A Kubernetes MicroTime (RFC 3339, microseconds, UTC)."""
    return (at or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Elects one leader among the candidates sharing the Lease ``namespace/name``.

    ``api`` is a ``kubernetes.client.ApiClient``, whose server and credentials the elector uses on a
    client of its own (``kube.client.dedicated_client``); or a ``CoordinationV1Api``, used as it is.
    ``run(stop)`` blocks: it campaigns until it leads, renews until ``stop`` is set or leadership is
    lost, then returns. ``run_forever(stop)`` runs terms until ``stop``: after losing it campaigns
    again. ``on_started_leading()`` and ``on_stopped_leading()`` are called on the ``run`` thread,
    alternately, starting with the first; they must return quickly (start or stop work on other
    threads). ``clock`` is a monotonic clock in seconds, used for every expiry judgement.
    ``margin`` (default: half the gap between lease duration and renew deadline, at most 2 s) is how
    long before the lease may expire ``is_leading()`` turns false: time for a write let through just
    before to land.
    """

    def __init__(
        self,
        api: Any,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        release_on_cancel: bool = True,
        margin: float | None = None,
    ) -> None:
        if not identity:
            raise ValueError("identity must not be empty")
        if not lease_duration > renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration}) must exceed renew_deadline ({renew_deadline})"
            )
        if not renew_deadline > retry_period > 0:
            raise ValueError(
                f"renew_deadline ({renew_deadline}) must exceed retry_period ({retry_period}) > 0"
            )
        self._own_client: Any = None
        if hasattr(api, "read_namespaced_lease"):
            self._leases: Any = api
        else:
            self._own_client = dedicated_client(api)
            self._leases = client.CoordinationV1Api(self._own_client)
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        gap = self.lease_duration - self.renew_deadline
        self.margin = min(2.0, gap / 2) if margin is None else float(margin)
        if not 0 <= self.margin < self.lease_duration:
            raise ValueError(f"margin ({margin}) must be in [0, lease_duration)")
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self.release_on_cancel = release_on_cancel
        self._observed: dict[str, Any] | None = None  # the lease record last seen (spec fields)
        self._observed_time = 0.0  # when (by clock) the record last changed
        self._observed_rv: str | None = None
        self._leading = False
        self._last_renew = -math.inf  # when (by clock) the last successful renewal was *sent*
        self._rejoining = False  # lost the lease: a record naming us is no longer ours to renew
        self._lock = threading.Lock()

    # -- state ---------------------------------------------------------------------------------------

    def is_leading(self) -> bool:
        """Leading, and the lease cannot have expired yet: less than the lease duration (less the
        margin) has passed since the last successful renewal was sent. Cheap; call before each write."""
        with self._lock:
            if not self._leading:
                return False
            return self._clock() < self._last_renew + self.lease_duration - self.margin

    is_leader = is_leading

    @property
    def renewed_at(self) -> float:
        """When (by ``clock``) the last successful acquisition or renewal was sent; -inf before one."""
        with self._lock:
            return self._last_renew

    def leader(self) -> str:
        """The holder identity last observed on the lease ('' when none)."""
        with self._lock:
            return str((self._observed or {}).get("holderIdentity") or "")

    # -- the loop ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """One term: campaign until leading (or ``stop``), renew until ``stop`` or the lease is lost."""
        try:
            self._term(stop)
        finally:
            if self._own_client is not None:
                self._own_client.close()  # drops pooled connections; the next request opens new ones

    def run_forever(self, stop: threading.Event) -> None:
        """Terms until ``stop``: a replica that lost the lease stands by and campaigns again."""
        while not stop.is_set():
            self.run(stop)

    def _term(self, stop: threading.Event) -> None:
        if not self._acquire(stop):
            return
        with self._lock:
            self._leading = True
            self._rejoining = False
        log.info("lease %s/%s: %s started leading", self.namespace, self.name, self.identity)
        self._callback(self._on_started)
        try:
            self._renew(stop)
        finally:
            with self._lock:
                self._leading = False
                # What we saw of the lease before losing it is stale (a standby may have taken it):
                # observe it afresh and wait out a full lease duration, as any new candidate would.
                self._rejoining = True
                self._observed, self._observed_rv = None, None
            if stop.is_set() and self.release_on_cancel:
                self.release()
            log.info("lease %s/%s: %s stopped leading", self.namespace, self.name, self.identity)
            self._callback(self._on_stopped)

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self._try_acquire_or_renew(self._clock() + self.renew_deadline):
                return True
            # Jittered, but never longer than one retry period, so a released lease is taken within one.
            stop.wait(self.retry_period * random.uniform(0.8, 1.0))
        return False

    def _renew(self, stop: threading.Event) -> None:
        while not stop.wait(self.retry_period):
            with self._lock:
                expires = self._last_renew + self.lease_duration - self.margin
            deadline = min(self._clock() + self.renew_deadline, expires)
            while True:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    log.warning(
                        "lease %s/%s: %s failed to renew within %.1fs",
                        *(self.namespace, self.name, self.identity, self.renew_deadline),
                    )
                    return
                if self._try_acquire_or_renew(deadline):
                    break
                if stop.wait(min(self.retry_period, max(0.0, deadline - self._clock()))):
                    return

    def _callback(self, fn: Callable[[], None] | None) -> None:
        if fn is None:
            return
        try:
            fn()
        except Exception:
            log.exception("lease %s/%s: leader election callback failed", self.namespace, self.name)

    # -- one attempt -----------------------------------------------------------------------------------

    def _observe(self, record: dict[str, Any], rv: str | None) -> None:
        with self._lock:
            if record != self._observed:
                self._observed = record
                self._observed_time = self._clock()
            self._observed_rv = rv

    def _try_acquire_or_renew(self, deadline: float) -> bool:
        """One attempt to take or renew the lease, ending by ``deadline`` (by clock); False if someone
        else holds it, won a race, or the API did not answer in time."""
        sent = self._clock()
        now = micro_time()
        desired: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        try:
            lease = self._read(self._timeout(deadline))
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": desired,
                }
                created = self._call(
                    "create_namespaced_lease", self.namespace, body, timeout=self._timeout(deadline)
                )
                self._observe(desired, created["metadata"].get("resourceVersion"))
                self._renewed(sent)
                return True
            spec = lease.get("spec") or {}
            record = {k: spec.get(k) for k in _RECORD_FIELDS}
            self._observe(record, lease["metadata"].get("resourceVersion"))
            holder = spec.get("holderIdentity") or ""
            duration = spec.get("leaseDurationSeconds") or self.lease_duration
            with self._lock:
                valid = self._observed_time + float(duration) > self._clock()
                ours = holder == self.identity and not self._rejoining
            if holder and not ours and valid:
                return False
            if ours:
                desired["acquireTime"] = spec.get("acquireTime") or now
                desired["leaseTransitions"] = spec.get("leaseTransitions") or 0
            else:
                desired["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
            lease["spec"] = {**spec, **desired}
            updated = self._call(
                "replace_namespaced_lease", self.name, self.namespace, lease, timeout=self._timeout(deadline)
            )
            self._observe(desired, updated["metadata"].get("resourceVersion"))
            self._renewed(sent)
            return True
        except ApiException as e:
            if e.status in (409, 422):  # another candidate wrote first (conflict / already exists)
                log.debug("lease %s/%s: lost a race (%s)", self.namespace, self.name, e.status)
            else:
                log.warning("lease %s/%s: API error %s %s", self.namespace, self.name, e.status, e.reason)
            return False
        except Exception as e:
            log.warning("lease %s/%s: %s: %s", self.namespace, self.name, type(e).__name__, e)
            return False

    def _timeout(self, deadline: float) -> float:
        """The time left for one request of an attempt ending at ``deadline``; TimeoutError when none."""
        left = deadline - self._clock()
        if left <= 0.01:
            raise TimeoutError("no time left before the renew deadline")
        return left

    def _renewed(self, sent: float) -> None:
        # The lease runs from when the renewal was sent: the API server may have stored it at once.
        with self._lock:
            self._last_renew = sent

    def _read(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self._call("read_namespaced_lease", self.name, self.namespace, timeout=timeout)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def _call(self, method: str, *args: Any, timeout: float) -> dict[str, Any]:
        resp = getattr(self._leases, method)(*args, _preload_content=False, _request_timeout=timeout)
        data: dict[str, Any] = json.loads(resp.data)
        return data

    # -- release -------------------------------------------------------------------------------------

    def release(self) -> bool:
        """Give the lease up if we hold it: clear the holder so a standby can take it at once. True
        when released (or not ours to release)."""
        try:
            deadline = self._clock() + self.renew_deadline
            lease = self._read(self._timeout(deadline))
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return True
            spec = lease.get("spec") or {}
            now = micro_time()
            lease["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": spec.get("leaseTransitions") or 0,
            }
            self._call(
                "replace_namespaced_lease", self.name, self.namespace, lease, timeout=self._timeout(deadline)
            )
            with self._lock:
                self._leading = False
            log.info("lease %s/%s: %s released the lease", self.namespace, self.name, self.identity)
            return True
        except Exception as e:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, e)
            return False
