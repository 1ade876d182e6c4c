"""kube.leaderelection against the real API server, with short durations (lease 2 s, renew deadline
1.5 s, retry 0.3 s): exactly one of two candidates leads; a released lease is taken over within one
retry period; a crashed leader's lease after the lease duration; a leader that cannot renew steps
down; callbacks fire once each; the Lease shows the holder and the transitions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kube.leaderelection import LeaderElector
from tests.helpers.threads import stop_and_join
from tests.integration.kube.helpers import wait_for

pytestmark = pytest.mark.apiserver

LEASE, RENEW, RETRY = 2.0, 1.5, 0.3


class Candidate:
    def __init__(self, kube: Any, namespace: str, identity: str, **kwargs: Any) -> None:
        self.started = 0
        self.stopped = 0
        self.stop = threading.Event()
        self.elector = LeaderElector(
            kube,
            namespace=namespace,
            name="koord-test-lock",
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=RENEW,
            retry_period=RETRY,
            on_started_leading=self._started,
            on_stopped_leading=self._stopped,
            **kwargs,
        )
        self.thread = threading.Thread(target=self.elector.run, args=(self.stop,), daemon=True)

    def _started(self) -> None:
        self.started += 1

    def _stopped(self) -> None:
        assert self.started == 1
        self.stopped += 1

    def halt(self) -> None:
        assert stop_and_join([self]) == []


@pytest.fixture()
def candidates(kube: Any, namespace: str) -> Iterator[list[Candidate]]:
    made: list[Candidate] = []
    yield made
    stop_and_join(made)


def _pair(kube: Any, namespace: str, made: list[Candidate], **kwargs: Any) -> tuple[Candidate, Candidate]:
    a = Candidate(kube, namespace, "alpha", **kwargs)
    b = Candidate(kube, namespace, "beta", **kwargs)
    made += [a, b]
    a.thread.start()
    b.thread.start()
    wait_for(lambda: a.elector.is_leader() or b.elector.is_leader(), what="a leader")
    return (a, b) if a.elector.is_leader() else (b, a)


def _lease(kube: Any, namespace: str) -> Any:
    return client.CoordinationV1Api(kube).read_namespaced_lease("koord-test-lock", namespace).spec


def test_exactly_one_of_two_leads_and_the_lease_names_it(
    kube: Any, namespace: str, candidates: list[Candidate]
) -> None:
    leader, standby = _pair(kube, namespace, candidates)
    deadline = time.monotonic() + 2 * LEASE  # long enough for several renewals and standby retries
    while time.monotonic() < deadline:
        assert [leader.elector.is_leader(), standby.elector.is_leader()] == [True, False]
        time.sleep(0.05)
    spec = _lease(kube, namespace)
    assert spec.holder_identity == leader.elector.identity
    assert spec.lease_duration_seconds == 2
    assert spec.lease_transitions == 0  # created by the first holder
    assert spec.renew_time is not None and spec.acquire_time is not None
    assert standby.elector.leader() == leader.elector.identity
    assert (leader.started, leader.stopped, standby.started, standby.stopped) == (1, 0, 0, 0)


def test_released_lease_is_taken_over_within_one_retry_period(
    kube: Any, namespace: str, candidates: list[Candidate]
) -> None:
    leader, standby = _pair(kube, namespace, candidates)
    leader.halt()  # releases the lease on the way out
    released = time.monotonic()
    assert not leader.elector.is_leader()
    assert _lease(kube, namespace).holder_identity in ("", standby.elector.identity)
    wait_for(standby.elector.is_leader, timeout=RETRY + 1.0, interval=0.01, what="standby leads")
    assert time.monotonic() - released < RETRY + 0.5  # one retry period, plus API latency
    spec = _lease(kube, namespace)
    assert spec.holder_identity == standby.elector.identity
    assert spec.lease_transitions == 1
    assert (leader.started, leader.stopped) == (1, 1)
    assert (standby.started, standby.stopped) == (1, 0)


def test_crashed_leader_is_replaced_after_the_lease_duration(
    kube: Any, namespace: str, candidates: list[Candidate]
) -> None:
    leader, standby = _pair(kube, namespace, candidates, release_on_cancel=False)
    leader.halt()  # stops renewing without releasing: as if the process died
    crashed = time.monotonic()
    assert _lease(kube, namespace).holder_identity == leader.elector.identity
    wait_for(standby.elector.is_leader, timeout=LEASE + 3, interval=0.01, what="standby leads")
    took = time.monotonic() - crashed
    # The last renewal was at most one retry period before the crash; the standby must wait out the
    # lease duration from when it observed that renewal, and then needs at most one more retry.
    assert LEASE - RETRY - 0.1 <= took <= LEASE + 2 * RETRY + 0.7
    spec = _lease(kube, namespace)
    assert (spec.holder_identity, spec.lease_transitions) == (standby.elector.identity, 1)
    assert (leader.started, leader.stopped, standby.started, standby.stopped) == (1, 1, 1, 0)


def test_leader_that_cannot_renew_steps_down_within_the_renew_deadline(
    kube: Any, namespace: str, candidates: list[Candidate]
) -> None:
    only = Candidate(kube, namespace, "solo")
    candidates.append(only)
    only.thread.start()
    wait_for(only.elector.is_leader, what="solo leads")
    # Another party takes the lease by force (say, an operator): solo can no longer renew.
    leases = client.CoordinationV1Api(kube)
    lease = leases.read_namespaced_lease("koord-test-lock", namespace)
    lease.spec.holder_identity = "intruder"
    lease.spec.lease_duration_seconds = 60
    leases.replace_namespaced_lease("koord-test-lock", namespace, lease)
    stolen = time.monotonic()
    only.thread.join(RENEW + 2 * RETRY + 1)
    assert not only.thread.is_alive()  # run() returns after losing the lease
    assert time.monotonic() - stolen <= RENEW + 2 * RETRY + 1
    assert not only.elector.is_leader()
    assert (only.started, only.stopped) == (1, 1)
    assert _lease(kube, namespace).holder_identity == "intruder"  # nothing released what is not ours


def test_durations_are_validated(kube: Any) -> None:
    with pytest.raises(ValueError):
        LeaderElector(kube, namespace="x", name="y", identity="z", lease_duration=1, renew_deadline=2)
    with pytest.raises(ValueError):
        LeaderElector(kube, namespace="x", name="y", identity="", lease_duration=3, renew_deadline=2)
