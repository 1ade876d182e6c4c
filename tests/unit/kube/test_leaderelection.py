"""kube.leaderelection against an in-memory Lease API whose clients can be cut off (a partitioned or
frozen API server: every call waits out its request timeout and fails): leading ends by the
elector's own clock before a standby can take over, no request outlives the renew deadline, a lost
leader campaigns again and waits out a full lease duration before retaking a record naming itself,
and the started/stopped callbacks alternate across terms."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kube.leaderelection import LeaderElector
from tests.helpers import polling
from tests.helpers.threads import stop_and_join

LEASE, RENEW, RETRY = 2.0, 1.4, 0.2  # margin 0.3 s
SLACK = 0.25  # thread scheduling on a busy machine


class LeaseStore:
    """One Lease object shared by the clients, with resourceVersion conflicts like the API server."""

    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.rv = 0
        self.lock = threading.Lock()

    def holder(self) -> str:
        with self.lock:
            return str(((self.obj or {}).get("spec") or {}).get("holderIdentity") or "")


class FakeLeases:
    """A CoordinationV1Api over ``store``; while ``cut`` is set every call hangs for its timeout and
    fails, as a request to a frozen API server with a hard deadline does."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.cut = threading.Event()
        self.calls: list[tuple[float, float]] = []  # (monotonic start, end of the call's deadline)

    def _enter(self, timeout: float) -> None:
        assert timeout is not None and timeout > 0, "every Lease request needs a deadline"
        now = time.monotonic()
        self.calls.append((now, now + timeout))
        if self.cut.is_set():
            time.sleep(timeout)
            raise TimeoutError("read timed out")

    def _answer(self) -> Any:
        assert self.store.obj is not None
        return SimpleNamespace(data=json.dumps(self.store.obj).encode())

    def read_namespaced_lease(self, name: str, ns: str, **kw: Any) -> Any:
        self._enter(kw["_request_timeout"])
        with self.store.lock:
            if self.store.obj is None:
                raise ApiException(status=404, reason="Not Found")
            return self._answer()

    def create_namespaced_lease(self, ns: str, body: dict[str, Any], **kw: Any) -> Any:
        self._enter(kw["_request_timeout"])
        with self.store.lock:
            if self.store.obj is not None:
                raise ApiException(status=409, reason="AlreadyExists")
            self.store.rv += 1
            self.store.obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.store.rv)}}
            return self._answer()

    def replace_namespaced_lease(self, name: str, ns: str, body: dict[str, Any], **kw: Any) -> Any:
        self._enter(kw["_request_timeout"])
        with self.store.lock:
            assert self.store.obj is not None
            if body["metadata"].get("resourceVersion") != self.store.obj["metadata"]["resourceVersion"]:
                raise ApiException(status=409, reason="Conflict")
            self.store.rv += 1
            self.store.obj = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.store.rv)}}
            return self._answer()


class Candidate:
    def __init__(self, store: LeaseStore, identity: str) -> None:
        self.api = FakeLeases(store)
        self.events: list[tuple[str, float]] = []
        self.stop = threading.Event()
        self.elector = LeaderElector(
            self.api, namespace="ns", name="lock", identity=identity,
            lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY,
            on_started_leading=lambda: self.events.append(("started", time.monotonic())),
            on_stopped_leading=lambda: self.events.append(("stopped", time.monotonic())),
        )  # fmt: skip
        self.thread = threading.Thread(target=self.elector.run_forever, args=(self.stop,), daemon=True)

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


def wait_for(cond: Callable[[], Any], timeout: float = 10.0, what: str = "") -> None:
    polling.wait_for(cond, timeout, 0.005, what)


@pytest.fixture()
def candidates() -> Any:
    made: list[Candidate] = []
    yield made
    for c in made:
        c.api.cut.clear()
    stop_and_join(made)


def test_a_cut_off_leader_stops_leading_by_its_own_clock_before_a_standby_takes_over(
    candidates: list[Candidate],
) -> None:
    store = LeaseStore()
    leader, standby = Candidate(store, "a"), Candidate(store, "b")
    candidates += [leader, standby]
    leader.thread.start()
    wait_for(leader.elector.is_leading, what="a leads")
    standby.thread.start()
    time.sleep(3 * RETRY)  # the standby observes a few renewals
    assert standby.elector.leader() == "a" and not standby.elector.is_leading()

    leader.api.cut.set()  # only the leader is cut off: the standby still reaches the API server
    cut = time.monotonic()
    seen_leading: list[float] = []
    while not standby.elector.is_leading():
        if leader.elector.is_leading():
            seen_leading.append(time.monotonic())
        assert time.monotonic() - cut < LEASE + 5, "the standby never took over"
        time.sleep(0.002)
    took_over = time.monotonic()
    renewed = leader.elector.renewed_at
    assert not leader.elector.is_leading()
    # The leader stopped leading by its own clock, a margin before the lease could expire ...
    assert not seen_leading or max(seen_leading) < renewed + LEASE - leader.elector.margin + SLACK
    # ... which is before the standby could take it (it waits a lease duration from its observation).
    assert took_over >= renewed + LEASE
    assert (seen_leading[-1] if seen_leading else cut) < took_over
    wait_for(lambda: leader.kinds() == ["started", "stopped"], what="the leader's stopped callback")
    stopped_at = leader.events[1][1]
    assert stopped_at <= renewed + LEASE + SLACK  # within the lease, not after a retry chain
    # No renewal of the term could land after the lease may have expired: each had a deadline before.
    expires = renewed + LEASE - leader.elector.margin
    assert all(end <= expires + SLACK for start, end in leader.api.calls if start < stopped_at)
    assert standby.kinds() == ["started"]


def test_a_lost_leader_campaigns_again_and_waits_a_lease_duration_to_retake_its_own_record(
    candidates: list[Candidate],
) -> None:
    store = LeaseStore()
    only = Candidate(store, "solo")
    candidates.append(only)
    only.thread.start()
    wait_for(only.elector.is_leading, what="solo leads")
    only.api.cut.set()
    wait_for(lambda: only.kinds() == ["started", "stopped"], what="solo loses the lease")
    assert only.thread.is_alive(), "run_forever must campaign again after losing"
    assert store.holder() == "solo"  # nothing could be written while cut off
    only.api.cut.clear()
    back = time.monotonic()
    wait_for(lambda: only.kinds() == ["started", "stopped", "started"], timeout=LEASE + 5, what="re-lead")
    retaken = only.events[2][1]
    # A fresh observation of the unchanged record, then a full lease duration (less one retry period
    # of polling granularity).
    assert retaken - back >= LEASE - RETRY
    assert only.elector.is_leading()
    assert store.holder() == "solo"


def test_durations_and_margin_are_validated() -> None:
    api = FakeLeases(LeaseStore())
    with pytest.raises(ValueError):
        LeaderElector(api, namespace="x", name="y", identity="z", lease_duration=2, renew_deadline=3)
    with pytest.raises(ValueError):
        LeaderElector(api, namespace="x", name="y", identity="z", margin=20)
    e = LeaderElector(api, namespace="x", name="y", identity="z")
    assert e.margin == 2.0 and not e.is_leading() and e.renewed_at == float("-inf")
