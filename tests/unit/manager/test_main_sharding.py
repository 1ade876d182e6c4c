"""koord-manager's embedded scheduler with --scheduler-sharding (docs/shards.md#wiring): the manager builds
the sharded service — its replica identity as the shard's, the manager's Lease as the group's leader
Lease, in --leader-election-namespace — schedules whether or not it leads, and hosts the arbiter from its
leadership hooks; without the flag the service is the leader-gated one; sharding without leader election
is refused."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from kubernetes.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry

import kube.client
import scheduler.main
from manager.leadership import Leadership
from manager.main import _start_scheduler
from manager.options import build_parser
from tests.helpers.polling import eventually


class Service(scheduler.main.SchedulerService):
    """The real service, without informers (no API server here); records what run() was given."""

    built: ClassVar[list[Service]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kwargs = kwargs
        self.active: Callable[[], bool] | None = None
        Service.built.append(self)

    def start(self, stop: threading.Event, sync_timeout: float = 60.0) -> None:
        pass

    def run(self, stop: threading.Event, active: Callable[[], bool] = lambda: True) -> None:
        self.active = active


@pytest.fixture()
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiClient]:
    client = ApiClient(Configuration(host="http://127.0.0.1:1"))  # nothing listens: every call fails
    monkeypatch.setattr(kube.client, "api_client", lambda *a, **kw: client)
    monkeypatch.setattr(scheduler.main, "SchedulerService", Service)
    Service.built.clear()
    try:
        yield client
    finally:
        client.close()


def start(flags: list[str], leadership: Leadership, stop: threading.Event) -> Service:
    args = build_parser().parse_args(flags)
    service = _start_scheduler(args, 9317, stop, leadership, Path("/nonexistent"), CollectorRegistry())
    assert isinstance(service, Service) and Service.built == [service]
    assert eventually(lambda: service.active is not None, 10, 0.01)
    return service


def test_the_flag_builds_the_sharded_service(api: ApiClient) -> None:
    leadership, stop = Leadership("replica-1"), threading.Event()
    service = start(
        [
            "--scheduler-sharding",
            "--scheduler-shard-arbiter-addr=127.0.0.1:0",
            "--leader-election-namespace=ns",
        ],
        leadership,
        stop,
    )
    sharding = service.sharding
    try:
        assert sharding is not None and service.kwargs["leading"] is None
        o = sharding.opts
        assert (o.identity, o.leader_lease, o.namespace, o.group) == (
            "replica-1", "koordinator-manager", "ns", "koord-scheduler",
        )  # fmt: skip
        assert service.active is not None and service.active()  # schedules though it does not lead
        assert service.router.gate is sharding.gate
        sharding.attach(lambda: ([], []), lambda members: (0, 0), stop)
        assert sharding.host.ledger is None
        leadership.started_leading()  # the manager's leadership hosts the arbiter
        assert sharding.host.ledger is not None
        leadership.stopped_leading()
        assert sharding.host.ledger is None
    finally:
        stop.set()
        service.close()


def test_already_leading_hosts_once_attached(api: ApiClient) -> None:
    leadership, stop = Leadership("replica-1"), threading.Event()
    leadership.started_leading()  # the elector called back before the scheduler was built
    service = start(["--scheduler-sharding", "--scheduler-shard-arbiter-addr=127.0.0.1:0"], leadership, stop)
    sharding = service.sharding
    try:
        assert sharding is not None
        sharding.attach(lambda: ([], []), lambda members: (0, 0), stop)
        assert sharding.host.ledger is not None
    finally:
        stop.set()
        service.close()


def test_without_the_flag_the_service_is_leader_gated(api: ApiClient) -> None:
    leadership, stop = Leadership("replica-1"), threading.Event()
    service = start([], leadership, stop)
    try:
        assert service.sharding is None and service.router.gate is None
        assert service.active is not None and not service.active()
        leadership.started_leading()
        assert service.active()
        assert isinstance(service.scheduler.binder, scheduler.main.LeaderGatedBinder)
    finally:
        stop.set()
        service.close()


def test_sharding_needs_leader_election(api: ApiClient) -> None:
    args = build_parser().parse_args(["--scheduler-sharding", "--no-enable-leader-election"])
    with pytest.raises(ValueError, match="--scheduler-sharding needs leader election"):
        _start_scheduler(
            args, 9317, threading.Event(), Leadership("r"), Path("/nonexistent"), CollectorRegistry()
        )
