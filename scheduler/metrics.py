"""koord-scheduler's Prometheus metrics, named as kube-scheduler's so existing dashboards work:
attempts by result, attempt latency, pending pods per queue, plugin execution duration; and koord's
own: hub items skipped by reason, supervised threads restarted, JobReservation's locks, elections and
releases (docs/rules/scheduler-jobreservation.md#events-and-metrics).
The registry is injectable (tests use a fresh one). Imports: prometheus_client, scheduler.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from scheduler.framework.status import Code
from scheduler.queue import SchedulingQueue
from scheduler.scheduler import Decision

_LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry, profile: str = "koord-scheduler") -> None:
        self.profile = profile
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Scheduling attempts by result.",
            ["result", "profile"],
            registry=registry,
        )
        self.latency = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency (scheduling algorithm and binding).",
            ["result", "profile"], buckets=_LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.pending = Gauge("scheduler_pending_pods", "Pending pods by queue.", ["queue"], registry=registry)
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration of one plugin at one extension point (over all nodes).",
            ["plugin", "extension_point"], buckets=_LATENCY_BUCKETS, registry=registry,
        )  # fmt: skip
        self.hub_skipped = Counter(
            "koord_scheduler_hub_reports_skipped",
            "MetricHub items that failed the report check (the node's hub metric is dropped), by reason.",
            ["reason"], registry=registry,
        )  # fmt: skip
        self.thread_restarts = Counter(
            "koord_scheduler_thread_restarts",
            "Supervised threads that raised and were restarted, by thread.",
            ["thread"], registry=registry,
        )  # fmt: skip

        self.jobres_locked = Gauge(
            "koord_scheduler_jobreservation_locked_nodes",
            "JobReservation: nodes locked for the target job.",
            registry=registry,
        )
        self.jobres_elections = Counter(
            "koord_scheduler_jobreservation_elections",
            "JobReservation: target jobs elected.",
            registry=registry,
        )
        self.jobres_releases = Counter(
            "koord_scheduler_jobreservation_releases",
            "JobReservation: reservations released, by reason (ready, gone).",
            ["reason"], registry=registry,
        )  # fmt: skip

    def on_hub_skipped(self, reason: str) -> None:
        self.hub_skipped.labels(reason).inc()

    def on_thread_crash(self, thread: str, _error: BaseException) -> None:
        self.thread_restarts.labels(thread).inc()

    def on_decision(self, d: Decision) -> None:
        if d.node is not None:
            result = "scheduled"
        elif d.status.code == Code.ERROR:
            result = "error"
        else:
            result = "unschedulable"
        self.attempts.labels(result, self.profile).inc()
        self.latency.labels(result, self.profile).observe(d.seconds)

    def observe_plugin(self, plugin: str, point: str, seconds: float) -> None:
        self.plugin_duration.labels(plugin, point).observe(seconds)

    def refresh_pending(self, queue: SchedulingQueue) -> None:
        for name, count in queue.pending().items():
            self.pending.labels(name).set(count)
