"""The reporter loop: builds the NodeMetric status and ships it to the CR and to the MetricHub.

The CR is written every ``max(reportIntervalSeconds, 30)`` s (60 s until the spec is known), the first write
one interval after start and only while the NodeMetric exists (docs/rules/koordlet.md#reporter). The hub gets
the same report every ``push_interval`` s (docs/rules/koordlet.md#pushing-reports-to-the-metrichub). When both
are due in one tick one status serves both.

Imports: standard library, apis.*, agent.{metriccache,podmeta,reporter.build}, and — through the objects
it is given — the gateway and the hub pusher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from agent.metriccache import MetricCache
from agent.podmeta import PodMeta
from agent.reporter.build import ReportInputs, build_status, report_interval_seconds
from apis.convert import report_to_proto
from apis.nodemetric import NodeMetricCollectPolicy, NodeMetricStatus
from apis.nodeslo import HostApplicationSpec
from apis.waits import clamp_seconds
from proto.koord.v1 import metrichub_pb2 as pb

__all__ = ["Pusher", "ReporterLoop", "ReporterSources", "StatusWriter"]

log = logging.getLogger(__name__)

DEFAULT_PUSH_INTERVAL_SECONDS = 5.0


class ReporterSources(Protocol):
    def pods(self) -> Sequence[PodMeta]: ...
    def host_apps(self) -> Sequence[HostApplicationSpec] | None: ...
    def collect_policy(self) -> NodeMetricCollectPolicy | None: ...
    def nodemetric_seen(self) -> bool: ...


class StatusWriter(Protocol):
    def write_nodemetric_status(self, status: dict[str, Any]) -> None: ...


class Pusher(Protocol):
    def push(self, report: pb.NodeMetricReport | None = None) -> bool: ...


class ReporterLoop:
    def __init__(
        self,
        *,
        node_name: str,
        cache: MetricCache,
        sources: ReporterSources,
        writer: StatusWriter | None,
        pusher: Pusher | None,
        push_interval: float = DEFAULT_PUSH_INTERVAL_SECONDS,
        numa_ids: Callable[[], Sequence[int]] = lambda: (),
        on_result: Callable[[str, str], None] | None = None,
        on_status: Callable[[NodeMetricStatus], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if push_interval <= 0:
            raise ValueError(f"push interval must be > 0 s, got {push_interval}")
        self.node_name = node_name
        self._cache = cache
        self._sources = sources
        self._writer = writer
        self._pusher = pusher
        self.push_interval = push_interval
        self._numa_ids = numa_ids
        self._on_result = on_result
        self._on_status = on_status
        self._clock = clock
        self._monotonic = monotonic
        self.last_status: NodeMetricStatus | None = None

    def policy(self) -> NodeMetricCollectPolicy:
        return (self._sources.collect_policy() or NodeMetricCollectPolicy()).with_defaults()

    def build(self) -> NodeMetricStatus:
        policy = self.policy()
        status = build_status(
            ReportInputs(
                cache=self._cache,
                now=self._clock(),
                policy=policy,
                pods=self._sources.pods(),
                host_apps=self._sources.host_apps(),
                numa_ids=self._numa_ids(),
                clock=self._clock,
            )
        )
        self.last_status = status
        if self._on_status is not None:
            self._on_status(status)
        return status

    def _result(self, target: str, result: str) -> None:
        if self._on_result is not None:
            self._on_result(target, result)

    def write_cr(self, status: NodeMetricStatus) -> bool:
        if self._writer is None:
            return False
        if not self._sources.nodemetric_seen():
            log.info("nodemetrics/%s not observed yet: report skipped", self.node_name)
            return False
        try:
            self._writer.write_nodemetric_status(status.to_dict())
        except Exception as e:  # the gateway's errors name the object; one failed round is not fatal
            log.warning("NodeMetric status not written: %s", e)
            self._result("cr", "failed")
            return False
        self._result("cr", "succeeded")
        return True

    def push(self, status: NodeMetricStatus) -> bool:
        if self._pusher is None:
            return False
        report = report_to_proto(self.node_name, status, self._sources.collect_policy())
        return self._pusher.push(report)

    def run(self, stop: threading.Event) -> None:
        start = self._monotonic()
        next_push = start + self.push_interval if self._pusher is not None else float("inf")
        next_cr = start + report_interval_seconds(self._sources.collect_policy())
        if self._writer is None:
            next_cr = float("inf")
        while not stop.is_set():
            due = min(next_push, next_cr)
            if due == float("inf"):
                stop.wait()
                return
            if stop.wait(clamp_seconds(due - self._monotonic(), "reporter wait (--push-interval-seconds)")):
                return
            now = self._monotonic()
            try:
                status = self.build()
            except Exception:
                log.exception("building the NodeMetric status failed")
                if now >= next_push:
                    next_push = now + self.push_interval
                if now >= next_cr:
                    next_cr = now + report_interval_seconds(self._sources.collect_policy())
                continue
            if now >= next_push:
                self.push(status)
                next_push = now + self.push_interval
            if now >= next_cr:
                self.write_cr(status)
                next_cr = now + report_interval_seconds(self._sources.collect_policy())
