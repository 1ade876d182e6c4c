"""JobReservation's effects outside the scheduler (docs/rules/scheduler-jobreservation.md#events-and-metrics):
the session observer that keeps the plugin's metrics and records its Events — `JobElected` and
`JobReservationReleased` — on the job's PodGroup when a PodGroup object declares the gang, else on the
gang's pods. Events are written on one thread of their own: the sessions run on the scheduling thread,
under the scheduler's lock, and never wait for the API server.
Imports: the standard library, kube (events), scheduler (metrics, plugins.jobreservation).
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from kube.events import EventRecorder
from scheduler.metrics import SchedulerMetrics
from scheduler.plugins.jobreservation.plugin import JobRef

POD_GROUP_API: Final = "scheduling.sigs.k8s.io/v1alpha1"


def elected_message(job: str) -> str:
    return f'job "{job}" elected for node reservation'


def released_message(job: str, why: str, unlocked: int) -> str:
    return f'node reservation for job "{job}" released ({why}), {unlocked} node(s) unlocked'


def involved(job: JobRef) -> list[Mapping[str, Any]]:
    """The objects an Event about `job` is recorded on."""
    if job.pod_group:
        namespace, _, name = job.name.partition("/")
        return [
            {
                "kind": "PodGroup",
                "apiVersion": POD_GROUP_API,
                "metadata": {"namespace": namespace, "name": name},
            }
        ]
    return [{"kind": "Pod", "apiVersion": "v1", **pod} for pod in job.pods]


class JobReservationReporter:
    """A `SessionObserver` (scheduler.plugins.jobreservation.plugin)."""

    def __init__(self, api: Any, component: str, metrics: SchedulerMetrics) -> None:
        self.events = EventRecorder(api, component)
        self.metrics = metrics
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="jobreservation-events")

    def elected(self, job: JobRef) -> None:
        self.metrics.jobres_elections.inc()
        self._record(job, "JobElected", elected_message(job.name))

    def released(self, job: JobRef, why: str, unlocked: int) -> None:
        self.metrics.jobres_releases.labels(why).inc()
        self._record(job, "JobReservationReleased", released_message(job.name, why, unlocked))

    def locked(self, job: JobRef | None, node: str | None, count: int) -> None:
        self.metrics.jobres_locked.set(count)

    def _record(self, job: JobRef, reason: str, message: str) -> None:
        for obj in involved(job):
            self._pool.submit(self.events.event, obj, "Normal", reason, message)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
