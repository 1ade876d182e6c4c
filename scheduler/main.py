"""koord-scheduler entry point and the SchedulerService that koord-manager embeds.

The service keeps its informers (and the MetricHub watcher, when a hub address is given) running
on every replica, so a standby has a warm cache; only while `active()` is true — this replica holds
the Lease — does it pop and schedule pods, and its binder checks `leading()` before every bind, so
binding stops once the elector's own clock says the lease may have expired. Standalone, it takes its
own Lease `koord-scheduler` and, after losing it, stands by and campaigns again
(docs/architecture.md#leader-election); embedded, the manager passes its own leadership. With
sharding on (docs/shards.md#wiring) every replica schedules its own share of the pending pods, leader or
not, binds through the group's arbiter, and the leader hosts that arbiter.

Upstream koord-scheduler's argument lists are accepted (kube.goflags; docs/flags.md).
Imports: argparse, prometheus_client, apis, kube, scheduler.
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, cast

from prometheus_client import CollectorRegistry

from apis.constants import DEFAULT_CONFIG_NAMESPACE
from apis.kubeobjects import Node
from apis.version import koord_version
from kube import upstreamflags
from kube.client import KubeConfigError, api_client, guard_writes
from kube.goflags import add_klog_and_gate_flags, parse_go_args
from kube.httpserver import ProbeServer
from kube.informer import Informer
from kube.leaderelection import LeaderElector
from kube.supervise import SupervisedThread, supervise
from scheduler.cache import SchedulerCache
from scheduler.config import ConfigError, Profile, SchedulerConfig, load_config
from scheduler.framework.interfaces import Pod
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.status import Status
from scheduler.framework.volumes import VolumeObjects
from scheduler.framework.waiting import WaitingPodMap
from scheduler.gateway import (
    APIBinder,
    EventRouter,
    PDBStore,
    Preemptor,
    ScheduledReporter,
    UnschedulableReporter,
    start_informers,
)
from scheduler.jobreservation_events import JobReservationReporter
from scheduler.metrics import SchedulerMetrics
from scheduler.metricsource import HubWatcher
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.defaultpreemption.api import KubePreemptionAPI
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.plugins.jobreservation.plugin import JobReservation
from scheduler.plugins.reservation.plugin import Reservation
from scheduler.plugins.volume.api import KubeVolumeBinderAPI
from scheduler.podgroupcontroller import GangAnnotationBinder, GangEvents, PodGroupStatusController
from scheduler.queue import SchedulingQueue
from scheduler.quotacontroller import QuotaController, QuotaEvents
from scheduler.quotametrics import QuotaMetrics
from scheduler.registry import KNOWN, Handle, build_framework
from scheduler.reservationevents import ReservationWiring
from scheduler.scheduler import Binder, Scheduler, freeze_heap
from scheduler.shards.wiring import ShardCollector, Sharding, ShardOptions, add_shard_flags, shard_options
from scheduler.watches import informers

__all__ = [
    "LeaderGatedBinder", "SchedulerService", "ShardOptions", "Sharding", "add_shard_flags", "main",
    "shard_options",
]  # fmt: skip

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
log = logging.getLogger("koord-scheduler")


class LeaderGatedBinder:
    """Binds through ``binder`` only while ``leading()`` holds; otherwise the bind fails (the pod goes
    back to the queue's backoff, for the next leader or the next term)."""

    def __init__(self, binder: Binder, leading: Callable[[], bool]) -> None:
        self.binder, self.leading = binder, leading

    def bind(self, pod: Pod, node: str) -> Status:
        if not self.leading():
            meta = pod["metadata"]
            where = f"{meta.get('namespace')}/{meta['name']} to {node}"
            return Status.error(f"binding {where}: not leading", plugin="DefaultBinder")
        return self.binder.bind(pod, node)


class SchedulerService:
    """Every profile of the configuration (one queue, one cache, a framework per schedulerName), the
    queue's backoff from it. ``leading`` (when given) gates every bind (``LeaderGatedBinder``);
    ``sharding`` (when given) makes it one shard of its group: its Binder chain replaces that gate."""

    def __init__(
        self,
        api: Any,
        config: SchedulerConfig | Profile,
        *,
        hub_addr: str | None = None,
        registry: CollectorRegistry | None = None,
        bind_workers: int = 16,
        hub_token_file: Path | None = None,
        hub_ca: Path | None = None,
        leading: Callable[[], bool] | None = None,
        sharding: Sharding | None = None,
    ) -> None:
        self.api = api
        self.sharding = sharding
        config = config if isinstance(config, SchedulerConfig) else SchedulerConfig((config,))
        names = [p.scheduler_name for p in config.profiles]
        registry = registry or CollectorRegistry()
        self.metrics = SchedulerMetrics(registry, names[0])
        # Services and workload controllers, for the spreading plugins' default selectors.
        self.objects = ClusterObjects()
        # Ties between equal top scores are drawn at random, as kube-scheduler does
        # (docs/architecture.md#ties-between-nodes); the generator is seeded from the OS.
        # PodDisruptionBudgets and nominated pods, for DefaultPreemption and every Filter
        # (docs/rules/scheduler-preemption.md#nominated-pods).
        self.pdbs = PDBStore()
        # Storage objects for the volume plugins; VolumeBinding's PreBind writes through the API.
        self.volumes = VolumeObjects()
        queue = SchedulingQueue(
            initial_backoff=config.pod_initial_backoff_seconds, max_backoff=config.pod_max_backoff_seconds
        )
        # Pods held at Permit and the queue's Activate, for Coscheduling
        # (docs/rules/scheduler-coscheduling.md#wiring).
        waiting = self.waiting = WaitingPodMap()
        handle = Handle(
            objects=self.objects, pdbs=self.pdbs.list, nominated=NominatedPods(),
            volumes=self.volumes, volume_api=KubeVolumeBinderAPI(api), waiting=waiting,
            activate=queue.activate,
        )  # fmt: skip
        frameworks = {
            p.scheduler_name: build_framework(
                p, handle, observer=self.metrics.observe_plugin, rng=random.Random()
            )
            for p in config.profiles
        }
        self.reporter = UnschedulableReporter(api, names)
        self.scheduled = ScheduledReporter(api, names)
        binder: Binder = APIBinder(api, on_bound=self.scheduled)
        gangs = [p for fw in frameworks.values() for p in fw.plugins if isinstance(p, Coscheduling)]
        if gangs:  # PreBind's bind-gang annotations reach the API with the bind
            binder = GangAnnotationBinder(api, binder)
        # Reservation: reserve pods, their binds, the controller (docs/rules/scheduler-reservation.md#wiring)
        reservations = [p for fw in frameworks.values() for p in fw.plugins if isinstance(p, Reservation)]
        self.reservations: ReservationWiring | None = None
        unschedulable: Callable[[Pod, Status], None] = self.reporter
        if reservations:
            self.reservations = ReservationWiring(api, reservations, leading or (lambda: True))
            binder = self.reservations.binder(binder)
            unschedulable = self.reservations.reporter(self.reporter)
        if sharding is not None:
            binder = sharding.binder(binder)
            ShardCollector(sharding, registry)
        elif leading is not None:
            binder = LeaderGatedBinder(binder, leading)
        self.scheduler = Scheduler(
            frameworks,
            SchedulerCache(),
            queue,
            binder,
            bind_workers=bind_workers,
            on_unschedulable=unschedulable,
            on_decision=self.metrics.on_decision,
            waiting=waiting,
        )
        # Victims are deleted off the scheduling thread, on the unschedulable reporter's pool.
        self.scheduler.on_post_filter = Preemptor(self.scheduler, KubePreemptionAPI(api), self.reporter.pool)
        self.router = EventRouter(self.scheduler, names, self.objects, self.pdbs, self.volumes)
        if self.reservations is not None:
            self.reservations.attach(self.router, self.scheduler.lock)
        # Coscheduling: every gang pod and PodGroup to the plugins, and the PodGroup status controller
        # (the leader's: docs/rules/scheduler-coscheduling.md#podgroup-status).
        self.podgroups: PodGroupStatusController | None = None
        self.gangs: GangEvents | None = None
        if gangs:
            self.podgroups = PodGroupStatusController(
                api, gangs[0], self.scheduler.lock, leading or (lambda: True)
            )
            self.gangs = GangEvents(gangs, self.scheduler.lock, self.podgroups)
        if sharding is not None:
            if gangs:  # a gang group is scheduled by one shard (docs/shards.md#gangs)
                sharding.gate.group_of = gangs[0].gang_group_head
            self.router.shard(sharding.gate, sharding.host)
        # ElasticQuota: quotas, every pod and node to the plugins; the leader's status and revoke loops
        # (docs/rules/scheduler-elasticquota.md#wiring).
        self.quotas: QuotaEvents | None = None
        self.quota_controller: QuotaController | None = None
        quota_plugins = [p for fw in frameworks.values() for p in fw.plugins if isinstance(p, ElasticQuota)]
        if quota_plugins:
            quota_metrics = QuotaMetrics(registry)
            self.quota_controller = QuotaController(
                api, quota_plugins[0], self.scheduler.lock, leading or (lambda: True), quota_metrics
            )
            self.quotas = QuotaEvents(
                quota_plugins,
                self.scheduler.lock,
                self.scheduler.on_event,
                self.quota_controller,
                quota_metrics,
            )
        # JobReservation's Events and metrics (docs/rules/scheduler-jobreservation.md#events-and-metrics).
        self.jobres: JobReservationReporter | None = None
        for plugin in (p for fw in frameworks.values() for p in fw.plugins if isinstance(p, JobReservation)):
            self.jobres = self.jobres or JobReservationReporter(api, names[0], self.metrics)
            plugin.observer = self.jobres
        self.hub: HubWatcher | None = None
        if hub_addr:
            self.hub = HubWatcher(
                hub_addr, self.router.merger, token_file=hub_token_file, ca_file=hub_ca,
                on_skipped=self.metrics.on_hub_skipped,
            )  # fmt: skip
        self._threads: list[SupervisedThread] = []

    def start(self, stop: threading.Event, sync_timeout: float = 60.0) -> None:
        """Starts informers (waits for their first list) and the hub watcher, supervised: restarted
        with backoff whenever it raises (docs/architecture.md#supervised-threads)."""
        events = self.reservations.events if self.reservations is not None else None
        watched = {
            inf.name: inf
            for inf in informers(
                self.router, self.api, gangs=self.gangs, reservations=events, quotas=self.quotas
            )
        }
        start_informers(list(watched.values()), stop, sync_timeout)
        if self.reservations is not None:  # the leader's (docs/rules/scheduler-reservation.md#wiring)
            nodes_informer = cast("Informer[Node]", watched["nodes"])
            self._threads.append(
                self.reservations.start(
                    stop, lambda name: nodes_informer.get(name) is not None, self.metrics.on_thread_crash
                )
            )
        if self.podgroups is not None:
            workers = self.podgroups.plugin.args.controller_workers
            for i in range(workers):
                name = f"podgroup-status-{i}"
                self._threads.append(
                    supervise(name, self.podgroups.run, stop, on_crash=self.metrics.on_thread_crash)
                )
        if self.quota_controller is not None:  # docs/rules/scheduler-elasticquota.md#wiring
            ctl = self.quota_controller
            for name, loop in (
                ("elasticquota-status", ctl.run_status),
                ("elasticquota-revoke", ctl.run_revoke),
            ):
                self._threads.append(supervise(name, loop, stop, on_crash=self.metrics.on_thread_crash))
        freeze_heap()
        if self.sharding is not None:
            nodes = cast("Informer[Node]", watched["nodes"])
            pods = cast("Informer[Pod]", watched["pods"])
            self.sharding.attach(
                lambda: (list(nodes.store().values()), list(pods.store().values())),
                self.router.reshard, stop, on_crash=self.metrics.on_thread_crash,
            )  # fmt: skip
        if self.hub is not None:
            watcher = supervise("hub-watcher", self.hub.run, stop, on_crash=self.metrics.on_thread_crash)
            self._threads.append(watcher)

    def run(self, stop: threading.Event, active: Callable[[], bool] = lambda: True) -> None:
        """The scheduling loop; idles while `active()` is false."""
        s = self.scheduler
        ticks = 0
        while not stop.is_set():
            if not active():
                stop.wait(0.2)
                continue
            s.schedule_one(timeout=0.2)
            s.run_sessions()  # docs/rules/scheduler-jobreservation.md#sessions
            ticks += 1
            if ticks % 50 == 0 or s.queue.pending().get("active", 0) == 0:
                s.queue.flush_backoff()
                s.queue.flush_unschedulable()
                s.cache.cleanup_expired_assumed()
                self.metrics.refresh_pending(s.queue)

    def close(self) -> None:
        if self.hub is not None:
            self.hub.stop()
        self.scheduler.queue.close()
        # Pods held at Permit are let go now rather than at their gangs' wait times (10 minutes by
        # default): their reservations are undone and another scheduler instance takes them up.
        for held in list(self.waiting.values()):
            held.reject("", "the scheduler is shutting down")
        self.scheduler.wait_for_binds()
        if self.sharding is not None:
            self.sharding.close()
        self.reporter.close()
        self.scheduled.close()
        if self.jobres is not None:
            self.jobres.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="koord-scheduler", description="koord-scheduler: the load-aware scheduler"
    )
    p.add_argument("--version", action="version", version=f"koord-scheduler {koord_version()}")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else in-cluster)")
    p.add_argument("--config", help="KubeSchedulerConfiguration file (YAML or JSON)")
    p.add_argument(
        "--ignore-unknown-plugins",
        action="store_true",
        help="skip (with a warning) the plugins the configuration names that koord-scheduler does not have",
    )
    p.add_argument(
        "--hub-addr", help="MetricHub gRPC address (host:port); NodeMetric CRs are always watched too"
    )
    p.add_argument(
        "--hub-token-file",
        default=None,
        help="bearer token for the MetricHub (default: the pod's ServiceAccount token when mounted)",
    )
    p.add_argument(
        "--hub-ca",
        default=None,
        help="CA bundle (PEM) the hub's certificate must chain to: connect with TLS (default: plaintext)",
    )
    # Unset leader-election flags take the --config file's leaderElection, else these defaults.
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None, help="(on)")
    p.add_argument("--leader-elect-resource-namespace", default=None, help=f"({DEFAULT_CONFIG_NAMESPACE})")
    p.add_argument("--leader-elect-resource-name", default=None, help="(koord-scheduler)")
    p.add_argument("--leader-elect-identity", help="this replica's name in the Lease (default: host_random)")
    p.add_argument(
        "--metrics-port", type=int, default=10251, help="/metrics, /healthz and /readyz port (0: off)"
    )
    p.add_argument("--bind-workers", type=int, default=16)
    # Every bind is one request: the client limit must exceed the target binding rate.
    p.add_argument("--kube-api-qps", type=float, default=500)
    p.add_argument("--kube-api-burst", type=int, default=1000)
    add_shard_flags(p)
    add_klog_and_gate_flags(p, "koord-scheduler")
    return p


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The flags (upstream's Go-style argument lists too, kube.goflags; ``--port`` is --metrics-port) and
    the warning lines for accepted arguments without effect. A bad or unknown flag exits naming it."""
    return parse_go_args(
        build_parser(),
        argv,
        "koord-scheduler",
        upstreamflags.SCHEDULER,
        upstreamflags.SCHEDULER_GATES,
        {},
        upstreamflags.SCHEDULER_ALIASES,
    )


def leader_election(args: argparse.Namespace, config: SchedulerConfig) -> tuple[bool, str, str]:
    """(elect, namespace, name): each flag given wins, then the configuration's leaderElection, then
    the defaults (on, koordinator-system, koord-scheduler)."""
    cfg = config.leader_election

    def pick(flag: Any, configured: Any, default: Any) -> Any:
        return flag if flag is not None else configured if configured is not None else default

    return (
        bool(pick(args.leader_elect, cfg.leader_elect, True)),
        str(pick(args.leader_elect_resource_namespace, cfg.resource_namespace, DEFAULT_CONFIG_NAMESPACE)),
        str(pick(args.leader_elect_resource_name, cfg.resource_name, "koord-scheduler")),
    )


def main(argv: list[str] | None = None) -> int:
    args, warnings = parse_args(argv)
    level = logging.DEBUG if args.v >= 4 else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for warning in warnings:
        log.warning("%s", warning)
    try:
        config = load_config(args.config, KNOWN, args.ignore_unknown_plugins)
        # One pooled connection per bind worker, plus informers, reporters and events.
        api = api_client(
            args.kubeconfig,
            qps=args.kube_api_qps,
            burst=args.kube_api_burst,
            connections=args.bind_workers + 16,
        )
        elect, lease_namespace, lease_name = leader_election(args, config)
        identity = args.leader_elect_identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        opts = shard_options(
            args, "", namespace=lease_namespace, group=config.profiles[0].scheduler_name,
            identity=identity, leader_lease=lease_name,
        )  # fmt: skip
        if opts is not None and not elect:
            raise ValueError("--sharding needs leader election: the leader hosts the group's arbiter")
    except (ConfigError, KubeConfigError, OSError, ValueError) as e:
        print(f"koord-scheduler: {e}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    registry = CollectorRegistry()
    synced = threading.Event()
    probes = None
    if args.metrics_port:
        # /metrics, /healthz (the process serves) and /readyz (informers synced) on one port.
        probes = ProbeServer(
            f":{args.metrics_port}",
            registry,
            liveness={"ping": lambda: (True, "ok")},
            readiness={"informers": lambda: (synced.is_set(), "synced" if synced.is_set() else "syncing")},
        ).start()
    token = Path(args.hub_token_file) if args.hub_token_file else None
    if token is None and SERVICE_ACCOUNT_TOKEN.exists():
        token = SERVICE_ACCOUNT_TOKEN
    leading = threading.Event()
    elector: LeaderElector | None = None
    sharding = Sharding(api, opts) if opts is not None else None
    if elect:

        def started_leading() -> None:
            leading.set()
            if sharding is not None:
                sharding.started_leading()

        def stopped_leading() -> None:
            leading.clear()
            if sharding is not None:
                sharding.stopped_leading()
            if not stop.is_set():
                what = "the shard arbiter" if sharding is not None else "scheduling"
                log.warning("lost the lease: %s stopped, standing by to campaign again", what)

        # The elector talks over a client of its own (kube.client.dedicated_client), never queued
        # behind binds.
        elector = LeaderElector(
            api,
            namespace=lease_namespace,
            name=lease_name,
            identity=identity,
            on_started_leading=started_leading,
            on_stopped_leading=stopped_leading,
        )

    def is_leading() -> bool:
        return elector is None or (leading.is_set() and elector.is_leading())

    if sharding is None:
        guard_writes(api, is_leading)
    else:  # every shard writes (binds, statuses, events) while its own Lease holds
        guard_writes(api, sharding.heartbeat.is_member, "not a shard member")
    service = SchedulerService(
        api,
        config,
        hub_addr=args.hub_addr,
        registry=registry,
        bind_workers=args.bind_workers,
        hub_token_file=token,
        hub_ca=Path(args.hub_ca) if args.hub_ca else None,
        leading=is_leading if sharding is None else None,
        sharding=sharding,
    )
    service.start(stop)
    synced.set()
    log.info(
        "koord-scheduler %s: informers synced; profiles %s",
        koord_version(), ", ".join(p.scheduler_name for p in config.profiles),
    )  # fmt: skip
    if elector is None:
        service.run(stop)
    else:
        t = threading.Thread(target=elector.run_forever, args=(stop,), name="leader-election", daemon=True)
        t.start()
        service.run(stop, active=is_leading if sharding is None else lambda: True)
        t.join(timeout=15)
    service.close()
    if probes is not None:
        probes.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
