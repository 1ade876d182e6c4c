"""Sharding as a scheduler runs it (docs/shards.md#wiring): one ``Sharding`` per scheduler process (or
per embedded scheduler) holds the shard's Lease heartbeat, its queue gate, the arbiter host it serves
while it leads the group, and the Binder chain every bind goes through: member check, then the arbiter
(in-process when hosted here, else over gRPC, coalesced), then the API bind.

The scheduler's service builds it, hands ``gate``/``host`` to its informer handlers (scheduler.gateway),
binds through ``binder(...)``, calls ``attach`` once its informers have synced (from then the heartbeat
runs and membership changes move pods) and forwards its leader elector's callbacks to
``started_leading``/``stopped_leading``. Metrics: ``ShardCollector`` (docs/shards.md#metrics).
Imports: argparse, prometheus_client, apis.kubeobjects, kube.grpcauth (the arbiter's TLS and
authentication, docs/shards.md#security), kube.supervise, scheduler.framework.status, scheduler.shards,
the standard library.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from apis.kubeobjects import Node, Pod
from apis.pod import pod_key
from kube.grpcauth.gate import AuthGate, GateLimits
from kube.grpcauth.kubeauth import tokenreview_authenticator
from kube.grpcauth.limits import Counts
from kube.grpcauth.transport import (
    TokenAuthInterceptor,
    TokenFile,
    channel_credentials,
    server_credentials,
)
from kube.supervise import CrashHook, SupervisedThread, supervise
from scheduler.framework.status import Status
from scheduler.shards.admission import ShardGate
from scheduler.shards.client import (
    BINDER,
    ArbiterClient,
    ArbitratedBinder,
    CoalescingArbiter,
    LocalFirstArbiter,
)
from scheduler.shards.heartbeat import ShardHeartbeat
from scheduler.shards.host import ArbiterHost
from scheduler.shards.ledger import Ledger
from scheduler.shards.security import (
    DEFAULT_ALLOWED_USERS,
    DEFAULT_SERVER_NAME,
    ShardSecurity,
    add_security_flags,
    security_options,
)

__all__ = [
    "DEFAULT_ALLOWED_USERS", "DEFAULT_ARBITER_PORT", "DEFAULT_SERVER_NAME", "DEFAULT_SHARD_LEASE_NAMESPACE",
    "MemberGatedBinder", "ShardCollector", "ShardOptions", "ShardSecurity", "Sharding", "add_shard_flags",
    "shard_options",
]  # fmt: skip

log = logging.getLogger(__name__)

DEFAULT_ARBITER_PORT = 10261
# Shard Leases live in a namespace of their own, where the shards have full Lease rights; the lock
# namespace keeps its narrow, per-name rights (docs/shards.md#deploy).
DEFAULT_SHARD_LEASE_NAMESPACE = "koordinator-shards"


class _Binder(Protocol):
    def bind(self, pod: Pod, node: str) -> Status: ...


@dataclass(frozen=True, slots=True)
class ShardOptions:
    """``group`` is the scheduler name; ``identity`` the leader-election identity; ``leader_lease`` the
    group's leader Lease (whose holder hosts the arbiter), in ``namespace`` (the lock namespace); the shard
    Leases live in ``lease_namespace``. ``listen`` is the arbiter's bind address, ``advertise`` the host the
    other shards dial. ``security`` None: plaintext and no authentication (tests, ``--shard-insecure``)."""

    namespace: str
    group: str
    identity: str
    leader_lease: str
    listen: str
    advertise: str
    lease_duration: float = 15.0
    lease_namespace: str = DEFAULT_SHARD_LEASE_NAMESPACE
    security: ShardSecurity | None = None

    @property
    def interval(self) -> float:
        # Renew every 2 s (docs/shards.md#membership), more often under a short lease (tests) so a
        # lease always spans at least three renewals.
        return min(2.0, self.lease_duration / 3)


class MemberGatedBinder:
    """Binds through ``binder`` only while ``is_member()`` holds: a fenced shard's binds fail (the pod
    is requeued with backoff) until it renews its Lease (docs/shards.md#membership)."""

    def __init__(self, binder: _Binder, is_member: Callable[[], bool], group: str) -> None:
        self.binder, self.is_member, self.group = binder, is_member, group

    def bind(self, pod: Pod, node: str) -> Status:
        if not self.is_member():
            return Status.error(
                f"binding {pod_key(pod)} to {node}: not a member of shard group {self.group}", plugin=BINDER
            )
        return self.binder.bind(pod, node)


Stores = Callable[[], tuple[Collection[Node], Collection[Pod]]]


class Sharding:
    """One shard of a group (see the module docstring). Thread-safe: the elector's callbacks, the
    heartbeat's membership changes and the bind threads meet here."""

    def __init__(self, api: Any, opts: ShardOptions) -> None:
        self.opts = opts
        self.gate = ShardGate(opts.identity)
        self.heartbeat = ShardHeartbeat(
            api, namespace=opts.lease_namespace, group=opts.group, identity=opts.identity,
            leader_lease=opts.leader_lease, leader_namespace=opts.namespace,
            lease_duration=opts.lease_duration, interval=opts.interval, on_change=self._members_changed,
        )  # fmt: skip
        self._api = api
        self.auth_refused = Counts()  # the arbiter's refused calls by reason, every term (logs, tests)
        self._gate: AuthGate | None = None
        sec = opts.security
        self.host = ArbiterHost(
            self.heartbeat.publish, listen=opts.listen, advertise=opts.advertise,
            security=None if sec is None else self._server_security,
        )  # fmt: skip
        client = (
            ArbiterClient(self.heartbeat.arbiter_address)
            if sec is None
            else ArbiterClient(
                self.heartbeat.arbiter_address,
                credentials=lambda: channel_credentials(sec.ca_file),
                server_name=sec.server_name,
                metadata=TokenFile(sec.token_file, "shard token file").metadata,
            )
        )
        self._remote = CoalescingArbiter(client)
        self.arbiter = LocalFirstArbiter(lambda: self.host.ledger, self._remote)
        self.arbitrated: ArbitratedBinder | None = None
        self._lock = threading.Lock()
        self._leading = False
        self._stores: Stores | None = None
        self._on_members: Callable[[list[str]], tuple[int, int]] | None = None
        self._thread: SupervisedThread | None = None
        # The ledger's counts survive it (a new one per term): the totals of the terms that ended.
        self._ended = {"accepted": 0, "rejected": 0, "expired": 0}

    def _server_security(self) -> tuple[Any, list[Any]]:
        """The arbiter's TLS credentials (read at each start) and its authentication interceptor; one
        gate (and TokenReview cache) for every term."""
        sec = self.opts.security
        assert sec is not None
        if self._gate is None:
            self._gate = AuthGate(tokenreview_authenticator(self._api), GateLimits(), None, self.auth_refused)
        interceptor = TokenAuthInterceptor(
            self._gate, sec.allowed_users, sec.allowed_groups, service="the shard arbiter"
        )
        return server_credentials(sec.cert_file, sec.key_file), [interceptor]

    def binder(self, api_binder: _Binder) -> MemberGatedBinder:
        self.arbitrated = ArbitratedBinder(api_binder, self.arbiter, shard=self.opts.identity)
        return MemberGatedBinder(self.arbitrated, self.heartbeat.is_member, self.opts.group)

    def attach(
        self,
        stores: Stores,
        on_members: Callable[[list[str]], tuple[int, int]],
        stop: threading.Event,
        on_crash: CrashHook | None = None,
    ) -> None:
        """Once the informers synced: ``stores()`` gives their nodes and pods (the arbiter's warm start),
        ``on_members(members)`` moves pods on a membership change (EventRouter.reshard). Starts
        the heartbeat (supervised) and, when this shard already leads, the arbiter."""
        with self._lock:
            self._stores, self._on_members = stores, on_members
            leading = self._leading
        if leading:
            self._start_host()
        self._thread = supervise("shard-heartbeat", self.heartbeat.run, stop, on_crash=on_crash)

    def _members_changed(self, members: list[str]) -> None:
        with self._lock:
            move = self._on_members
        if move is None:
            return
        dropped, added = move(members)
        log.info("shard %s: members %s; %d pods handed on, %d taken", self.opts.identity, members,
                 dropped, added)  # fmt: skip

    # -- the leader elector's callbacks --------------------------------------------------------------

    def started_leading(self) -> None:
        with self._lock:
            self._leading = True
            ready = self._stores is not None
        if ready:
            self._start_host()

    def stopped_leading(self) -> None:
        with self._lock:
            self._leading = False
        self._stop_host()

    def _start_host(self) -> None:
        with self._lock:
            stores = self._stores
        if stores is None:
            return
        # Read lazily, inside host.start, once its ledger hears forwarded events (ArbiterHost.start).
        try:
            self.host.start(_later(lambda: stores()[0]), _later(lambda: stores()[1]))
        except OSError as e:  # the port is taken: no arbiter this term, every bind of the group fails
            log.error("shard %s: cannot serve the arbiter on %s: %s", self.opts.identity, self.opts.listen, e)

    def _stop_host(self) -> None:
        led = self.host.ledger
        self.host.stop()
        if led is not None:
            for k, v in _counts(led).items():
                self._ended[k] += v

    def totals(self) -> dict[str, int]:
        """The arbiter's decisions while this shard hosted it (every term so far)."""
        led = self.host.ledger
        now = _counts(led) if led is not None else {}
        return {k: v + now.get(k, 0) for k, v in self._ended.items()}

    def close(self) -> None:
        """After the stop event: stop serving, end the client, wait for the heartbeat to leave."""
        self._stop_host()
        self._remote.close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def _counts(led: Ledger) -> dict[str, int]:
    return {"accepted": led.accepted_total, "rejected": led.rejected_total, "expired": led.expired_total}


def _later(read: Callable[[], Collection[Any]]) -> Iterator[Any]:
    yield from read()


class ShardCollector:
    """The shard's metrics, read at scrape time (docs/shards.md#metrics)."""

    def __init__(self, sharding: Sharding, registry: CollectorRegistry) -> None:
        self.sharding = sharding
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        s = self.sharding
        totals = s.totals()
        for family in (
            CounterMetricFamily(
                "koord_scheduler_shard_arbiter_accepted", "Binds the shard arbiter hosted here accepted."
            ),
            CounterMetricFamily(
                "koord_scheduler_shard_arbiter_rejected",
                "Binds the shard arbiter hosted here refused (overcommit, owner, warming up).",
            ),
            CounterMetricFamily(
                "koord_scheduler_shard_arbiter_expired",
                "Accepted binds the shard arbiter hosted here let go after its TTL.",
            ),
        ):
            family.add_metric([], totals[family.name.rsplit("_", 1)[1]])
            yield family
        refused = CounterMetricFamily(
            "koord_scheduler_shard_binds_refused", "This shard's binds the arbiter refused.", labels=["shard"]
        )
        refused.add_metric([s.opts.identity], s.arbitrated.rejections if s.arbitrated is not None else 0)
        yield refused
        members = GaugeMetricFamily("koord_scheduler_shard_members", "Live members of the shard group seen.")
        members.add_metric([], len(s.heartbeat.members()))
        yield members

    def describe(self) -> Iterator[Metric]:
        return self.collect()


def add_shard_flags(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The sharding flags (docs/flags.md); ``prefix`` is ``scheduler-`` for the manager's embedded one."""
    p.add_argument(
        f"--{prefix}sharding", action=argparse.BooleanOptionalAction, default=False,
        help="run as one shard of the group named after the scheduler name (docs/shards.md; default off)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-arbiter-addr", default="",
        help=f"the arbiter's gRPC listen address while this shard hosts it "
        f"(default <advertise host>:{DEFAULT_ARBITER_PORT}: the pod IP only)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-advertise-host", default="",
        help="the host the other shards dial for this shard's arbiter (default $POD_IP, else 127.0.0.1)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-lease-duration", type=float, default=15.0,
        help="seconds a shard's Lease stays live without renewal (15); renewed every min(2, duration/3)",
    )  # fmt: skip
    p.add_argument(
        f"--{prefix}shard-lease-namespace", default=DEFAULT_SHARD_LEASE_NAMESPACE,
        help=f"the namespace of the shard Leases ({DEFAULT_SHARD_LEASE_NAMESPACE}); the group's leader Lease "
        "stays in the lock namespace",
    )  # fmt: skip
    add_security_flags(p, prefix)


def shard_options(
    args: argparse.Namespace, prefix: str, *, namespace: str, group: str, identity: str, leader_lease: str
) -> ShardOptions | None:
    """The options the flags ask for, or None when sharding is off. Raises ValueError naming a bad flag."""

    def flag(name: str, default: Any = None) -> Any:
        # koord-manager declares the embedded scheduler's sharding flags itself: a flag it lacks has
        # add_shard_flags's default.
        return getattr(args, (prefix + name).replace("-", "_"), default)

    if not flag("sharding"):
        return None
    duration = float(flag("shard-lease-duration"))
    if not duration >= 1:
        raise ValueError(f"--{prefix}shard-lease-duration={duration:g}: must be at least 1 second")
    host = flag("shard-advertise-host") or os.environ.get("POD_IP") or "127.0.0.1"
    if ":" in host and not host.startswith("["):  # an IPv6 pod IP
        host = f"[{host}]"
    listen = flag("shard-arbiter-addr") or f"{host}:{DEFAULT_ARBITER_PORT}"
    lease_namespace = flag("shard-lease-namespace", DEFAULT_SHARD_LEASE_NAMESPACE)
    return ShardOptions(
        namespace, group, identity, leader_lease, listen, host, duration, lease_namespace,
        security_options(args, prefix, flag),
    )  # fmt: skip
