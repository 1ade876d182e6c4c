"""koordlet entry point and composition root (start order with readiness barriers,
docs/rules/koordlet.md#start-order-and-readiness).

Order: probe server (``/healthz`` live at once, ``/readyz`` not yet) → metric cache (reloaded from the
last save; saved again every ``--metric-cache-checkpoint-interval``) → states informer (wait until synced)
→ collectors (wait until each has run once) → reporter (NodeMetric CR + MetricHub push); the
NodeResourceTopology reporter starts with the NodeMetric reporter and is kicked by pod events that change a
cpuset (docs/rules/koordlet-topology.md#reporting), and so does the Device reporter (gate ``Accelerators``,
docs/rules/koordlet-gpu.md#reporting); agent.daemon_topology wires both, agent.daemon_cache keeps the metric
cache. Loops run as supervised threads. SIGTERM/SIGINT stop everything and save the metric cache.
Imports: standard library, apis.waits, kube.{errors,httpserver,rest}, agent.*.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from types import FrameType

from prometheus_client import CollectorRegistry

from agent.daemon_cache import new_cache, newest_sample_age, restore, retention
from agent.daemon_topology import TopologyReports
from agent.evictor import Evictor
from agent.gateway import KubeGateway
from agent.metriccache import persist
from agent.metrics import AgentMetrics, BlindnessCollector
from agent.metricsadvisor.framework import AdvisorConfig, CollectContext
from agent.metricsadvisor.registry import default_collectors, numa_ids
from agent.metricsadvisor.runner import CollectorRunner
from agent.options import Options, parse
from agent.qosmanager.framework import Snapshot
from agent.qosmanager.registry import StrategyDeps, build_entries
from agent.qosmanager.runner import CacheMetricView, HostCgroupView, QoSManager
from agent.qosmanager.systemconfig import system_roots
from agent.reporter.hubpush import HubPusher
from agent.reporter.loop import ReporterLoop
from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.executor import ResourceExecutor, default_roots
from agent.statesinformer.informer import StatesInformer
from agent.supervisor import Supervisor
from agent.system.cgroup import detect_cgroup_version
from agent.system.podcgroup import CgroupDriver, detect_cgroup_driver
from apis.waits import clamp_seconds
from kube.errors import KubeConfigError
from kube.httpserver import ProbeServer
from kube.rest import KubeRest

__all__ = ["Koordlet", "main"]

log = logging.getLogger("koordlet")

DRIVER_WAIT_SECONDS = 60.0
SHUTDOWN_JOIN_SECONDS = 10.0
REASSERT_INTERVAL_SECONDS = 10.0
"""How often the executor re-checks every file it wrote, drift counted and rewritten
(docs/rules/koordlet.md#re-asserting-written-values)."""


class Koordlet:
    """One node agent. ``start()`` returns at once; ``ready`` tells when reporting runs."""

    def __init__(
        self,
        opts: Options,
        rest: KubeRest | None = None,
        registry: CollectorRegistry | None = None,
        *,
        reassert_interval_seconds: float = REASSERT_INTERVAL_SECONDS,
    ) -> None:
        self.opts = opts
        self.reassert_interval_seconds = reassert_interval_seconds
        """≤ 0: no periodic re-assert (cacheable writes are then re-checked only after the cache expires)."""
        self.stop_event = threading.Event()
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = AgentMetrics(opts.node_name, self.registry)
        self.cache = new_cache(opts)  # resized by retention_seconds once the node's NodeMetric spec is known
        self.supervisor = Supervisor(self.stop_event)
        self.rest = (
            rest
            if rest is not None
            else KubeRest.from_kubeconfig(opts.kubeconfig, opts.kube_api_qps, opts.kube_api_burst)
        )
        self.gateway = KubeGateway(self.rest, opts.node_name)
        self.cgroup_version = detect_cgroup_version(opts.paths.cgroup_root)
        self.driver = opts.cgroup_driver or self._detect_driver()
        self.states = StatesInformer(self.gateway, self.driver, on_forget=self._forget)
        self.context = CollectContext(
            paths=opts.paths,
            cgroup_version=self.cgroup_version,
            cgroup_driver=self.driver,
            pods=self.states,
            host_apps=self.states.host_apps,
            node_memory_policy=self._memory_policy,
        )
        self.runner = CollectorRunner(
            default_collectors(
                AdvisorConfig(collect_interval_seconds=opts.collect_interval_seconds), opts.feature_gates
            ),
            cache=self.cache,
            ctx=self.context,
            on_collect=self.metrics.on_collect,
        )
        self.pusher = (
            HubPusher(
                opts.hub_address, opts.hub_token_file, on_result=self.metrics.on_report, ca_file=opts.hub_ca
            )
            if opts.hub_address
            else None
        )
        self.reporter = ReporterLoop(
            node_name=opts.node_name,
            cache=self.cache,
            sources=self.states,
            writer=self.gateway if opts.enable_node_metric_report else None,
            pusher=self.pusher,
            push_interval=opts.push_interval_seconds,
            numa_ids=lambda: numa_ids(self.context),
            on_result=self._report_result,
        )
        self.reports = TopologyReports(opts, self.gateway, self.states, self.context, self.metrics)
        self._collectors_started = threading.Event()
        path = opts.metric_cache_path
        self.cache_file = persist.CacheFile(self.cache, path) if path is not None else None
        BlindnessCollector(
            opts.node_name, lambda: newest_sample_age(self.cache, opts.retention_seconds), self.registry
        )
        self.audit = AuditLog(opts.audit_log) if opts.audit_log is not None else None
        roots = default_roots(opts.paths)
        if opts.feature_gates.get("SystemConfig", False):  # kernel knobs: only when that strategy runs
            roots = (*roots, *system_roots(opts.paths.proc, opts.paths.sys))
        self.executor = ResourceExecutor(
            opts.paths,
            self.cgroup_version,
            opts.node_name,
            allowed_roots=roots,
            audit=self.audit,
            dry_run=opts.qos_dry_run,
            on_write=self.metrics.on_write,
            on_drift=self.metrics.on_drift,
        )
        self.evictor = Evictor(self.gateway, self.registry, audit=self._audit_eviction)
        self.qos = QoSManager(
            build_entries(
                opts.feature_gates,
                StrategyDeps(
                    opts.paths, self.evictor.pending_uids, nrt_annotations=self.reports.nrt_annotations
                ),
            )
            if opts.enable_qos
            else [],
            self._snapshot,
            self.executor,
            self.evictor,
            on_gauges=self.metrics.on_qos_gauges,
        )
        self.server = ProbeServer(
            opts.addr,
            self.registry,
            liveness={"threads": self.supervisor.healthy},
            readiness={
                "informers": lambda: (
                    self.states.synced(),
                    "pods, node, nodeslo, nodemetric informers synced",
                ),
                "collectors": lambda: (self._collectors_started.is_set(), self._collectors_detail()),
            },
        )

    # -- wiring helpers ------------------------------------------------------------------------------
    def _detect_driver(self) -> CgroupDriver:
        """The kubelet creates ``kubepods`` when it starts; wait a bounded time for it."""
        deadline = time.monotonic() + DRIVER_WAIT_SECONDS
        while True:
            try:
                return detect_cgroup_driver(self.opts.paths, self.cgroup_version)
            except ValueError as e:
                if time.monotonic() > deadline:
                    raise ValueError(
                        f"cannot detect the kubelet cgroup driver (use --cgroup-driver): {e}"
                    ) from e
                log.info("waiting for the kubelet's pod cgroups: %s", e)
                time.sleep(2.0)

    def _memory_policy(self) -> str | None:
        policy = self.states.collect_policy()
        value = policy.node_memory_collect_policy if policy else None
        return None if value is None else str(value)

    def _forget(self, pod_uid: str | None, container_ids: Sequence[str]) -> None:
        dropped = self.cache.drop({"pod_uid": pod_uid}) if pod_uid else 0
        for cid in container_ids:
            dropped += self.cache.drop({"container_id": cid})
        log.debug("dropped %d series of pod %s", dropped, pod_uid)

    def _snapshot(self, now: datetime) -> Snapshot:
        return Snapshot(
            now=now,
            node=self.states.node(),
            node_slo=self.states.node_slo(),
            pods=self.states.pods(),
            metrics=CacheMetricView(self.cache, int(now.timestamp() * 1000)),
            cgroups=HostCgroupView(self.opts.paths, self.cgroup_version),
            cgroup_version=self.cgroup_version,
            cgroup_driver=self.driver,
            topology=self.reports.topology(),
            collect_interval_seconds=self.opts.collect_interval_seconds,
            host_apps=tuple(self.states.host_apps() or ()),
            gates=self.opts.feature_gates,
        )

    def _audit_eviction(self, line: str) -> None:
        if self.audit is not None:
            try:
                self.audit.write(json.loads(line))
            except ValueError:
                self.audit.write({"event": line})

    def _report_result(self, target: str, result: str) -> None:
        self.metrics.on_report(target, result)

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> Koordlet:
        self.server.start()
        log.info(
            "koordlet %s on node %s: /metrics /healthz /readyz on port %d (cgroup %s, driver %s)",
            os.getpid(),
            self.opts.node_name,
            self.server.port,
            self.cgroup_version.value,
            self.driver.value,
        )
        if self.cache_file is not None:
            restore(self.cache_file, self.opts, self.supervisor)
        self.states.start(self.stop_event)
        self.supervisor.spawn("bringup", self._bring_up)
        return self

    def _bring_up(self, stop: threading.Event) -> None:
        while not self.states.wait_synced(5.0):
            if stop.is_set():
                return
            log.info("waiting for the states informer to sync")
        self.runner.start()
        # The reporter needs only the informers; it reports whatever the cache holds
        # (docs/rules/koordlet.md#reporter).
        self.supervisor.spawn("reporter", self.reporter.run)
        self.reports.start(self.supervisor, stop)
        self.supervisor.spawn("usage-metrics", self._usage_metrics)
        while not self.runner.wait_started(5.0):
            if stop.is_set():
                return
            log.info("waiting for every collector's first round: %s", self._collectors_detail())
        self._collectors_started.set()
        log.info("every collector has run once: ready")
        if self.qos.entries:
            # The QoS manager starts after the metrics advisor
            # (docs/rules/koordlet.md#start-order-and-readiness).
            self.evictor.start()
            self.qos.start(stop)
            self.runner.add_round_listener(self.qos.kick)  # strategies tick on fresh samples
            if self.reassert_interval_seconds > 0:
                self.supervisor.spawn("reassert", self._reassert)
            names = ", ".join(e.strategy.name for e in self.qos.entries)
            dry = " (dry run: cgroup writes audited, not made)" if self.opts.qos_dry_run else ""
            log.info("QoS strategies running: %s%s", names, dry)

    def _reassert(self, stop: threading.Event) -> None:
        """Every ``reassert_interval_seconds``, re-check every file the executor wrote; a value someone else
        (the kubelet) changed is counted in ``koordlet_cgroup_drift_total`` and written back
        (docs/rules/koordlet.md#re-asserting-written-values)."""
        while not stop.wait(clamp_seconds(self.reassert_interval_seconds, "executor re-assert interval")):
            results = self.executor.reassert()
            drifted = [r.path for r in results if r.drift]
            if drifted:
                log.info("re-asserted %d drifted file(s): %s", len(drifted), ", ".join(drifted))

    def _collectors_detail(self) -> str:
        failures = {k: v for k, v in self.runner.failures.items() if v}
        slo = (
            ""
            if self.states.node_slo() is not None
            else "; no NodeSLO for this node yet (system and host-app collectors wait for it)"
        )
        return f"enabled {self.runner.enabled_collectors}, failed rounds {failures}{slo}"

    def _usage_metrics(self, stop: threading.Event) -> None:
        window_ms = int(2 * self.opts.collect_interval_seconds * 1000)
        while not stop.wait(clamp_seconds(self.opts.push_interval_seconds, "--push-interval-seconds")):
            self.metrics.update_usage(self.cache, self.states.pods(), int(time.time() * 1000), window_ms)
            self.cache.set_retention(*self.retention_seconds())

    def retention_seconds(self) -> tuple[float, float]:
        """(node, pod) history to keep for this node's NodeMetric spec (agent.daemon_cache.retention)."""
        return retention(self.opts, self.states.collect_policy())

    @property
    def ready(self) -> bool:
        return self.states.synced() and self._collectors_started.is_set()

    def shutdown(self) -> None:
        self.stop_event.set()
        if self.reports.topology_reporter is not None:
            self.reports.topology_reporter.kick()  # out of its interval wait
        self.runner.stop()
        if self.audit is not None:
            self.audit.close()
        left = self.supervisor.join(SHUTDOWN_JOIN_SECONDS)
        if left:
            log.warning("threads still running at shutdown: %s", ", ".join(left))
        if self.cache_file is not None:
            self.cache_file.save("shutdown")
        if self.pusher is not None:
            self.pusher.close()
        self.rest.close()
        self.server.stop()


def main(argv: list[str] | None = None) -> int:
    opts, _ = parse(argv, os.environ)
    logging.basicConfig(
        level=logging.DEBUG if opts.verbosity >= 4 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for warning in opts.warnings:
        log.warning("%s", warning)
    try:
        agent = Koordlet(opts)
    except (ValueError, OSError, KubeConfigError) as e:
        print(f"koordlet: {e}", file=sys.stderr)
        return 1
    done = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    agent.start()
    while not done.wait(1.0):
        pass
    agent.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
