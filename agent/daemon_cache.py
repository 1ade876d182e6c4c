"""The koordlet's metric cache as its composition root (agent.daemon) keeps it: sized for the default
NodeMetric spec at start and for the node's own spec once it is known, restored from the last save and
checkpointed every ``--metric-cache-checkpoint-interval`` (docs/rules/koordlet.md#metric-cache), and the
age of its newest sample (``koordlet_metrics_blind_seconds``, docs/rules/koordlet.md#freshness-rule).
Imports: standard library, apis.{nodemetric,waits}, agent.*.
"""

from __future__ import annotations

import logging
import time

from agent.metriccache import CacheConfig, MetricCache, persist
from agent.options import Options
from agent.reporter.build import aggregate_duration_seconds
from agent.supervisor import Supervisor
from apis.nodemetric import NodeMetricCollectPolicy
from apis.waits import clamp_seconds

__all__ = [
    "DEFAULT_NODE_RETENTION_SECONDS",
    "NODE_RETENTION_SLACK_SECONDS",
    "new_cache",
    "newest_sample_age",
    "restore",
    "retention",
]

log = logging.getLogger("koordlet")

NODE_RETENTION_SLACK_SECONDS = 300.0
DEFAULT_NODE_RETENTION_SECONDS = 30 * 60 + NODE_RETENTION_SLACK_SECONDS


def new_cache(opts: Options) -> MetricCache:
    """Sized for the default NodeMetric spec until the node's own spec is known (see ``retention``)."""
    return MetricCache(
        CacheConfig(
            retention_seconds=min(DEFAULT_NODE_RETENTION_SECONDS, opts.retention_seconds),
            collect_interval_seconds=opts.collect_interval_seconds,
            entity_retention_seconds=min(max(opts.pod_retention_seconds, 360.0), opts.retention_seconds),
        )
    )


def retention(opts: Options, policy: NodeMetricCollectPolicy | None) -> tuple[float, float]:
    """(node, pod) history to keep: what the NodeMetric spec's windows need plus slack, capped by
    ``--metric-retention``; pod series at least ``--pod-metric-retention``. Memory then follows
    what is actually queried (30 min windows by default) instead of the 12 h cap."""
    policy = (policy or NodeMetricCollectPolicy()).with_defaults()
    aggregate = aggregate_duration_seconds(policy)
    durations = policy.node_aggregate_policy.durations if policy.node_aggregate_policy else []
    longest = max([aggregate, *(d.total_seconds() for d in durations)])
    node = min(longest + NODE_RETENTION_SLACK_SECONDS, opts.retention_seconds)
    pod = min(max(opts.pod_retention_seconds, aggregate + 60.0), node)
    return node, pod


def newest_sample_age(cache: MetricCache, retention_seconds: float) -> float | None:
    """Seconds since the newest node_cpu_usage sample (None before the first one)."""
    now_ms = int(time.time() * 1000)
    try:
        res = cache.query("node_cpu_usage", {}, now_ms - int(retention_seconds * 1000), now_ms)
    except Exception:
        return None
    if not res.count():
        return None
    return max(0.0, (now_ms - int(res.timestamps.max())) / 1000.0)


def restore(cache_file: persist.CacheFile, opts: Options, supervisor: Supervisor) -> None:
    """Load the last save (a bad one: start empty); then, unless the interval is 0, a thread saves the
    cache every ``--metric-cache-checkpoint-interval``."""
    try:
        n = cache_file.load(int(time.time() * 1000), int(opts.retention_seconds * 1000))
        log.info("metric cache: restored %d points from %s", n, cache_file.path)
    except persist.PersistError as e:
        log.warning("metric cache: starting empty: %s", e)
    if opts.metric_cache_checkpoint_seconds > 0:
        # docs/rules/koordlet.md#metric-cache: a crash loses at most one interval
        interval = clamp_seconds(opts.metric_cache_checkpoint_seconds, "--metric-cache-checkpoint-interval")
        run = cache_file.run
        supervisor.spawn("metric-cache-checkpoint", lambda stop: run(stop, interval))
