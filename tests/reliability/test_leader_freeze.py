"""A frozen API server (SIGSTOP) must not let a leader act past its lease: two replicas wired as
koord-manager wires them (kube.leaderelection, manager.leadership, the controller runtime, a client
whose writes kube.client.guard_writes lets out only while leading) keep writing a ConfigMap while they
lead. The API server is frozen for longer than the lease: the leader's last write must have been sent
before its lease could expire (by its own clock, from its last successful renewal), its stopped
callback must come within the lease duration, and once the API server resumes one replica leads and
writes while the other stands by (the standby, or the old leader in a new term when its renewal sent
into the freeze lands after the resume).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client

from kube.client import READ_METHODS, api_client, guard_writes
from kube.leaderelection import LeaderElector
from manager.controllerruntime.runtime import Controller, ControllerManager
from manager.leadership import Leadership
from tests.reliability.helpers import FreezableControlPlane, wait_for

pytestmark = pytest.mark.apiserver

LEASE, RENEW, RETRY = 8.0, 5.0, 1.0
LEASE_NAME, CONFIGMAP = "koordinator-manager", "written-by-the-leader"


class Replica:
    """One replica: an elector, a leadership, a controller writing the ConfigMap every 0.2 s."""

    def __init__(self, plane: FreezableControlPlane, namespace: str, identity: str) -> None:
        self.identity, self.namespace = identity, namespace
        self.stop = threading.Event()
        self.events: list[tuple[str, float]] = []
        self.writes: list[float] = []  # when each write was handed to urllib3 (it passed the guard)
        self.leadership = Leadership(identity, self.stop)
        self.api = api_client(str(plane.cp.kubeconfig_path))
        pool = self.api.rest_client.pool_manager
        send = pool.request

        def recording(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            if method.upper() not in READ_METHODS:
                self.writes.append(time.monotonic())
            return send(method, url, *args, **kwargs)

        pool.request = recording
        guard_writes(self.api, self.leadership.is_leading)  # outside the recorder: it sees what passed
        self.core = client.CoreV1Api(self.api)
        self.seq = 0
        writer = Controller("writer", self._write, list_keys=lambda: ["cm"])
        self.manager = ControllerManager([writer], leading=self.leadership.is_leading)
        self.leadership.on_start(lambda: self.events.append(("started", time.monotonic())))
        self.leadership.on_start(self.manager.on_started_leading)
        self.leadership.on_stop(lambda: self.events.append(("stopped", time.monotonic())))
        self.leadership.on_stop(self.manager.on_stopped_leading)
        self.elector_api = api_client(str(plane.cp.kubeconfig_path))
        self.elector = LeaderElector(
            self.elector_api, namespace=namespace, name=LEASE_NAME, identity=identity,
            lease_duration=LEASE, renew_deadline=RENEW, retry_period=RETRY,
            on_started_leading=self.leadership.started_leading,
            on_stopped_leading=self.leadership.stopped_leading,
        )  # fmt: skip
        self.leadership.follow(self.elector.is_leading)
        self.thread = threading.Thread(target=self.elector.run_forever, args=(self.stop,), name=identity)

    def _write(self, key: str) -> float:
        self.seq += 1
        body = {"data": {"holder": self.identity, "seq": str(self.seq)}}
        self.core.patch_namespaced_config_map(CONFIGMAP, self.namespace, body, _request_timeout=2)
        return 0.2

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(RENEW + 5)
        self.manager.stop()
        self.api.close()
        self.elector_api.close()


def _holder(kube: Any, namespace: str) -> str:
    lease = client.CoordinationV1Api(kube).read_namespaced_lease(LEASE_NAME, namespace)
    return str(lease.spec.holder_identity or "")


def _written_by(kube: Any, namespace: str) -> str:
    cm = client.CoreV1Api(kube).read_namespaced_config_map(CONFIGMAP, namespace)
    return str((cm.data or {}).get("holder", ""))


def test_a_frozen_api_server_stops_the_leader_within_its_lease_and_the_standby_takes_over(
    own_control_plane: FreezableControlPlane, own_kube: Any, own_namespace: str
) -> None:
    ns = own_namespace
    client.CoreV1Api(own_kube).create_namespaced_config_map(ns, {"metadata": {"name": CONFIGMAP}})
    a, b = Replica(own_control_plane, ns, "replica-a"), Replica(own_control_plane, ns, "replica-b")
    try:
        a.thread.start()
        wait_for(lambda: _written_by(own_kube, ns) == a.identity, 20, what="replica-a leads and writes")
        b.thread.start()
        time.sleep(3 * RETRY)  # the standby observes a few renewals
        assert a.leadership.is_leading() and not b.leadership.is_leading()
        assert b.writes == []  # a standby writes nothing

        with own_control_plane.frozen() as frozen_at:
            stepped_down = wait_for(
                lambda: None if a.leadership.is_leading() else time.monotonic(),
                LEASE + 5, interval=0.01, what="the leader to stop leading while the API server hangs",
            )  # fmt: skip
            renewed = a.elector.renewed_at
            assert renewed <= frozen_at  # nothing renews against a frozen API server
            # Stopped leading (by its own clock) before the lease could expire ...
            assert stepped_down < renewed + LEASE, (stepped_down - renewed, LEASE)
            # ... and sent its last write before that too: none while it may no longer hold the lease.
            assert a.writes and max(a.writes) < renewed + LEASE
            wait_for(lambda: a.kinds() == ["started", "stopped"], LEASE + 2, what="the stopped callback")
            assert a.events[1][1] <= renewed + LEASE + 1.0  # the renew deadline, no transport retries
            while time.monotonic() < frozen_at + LEASE + 3:  # outlast the standby's view of the lease
                assert not b.leadership.is_leading()
                time.sleep(0.1)

        # Someone leads again once the API server answers. Usually the standby, at its first answered
        # request; but a renewal the old leader sent as the API server froze sits in the kernel's socket
        # buffer and is applied when it resumes. That changes the lease record, so both replicas then
        # observe it afresh and either may win after a lease duration: the old leader in a new term.
        resumed = time.monotonic()
        leader = wait_for(
            lambda: next((r for r in (b, a) if r.leadership.is_leading()), None), 30,
            what=f"a replica to lead after the API server resumed (holder {_holder(own_kube, ns)!r})",
        )  # fmt: skip
        other = a if leader is b else b
        assert _holder(own_kube, ns) == leader.identity and not other.leadership.is_leading()
        wait_for(lambda: _written_by(own_kube, ns) == leader.identity, 10, what="the new leader's writes")
        if leader is b:
            assert max(a.writes) < renewed + LEASE  # the old leader wrote nothing since
            assert a.kinds() == ["started", "stopped"]
        else:
            assert a.kinds() == ["started", "stopped", "started"] and b.writes == []
            restarted = a.events[2][1]
            assert restarted >= resumed  # a new term, taken only from the resumed API server
            assert not [t for t in a.writes if renewed + LEASE <= t < restarted]  # nothing between terms
        assert other.thread.is_alive(), "the other replica stands by, campaigning again"
    finally:
        own_control_plane.resume()
        b.close()
        a.close()
