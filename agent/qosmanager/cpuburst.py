"""CPU burst (docs/rules/koordlet.md): each tick, from the node's share-pool state and the merged
``cpuBurstStrategy`` (overridden per pod by the ``koordinator.sh/cpuBurst`` annotation), write every
eligible container's and pod's ``cpu.cfs_burst_us`` and scale running containers' CFS quotas between
their base and ceiling, rate-limited by a per-container token limiter. ``decide`` is pure: cgroup values
come from ``snapshot.cgroups``, usages from ``snapshot.metrics``, randomness from ``CPUBurstOptions``.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions},
agent.qosmanager.{framework,cpuburst_limiter}.
"""

from __future__ import annotations

import enum
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.podmeta import ContainerMeta, PodMeta
from agent.qosmanager import cpuburst_limiter as lim
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CPU_BURST, CPU_QUOTA, CgroupFile
from agent.system.nodeinfo import NodeTopology
from apis import constants as c
from apis.gojson import overlay
from apis.kubeobjects import Pod
from apis.nodeslo import CPUBurstStrategy as BurstConfig
from apis.pod import container_limits, containers, phase, pod_requests
from apis.qos import QoSClass, qos_class_raw

__all__ = [
    "BurstConfig",
    "CPUBurstOptions",
    "CPUBurstState",
    "CPUBurstStrategy",
    "NodeState",
    "Operation",
    "container_burst_us",
    "decide",
    "node_state",
    "pod_burst_config",
]

NAME: Final = "CPUBurst"
CFS_PERIOD: Final = 100000
MIN_QUOTA: Final = 1000
RECONCILE_INTERVAL: Final = 1.0


class NodeState(enum.StrEnum):
    OVERLOAD = "nodeBurstOverload"
    COOLING = "nodeBurstCooling"
    IDLE = "nodeBurstIdle"
    UNKNOWN = "nodeBurstUnknown"


class Operation(enum.StrEnum):
    SCALE_UP = "scaleUp"
    SCALE_DOWN = "scaleDown"
    REMAIN = "remain"
    RESET = "reset"


@dataclass(frozen=True)
class CPUBurstOptions:
    """``rand``: uniform [0, 1) source for the limiters' initial tokens (seed it for determinism);
    ``reconcile_interval_seconds`` sets the share-pool window ``min(5 × interval, 10 s)``."""

    rand: Callable[[], float] = field(default_factory=lambda: random.Random().random)
    reconcile_interval_seconds: float = RECONCILE_INTERVAL


@dataclass(frozen=True)
class CPUBurstState:
    """Token limiters (with their last check time) per container ID."""

    limiters: Mapping[str, lim.BurstLimiter] = field(default_factory=dict)


# --- pure building blocks ---------------------------------------------------------------------------
def pod_burst_config(pod: Pod, node_cfg: BurstConfig | None) -> BurstConfig:
    """Node config overlaid with the pod's ``koordinator.sh/cpuBurst`` annotation (unparsable → ignored)."""
    base = node_cfg if node_cfg is not None else BurstConfig()
    ann = ((pod.get("metadata") or {}).get("annotations") or {}).get(c.ANNOTATION_POD_CPU_BURST)
    if not isinstance(ann, str):
        return base
    try:
        raw = json.loads(ann)
        if not isinstance(raw, dict):
            return base
        pod_cfg = BurstConfig.from_dict(raw)
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return base
    return overlay(base, pod_cfg)


def _limit_milli(container: Mapping[str, Any]) -> int:
    try:
        q = container_limits(container, ("cpu",)).get("cpu")
    except ValueError:
        return 0
    return q.milli_value() if q is not None else 0


def _burst_enabled(policy: str | None) -> bool:
    return policy in ("cpuBurstOnly", "auto")


def _quota_burst_enabled(policy: str | None) -> bool:
    return policy in ("cfsQuotaBurstOnly", "auto")


def container_burst_us(limit_milli: int, cfg: BurstConfig) -> int:
    """``int64((limit/1000) × (cpuBurstPercent/100) × 100000)``; 0 without a limit or burst policy."""
    if not _burst_enabled(cfg.policy) or limit_milli <= 0:
        return 0
    pct = cfg.cpu_burst_percent if cfg.cpu_burst_percent is not None else 0
    return int((limit_milli / 1000) * (pct / 100) * CFS_PERIOD)


def static_burst(pod: Pod, cfg: BurstConfig) -> tuple[dict[str, int], int]:
    """cfs_burst_us per container (those with a status and a containerID) and the pod sum."""
    spec = {str(ct.get("name") or ""): ct for ct in containers(pod)}
    out: dict[str, int] = {}
    for st in (pod.get("status") or {}).get("containerStatuses") or []:
        name = str(st.get("name") or "")
        if name in spec and st.get("containerID"):
            out[name] = container_burst_us(_limit_milli(spec[name]), cfg)
    return out, sum(out.values())


def milli_to_quota(milli: int) -> int:
    """``MilliCPUToQuota``: ``m × 100``; ≤ 0 → −1; below 1000 → 1000."""
    if milli <= 0:
        return -1
    return max(milli * CFS_PERIOD // 1000, MIN_QUOTA)


def share_pool_state(
    threshold_percent: int,
    node_usage: float | None,
    topology_cpus: int | None,
    pods: Sequence[Pod],
    pod_usage: Mapping[str, float],
) -> NodeState:
    """Share-pool usage ratio vs ``sharePoolThresholdPercent`` (all float64)."""
    if node_usage is None or topology_cpus is None:
        return NodeState.UNKNOWN
    total = float(topology_cpus)
    used = node_usage
    for pod in pods:
        qos = qos_class_raw(pod)
        if qos in (QoSClass.LSE, QoSClass.LSR):
            req = pod_requests(pod).get("cpu")
            total -= (req.milli_value() if req is not None else 0) / 1000
        if qos in (QoSClass.LSE, QoSClass.LSR, QoSClass.BE):
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            used -= pod_usage.get(uid, 0.0)
    ratio = used / total if total > 0 else 1.0
    threshold = threshold_percent / 100
    if ratio >= threshold:
        return NodeState.OVERLOAD
    if ratio >= 0.9 * threshold:
        return NodeState.COOLING
    return NodeState.IDLE


def node_state(snapshot: Snapshot, cfg: BurstConfig, options: CPUBurstOptions) -> NodeState:
    window = min(5 * options.reconcile_interval_seconds, 10.0)
    node_usage = snapshot.metrics.avg("node_cpu_usage", {}, window)
    usage: dict[str, float] = {}
    for pod in snapshot.pods:
        v = snapshot.metrics.avg("pod_cpu_usage", {"pod_uid": pod.uid}, window)
        if v is not None:
            usage[pod.uid] = v
    topo: NodeTopology | None = snapshot.topology
    ncpu = len(topo.cpus) if topo is not None and topo.cpus else None
    pct = cfg.share_pool_threshold_percent if cfg.share_pool_threshold_percent is not None else 50
    return share_pool_state(pct, node_usage, ncpu, [p.pod for p in snapshot.pods], usage)


def adjust_by_node(state: NodeState, op: Operation) -> Operation:
    if state is NodeState.OVERLOAD and op in (Operation.SCALE_UP, Operation.REMAIN):
        return Operation.SCALE_DOWN
    if state in (NodeState.COOLING, NodeState.UNKNOWN) and op is Operation.SCALE_UP:
        return Operation.REMAIN
    return op


def target_quota(op: Operation, cur: int, base: int, ceil: int) -> int:
    if op is Operation.SCALE_UP:
        target = int(float(cur) * 1.2)
    elif op is Operation.SCALE_DOWN:
        target = int(float(cur) * 0.8)
    elif op is Operation.RESET:
        target = base
    else:
        target = cur
    return max(base, min(target, ceil))


# --- decide ------------------------------------------------------------------------------------------
class _Tick:
    def __init__(self, snapshot: Snapshot, options: CPUBurstOptions, state: CPUBurstState) -> None:
        self.snapshot = snapshot
        self.options = options
        self.window = 2 * snapshot.collect_interval_seconds
        self.writes: list[CgroupWrite] = []
        self.gauges: dict[str, float] = {}
        self.limiters = {k: v for k, v in state.limiters.items() if not lim.expired(v, snapshot.now)}

    def write(
        self, file: CgroupFile[Any], cgroup_dir: str, value: int, pod: PodMeta, cid: str | None
    ) -> None:
        self.writes.append(CgroupWrite(NAME, file, cgroup_dir, value, pod, cid, True, len(self.writes)))

    def limiter_allows(self, cid: str, cfg: BurstConfig, limit_milli: int) -> bool:
        period = cfg.cfs_quota_burst_period_seconds
        if period is None or period < 0:
            return True
        pct = cfg.cfs_quota_burst_percent
        if pct is None or pct < 100:
            return False
        now = self.snapshot.now
        current = self.limiters.get(cid)
        if current is None or current.capacity != period * (pct - 100):
            current = lim.new_limiter(period, pct, now, self.options.rand)
        limit_cores = limit_milli / 1000
        usage = self.snapshot.metrics.last("container_cpu_usage", {"container_id": cid}, self.window)
        u = lim.usage_scale_percent(usage if usage is not None else limit_cores, limit_cores)
        allowed, self.limiters[cid] = lim.check(current, now, u)
        return allowed

    def static(self, pod: PodMeta, cfg: BurstConfig) -> None:
        spec = {str(ct.get("name") or ""): ct for ct in containers(pod.pod)}
        total = 0
        for ctr in pod.containers:
            if ctr.name not in spec:
                continue
            value = container_burst_us(_limit_milli(spec[ctr.name]), cfg)
            total += value
            self.write(CPU_BURST, ctr.cgroup_dir, value, pod, ctr.container_id)
            self.gauges[f'container_scaled_cfs_burst_us{{container_id="{ctr.container_id}"}}'] = value
        self.write(CPU_BURST, pod.cgroup_dir, total, pod, None)

    def quota(self, pod: PodMeta, cfg: BurstConfig, state: NodeState) -> None:
        spec = {str(ct.get("name") or ""): ct for ct in containers(pod.pod)}
        running = {
            str(s.get("name") or "")
            for s in (pod.pod.get("status") or {}).get("containerStatuses") or []
            if isinstance((s.get("state") or {}).get("running"), Mapping)
        }
        pod_delta = [0]  # quota deltas already applied to the pod dir this tick
        for ctr in pod.containers:
            if ctr.name not in spec or ctr.name not in running:
                continue
            limit = _limit_milli(spec[ctr.name])
            if limit <= 0:
                continue
            self._container_quota(pod, ctr, cfg, state, limit, pod_delta)

    def _container_quota(
        self,
        pod: PodMeta,
        ctr: ContainerMeta,
        cfg: BurstConfig,
        state: NodeState,
        limit: int,
        pod_delta: list[int],
    ) -> None:
        base = milli_to_quota(limit)
        pct = cfg.cfs_quota_burst_percent
        ceil = int(float(base) * pct / 100) if pct is not None and pct > 100 else base
        cur = self.snapshot.cgroups.read(CPU_QUOTA, ctr.cgroup_dir)
        if not isinstance(cur, int):
            return
        allowed = self.limiter_allows(ctr.container_id, cfg, limit)
        if not _quota_burst_enabled(cfg.policy):
            op = Operation.RESET
        elif not allowed:
            op = Operation.SCALE_DOWN
        else:
            throttled = self.snapshot.metrics.last(
                "container_cpu_throttled", {"container_id": ctr.container_id}, self.window
            )
            op = Operation.SCALE_UP if throttled is not None and throttled > 0 else Operation.REMAIN
        op = adjust_by_node(state, op)
        target = target_quota(op, cur, base, ceil)
        if target == cur:
            return
        delta = target - cur
        pod_quota = self.snapshot.cgroups.read(CPU_QUOTA, pod.cgroup_dir)
        if not isinstance(pod_quota, int):
            return
        pod_quota += pod_delta[0]
        pod_write = pod_quota > 0
        if delta > 0 and pod_write:
            self.write(CPU_QUOTA, pod.cgroup_dir, pod_quota + delta, pod, None)
        self.write(CPU_QUOTA, ctr.cgroup_dir, cur + delta, pod, ctr.container_id)
        if delta < 0 and pod_write:
            self.write(CPU_QUOTA, pod.cgroup_dir, pod_quota + delta, pod, None)
        if pod_write:
            pod_delta[0] += delta
        self.gauges[f'container_scaled_cfs_quota_us{{container_id="{ctr.container_id}"}}'] = target


def eligible(pod: Pod) -> bool:
    """Raw QoS label not LSR/LSE/BE, phase Running or Pending."""
    if qos_class_raw(pod) in (QoSClass.LSR, QoSClass.LSE, QoSClass.BE):
        return False
    return phase(pod) in ("Running", "Pending")


def decide(
    snapshot: Snapshot, options: CPUBurstOptions, state: CPUBurstState | None
) -> Decision[CPUBurstState]:
    st = state or CPUBurstState()
    slo = snapshot.node_slo
    cfg = slo.cpu_burst_strategy if slo is not None else None
    if cfg is None:
        return Decision(state=st)
    tick = _Tick(snapshot, options, st)
    nstate = node_state(snapshot, cfg, options)
    for pod in snapshot.pods:
        if not eligible(pod.pod):
            continue
        pcfg = pod_burst_config(pod.pod, cfg)
        tick.static(pod, pcfg)
        tick.quota(pod, pcfg, nstate)
    tick.gauges["cpu_burst_node_state_overload"] = 1.0 if nstate is NodeState.OVERLOAD else 0.0
    return Decision(cgroup_writes=tuple(tick.writes), state=CPUBurstState(tick.limiters), gauges=tick.gauges)


@dataclass(frozen=True)
class CPUBurstStrategy:
    """The strategy (registered with gate ``CPUBurst``), every 1 s."""

    name: str = NAME
    interval_seconds: float = RECONCILE_INTERVAL

    def decide(
        self, snapshot: Snapshot, config: CPUBurstOptions, state: CPUBurstState | None
    ) -> Decision[CPUBurstState]:
        return decide(snapshot, config, state)
