"""CPU suppress of BE pods (docs/rules/koordlet.md): each tick, compute the CPU allowance left for BE
pods and enforce it on the besteffort QoS cgroup, either as a cpuset (default) or as a CFS quota; recover
both knobs when suppression is off. ``decide`` is pure: cgroup values come from ``snapshot.cgroups``,
usages from ``snapshot.metrics``; the result is a list of ordered ``CgroupWrite`` actions plus gauges.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions},
agent.qosmanager.{framework,cpuset_policy}.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent.podmeta import PodMeta
from agent.qosmanager.cpuset_policy import (
    annotation_reserved_milli,
    cpu_manager_policy,
    format_cpuset,
    lse_cpus,
    pod_cpuset,
    pod_has_cpu_allocation,
    reserved_cpus,
    select_be_cpuset,
    system_exclusive_cpus,
)
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CPU_QUOTA, CPUSET_CPUS
from agent.system.nodeinfo import CpuInfo
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from apis.gonum import go_div as _go_div
from apis.kubeobjects import KubeObject, Node, Pod
from apis.nodeslo import HostApplicationSpec, ResourceThresholdStrategy
from apis.qos import KubeQoSClass, QoSClass, kube_qos_class, qos_class_raw
from apis.quantity import Quantity, QuantityError

__all__ = [
    "CPUSuppressConfig",
    "CPUSuppressState",
    "CPUSuppressStrategy",
    "adjust_cfs_quota",
    "be_suppress_milli",
    "decide",
    "full_be_cpuset",
    "suppress_cpuset",
]

NAME: Final = "CPUSuppress"
CFS_PERIOD: Final = 100000
BE_MIN_QUOTA: Final = 2000
BE_MIN_CPUS: Final = 2
MAX_INCREASE_CPU_PERCENT: Final = 0.1
GATE_BE_CPU_MANAGER: Final = "BECPUManager"


@dataclass(frozen=True)
class CPUSuppressConfig:
    """``nrt_annotations``: the NodeResourceTopology annotations (reservation, system-qos-resource,
    cpu-manager-policy); None → read them from ``snapshot.node``."""

    nrt_annotations: Mapping[str, str] | None = None


@dataclass(frozen=True)
class CPUSuppressState:
    """Upstream's ``suppressPolicyStatuses``: whether the BE QoS cfs quota was already reset to −1."""

    cfs_quota_recovered: bool = False


# --- pure arithmetic ------------------------------------------------------------------------------
def _quantity(value: Any) -> Quantity:
    try:
        return Quantity.from_json(value) if value is not None else Quantity("0")
    except (QuantityError, ValueError, TypeError):
        return Quantity("0")


def _cpu_of(node: Node | None, field: str) -> Quantity | None:
    status = (node or {}).get("status")
    res = status.get(field) if isinstance(status, Mapping) else None
    value = res.get("cpu") if isinstance(res, Mapping) else None
    return None if value is None else _quantity(value)


def node_reserved_milli(node: Node | None) -> int:
    """``max(kubeletReserved, annotationReserved).cpu`` in milli-cores (reservedCPUs replaces ``cpu``)."""
    cap = _cpu_of(node, "capacity") or Quantity("0")
    alloc = _cpu_of(node, "allocatable") or Quantity("0")
    kubelet = max(cap.milli_value() - alloc.milli_value(), 0)
    annotated = annotation_reserved_milli(node)
    return max(kubelet, annotated)


def _is_be(pod: Pod) -> bool:
    return qos_class_raw(pod) is QoSClass.BE or kube_qos_class(pod) is KubeQoSClass.BEST_EFFORT


def _host_app_is_be(app: HostApplicationSpec) -> bool:
    base = app.cgroup_path.base if app.cgroup_path is not None else None
    return app.qos == QoSClass.BE.value and base == "KubepodsBesteffort"


def be_suppress_milli(
    node: Node | None,
    node_used: float,
    pods: Sequence[Pod],
    pod_usage: Mapping[str, float],
    host_apps: Sequence[HostApplicationSpec],
    host_app_usage: Mapping[str, float],
    threshold: ResourceThresholdStrategy,
) -> tuple[int, float]:
    """``calculateBESuppressCPU``: (allowance in milli-cores, may be negative; podNonBEUsed cores)."""
    capacity_milli = (_cpu_of(node, "capacity") or Quantity("0")).milli_value()
    reserved_cores = node_reserved_milli(node) / 1000
    by_uid = {str(((p.get("metadata") or {}).get("uid")) or ""): p for p in pods}
    pod_non_be = 0.0
    pods_all = 0.0
    for uid, used in pod_usage.items():
        pods_all += used
        pod = by_uid.get(uid)
        if pod is None or not _is_be(pod):
            pod_non_be += used
    app_non_be = 0.0
    apps_all = 0.0
    for app in host_apps:
        used_app = host_app_usage.get(app.name or "")
        if used_app is None:
            continue
        apps_all += used_app
        if not _host_app_is_be(app):
            app_non_be += used_app
    system_used = max(node_used - pods_all - apps_all, 0.0)
    system_used = max(system_used, reserved_cores)
    pct = threshold.cpu_suppress_threshold_percent or 0
    milli = (
        _go_div(capacity_milli * pct, 100)
        - int(pod_non_be * 1000)
        - int(app_non_be * 1000)
        - int(system_used * 1000)
    )
    if threshold.cpu_suppress_min_percent is not None:
        min_milli = _go_div(capacity_milli * threshold.cpu_suppress_min_percent, 100)
        milli = max(milli, min_milli)
    return milli, pod_non_be


def adjust_cfs_quota(capacity_cores: int, suppress_milli: int, cur_quota: int) -> int | None:
    """The cfsQuota policy: the new BE QoS quota, or None when the change is too small to write."""
    new = max(_go_div(suppress_milli * CFS_PERIOD, 1000), BE_MIN_QUOTA)
    if abs(new - cur_quota) < capacity_cores * CFS_PERIOD * 0.01 and new != BE_MIN_QUOTA:
        return None
    step = capacity_cores * CFS_PERIOD * MAX_INCREASE_CPU_PERCENT
    if cur_quota != -1 and new - cur_quota > step:
        new = cur_quota + int(step)
    return new


def full_be_cpuset(
    processors: Sequence[CpuInfo], annotated: KubeObject | None, pods: Sequence[Pod]
) -> list[int]:
    """All CPUs minus reserved CPUs, exclusive SYSTEM CPUs and LSE pods' cpusets."""
    excluded = reserved_cpus(annotated) | system_exclusive_cpus(annotated) | lse_cpus(pods)
    return sorted({p.cpu for p in processors} - excluded)


def suppress_cpuset(
    suppress_milli: int,
    processors: Sequence[CpuInfo],
    current_len: int,
    annotated: KubeObject | None,
    pods: Sequence[Pod],
) -> list[int] | None:
    """The new BE cpuset in pick order (LSR pool first, then LS); None when both pools are empty."""
    excluded = reserved_cpus(annotated) | system_exclusive_cpus(annotated)
    tags: dict[int, QoSClass] = {}
    for pod in pods:
        qos = qos_class_raw(pod)
        for cpu in pod_cpuset(pod):
            tags[cpu] = qos
    lsr: list[CpuInfo] = []
    ls: list[CpuInfo] = []
    for p in processors:
        if p.cpu in excluded:
            continue
        tag = tags.get(p.cpu)
        if tag is QoSClass.LSE:
            continue
        (lsr if tag is QoSClass.LSR else ls).append(p)
    n = max(math.ceil(suppress_milli / 1000), BE_MIN_CPUS)
    growth = math.ceil(len(processors) * MAX_INCREASE_CPU_PERCENT)
    if n - current_len > growth:
        n = current_len + growth
    if not lsr and not ls:
        return None
    n_lsr = n * len(lsr) // (len(lsr) + len(ls))
    return select_be_cpuset(n_lsr, lsr) + select_be_cpuset(n - n_lsr, ls)


# --- decide ------------------------------------------------------------------------------------------
class _Writes:
    def __init__(self) -> None:
        self.items: list[CgroupWrite] = []

    def add(self, file: Any, cgroup_dir: str, value: Any, *, cacheable: bool = True) -> None:
        self.items.append(
            CgroupWrite(NAME, file, cgroup_dir, value, cacheable=cacheable, order=len(self.items))
        )


def _be_dirs(snapshot: Snapshot, be_dir: str) -> tuple[list[str], list[str]]:
    """(pod dirs, container dirs) below the besteffort QoS dir, in walk (lexical, top-down) order."""
    pods = sorted(snapshot.cgroups.children(be_dir))
    containers = [cd for pd in pods for cd in sorted(snapshot.cgroups.children(pd))]
    return pods, containers


def _walk(snapshot: Snapshot, be_dir: str) -> list[str]:
    """The QoS dir and every directory up to two levels below it, parents before children."""
    out = [be_dir]
    for pd in sorted(snapshot.cgroups.children(be_dir)):
        out.append(pd)
        out.extend(sorted(snapshot.cgroups.children(pd)))
    return out


def _annotated(snapshot: Snapshot, config: CPUSuppressConfig) -> KubeObject | None:
    """Where the cpuset annotations are read: the NodeResourceTopology's when configured, else the node's."""
    if config.nrt_annotations is not None:
        return {"metadata": {"annotations": dict(config.nrt_annotations)}}
    return snapshot.node


def decide(
    snapshot: Snapshot, config: CPUSuppressConfig, state: CPUSuppressState | None
) -> Decision[CPUSuppressState]:
    st = state or CPUSuppressState()
    slo = snapshot.node_slo
    if slo is None:
        return Decision(state=st)
    be_dir = qos_cgroup_dir(snapshot.cgroup_driver, KubeQOS.BESTEFFORT)
    annotated = _annotated(snapshot, config)
    raw_pods = [p.pod for p in snapshot.pods]
    full = full_be_cpuset(snapshot.topology.cpus, annotated, raw_pods) if snapshot.topology else []
    threshold = slo.resource_used_threshold_with_be
    w = _Writes()
    if snapshot.gates.get(GATE_BE_CPU_MANAGER, False):
        st = _recover_quota(w, be_dir, st)
        if full:
            value = format_cpuset(full)
            w.add(CPUSET_CPUS, be_dir, value)
            for pod in snapshot.pods:
                if pod.cgroup_dir.startswith(be_dir) and not pod_has_cpu_allocation(pod.pod):
                    w.add(CPUSET_CPUS, pod.cgroup_dir, value)
                    for ctr in pod.containers:
                        w.add(CPUSET_CPUS, ctr.cgroup_dir, value)
        return Decision(cgroup_writes=tuple(w.items), state=st)
    if threshold is None or threshold.enable is None:
        return Decision(state=st)
    if not threshold.enable:
        st = _recover_quota(w, be_dir, st)
        _recover_cpuset(w, snapshot, be_dir, full)
        return Decision(cgroup_writes=tuple(w.items), state=st)
    if not snapshot.pods:
        return Decision(state=st)
    window = 2 * snapshot.collect_interval_seconds
    node_used = snapshot.metrics.last("node_cpu_usage", {}, window)
    if node_used is None:
        return Decision(state=st)
    pod_usage = _usages(snapshot, snapshot.pods, window)
    app_usage: dict[str, float] = {}
    for app in snapshot.host_apps:
        v = snapshot.metrics.last("host_application_cpu_usage", {"host_app_name": app.name or ""}, window)
        if v is not None:
            app_usage[app.name or ""] = v
    milli, ls_used = be_suppress_milli(
        snapshot.node, node_used, raw_pods, pod_usage, snapshot.host_apps, app_usage, threshold
    )
    gauges: dict[str, float] = {"be_suppress_ls_used_cpu_cores": ls_used}
    be_used = snapshot.metrics.last("node_be", {"be_resource": "cpu", "be_allocation": "usage"}, window)
    if be_used is not None:
        gauges["be_suppress_be_used_cpu_cores"] = be_used / 1000
    if threshold.cpu_suppress_policy == "cfsQuota":
        st = _apply_cfs_quota(w, snapshot, be_dir, milli, st, gauges)
        _recover_cpuset(w, snapshot, be_dir, full)
    else:
        _apply_cpuset(w, snapshot, be_dir, milli, annotated, raw_pods, gauges)
        st = _recover_quota(w, be_dir, st)
    return Decision(cgroup_writes=tuple(w.items), state=st, gauges=gauges)


def _usages(snapshot: Snapshot, pods: Sequence[PodMeta], window: float) -> dict[str, float]:
    out: dict[str, float] = {}
    for pod in pods:
        v = snapshot.metrics.last("pod_cpu_usage", {"pod_uid": pod.uid}, window)
        if v is not None:
            out[pod.uid] = v
    return out


def _recover_quota(w: _Writes, be_dir: str, st: CPUSuppressState) -> CPUSuppressState:
    if st.cfs_quota_recovered:
        return st
    w.add(CPU_QUOTA, be_dir, -1, cacheable=False)
    return CPUSuppressState(cfs_quota_recovered=True)


def _recover_cpuset(w: _Writes, snapshot: Snapshot, be_dir: str, full: Sequence[int]) -> None:
    if not full:  # docs/rules/koordlet.md#never-an-empty-cpuset: no NodeCPUInfo → nothing to recover to
        return
    value = format_cpuset(full)
    for d in _walk(snapshot, be_dir):
        w.add(CPUSET_CPUS, d, value)


def _apply_cfs_quota(
    w: _Writes, snapshot: Snapshot, be_dir: str, milli: int, st: CPUSuppressState, gauges: dict[str, float]
) -> CPUSuppressState:
    cur = snapshot.cgroups.read(CPU_QUOTA, be_dir)
    if not isinstance(cur, int):
        return st
    cap = _cpu_of(snapshot.node, "capacity") or Quantity("0")
    new = adjust_cfs_quota(cap.value(), milli, cur)
    if new is None:
        return st
    w.add(CPU_QUOTA, be_dir, new, cacheable=False)
    gauges['be_suppress_cpu_cores{type="cfsQuota"}'] = new / CFS_PERIOD
    return CPUSuppressState(cfs_quota_recovered=False)


def _apply_cpuset(
    w: _Writes,
    snapshot: Snapshot,
    be_dir: str,
    milli: int,
    annotated: KubeObject | None,
    raw_pods: Sequence[Pod],
    gauges: dict[str, float],
) -> None:
    current = snapshot.cgroups.read(CPUSET_CPUS, be_dir)
    if current is None or snapshot.topology is None:
        return
    picked = suppress_cpuset(milli, snapshot.topology.cpus, len(current), annotated, raw_pods)
    if not picked:  # both pools empty, or every pool asked for too much: keep the old cpuset
        return
    new = format_cpuset(picked)
    if cpu_manager_policy(annotated) == "static":
        full = format_cpuset(full_be_cpuset(snapshot.topology.cpus, annotated, raw_pods))
        pod_dirs, container_dirs = _be_dirs(snapshot, be_dir)
        if full:
            for d in [be_dir, *pod_dirs]:
                w.add(CPUSET_CPUS, d, full)
        for d in container_dirs:
            w.add(CPUSET_CPUS, d, new)
    else:
        dirs = _walk(snapshot, be_dir)
        union = format_cpuset(set(current) | set(picked))
        for d in dirs:
            w.add(CPUSET_CPUS, d, union)
        for d in reversed(dirs):
            w.add(CPUSET_CPUS, d, new)
    gauges['be_suppress_cpu_cores{type="cpuset"}'] = float(len(picked))


@dataclass(frozen=True)
class CPUSuppressStrategy:
    """The strategy (registered with gate ``BECPUSuppress``), every 1 s."""

    name: str = NAME
    interval_seconds: float = 1.0

    def decide(
        self, snapshot: Snapshot, config: CPUSuppressConfig, state: CPUSuppressState | None
    ) -> Decision[CPUSuppressState]:
        return decide(snapshot, config, state)
