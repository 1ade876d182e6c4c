"""SchedulerService: every profile of a KubeSchedulerConfiguration (one queue, one cache, a framework
per schedulerName) with its informers, binder chain and the optional plugins' wiring (Coscheduling,
JobReservation, Reservation, ElasticQuota, NodeNUMAResource, DeviceShare, shards); koord-scheduler's
entry point (scheduler.main) and koord-manager (embedded) run it.

The service keeps its informers (and the MetricHub watcher, when a hub address is given) running
on every replica, so a standby has a warm cache; only while `active()` is true — this replica holds
the Lease — does it pop and schedule pods, and its binder checks `leading()` before every bind, so
binding stops once the elector's own clock says the lease may have expired
(docs/architecture.md#leader-election). With sharding on (docs/shards.md#wiring) every replica
schedules its own share of the pending pods, leader or not, binds through the group's arbiter.
Imports: prometheus_client, apis, kube, scheduler.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from prometheus_client import CollectorRegistry

from apis.kubeobjects import Node
from kube.informer import Informer
from kube.supervise import SupervisedThread, supervise
from scheduler.annotationbinder import AnnotationBinder, bind_annotation_keys
from scheduler.cache import SchedulerCache
from scheduler.config import Profile, SchedulerConfig
from scheduler.framework.interfaces import Pod
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.status import Status
from scheduler.framework.volumes import VolumeObjects
from scheduler.framework.waiting import WaitingPodMap
from scheduler.gateway import (
    APIBinder,
    EventRouter,
    Preemptor,
    ScheduledReporter,
    UnschedulableReporter,
    start_informers,
)
from scheduler.jobreservation_events import JobReservationReporter
from scheduler.metrics import SchedulerMetrics
from scheduler.metricsource import HubWatcher
from scheduler.pdbstore import PDBStore
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.defaultpreemption.api import KubePreemptionAPI
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.plugins.jobreservation.plugin import JobReservation
from scheduler.plugins.reservation.plugin import Reservation
from scheduler.plugins.volume.api import KubeVolumeBinderAPI
from scheduler.podgroupcontroller import GangEvents, PodGroupStatusController
from scheduler.queue import SchedulingQueue
from scheduler.quotacontroller import QuotaController, QuotaEvents
from scheduler.quotametrics import QuotaMetrics
from scheduler.registry import Handle, build_framework
from scheduler.reservationevents import ReservationWiring
from scheduler.scheduler import Binder, Scheduler, freeze_heap
from scheduler.shards.wiring import ShardCollector, Sharding
from scheduler.topologyevents import TopologyEvents
from scheduler.watches import informers

__all__ = ["LeaderGatedBinder", "SchedulerService"]


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
        keys = bind_annotation_keys(p for fw in frameworks.values() for p in fw.plugins)
        # PreBind's annotations reach the API with the bind (docs/architecture.md#binding-annotations)
        if keys:
            binder = AnnotationBinder(api, binder, keys)
        gangs = [p for fw in frameworks.values() for p in fw.plugins if isinstance(p, Coscheduling)]
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
        # NodeNUMAResource / DeviceShare: NodeResourceTopologies and Devices to the plugins
        # (docs/rules/scheduler-nodenumaresource.md#wiring, docs/rules/scheduler-deviceshare.md#wiring).
        all_plugins = (p for fw in frameworks.values() for p in fw.plugins)
        topology = TopologyEvents(all_plugins, self.scheduler.lock, self.scheduler.on_event)
        self.topology: TopologyEvents | None = topology if topology.wanted else None
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
                self.router,
                self.api,
                gangs=self.gangs,
                reservations=events,
                quotas=self.quotas,
                topology=self.topology,
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
