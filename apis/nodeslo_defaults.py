"""NodeSLO defaults (manager and koordlet side) and the koordlet's NodeSLO merge.

See docs/crds.md, docs/configuration.md (one section per key) and docs/rules/koordlet.md. Manager side
(the default cluster strategies): ``default_resource_threshold_strategy``, ``default_cpu_burst_strategy``,
``default_system_strategy`` and ``manager_default_resource_qos_strategy`` (``{}``: the manager does not
fill QoS defaults). Koordlet side: ``default_node_slo_spec`` (upstream ``DefaultNodeSLOSpecConfig``,
with the full ResourceQOS table of docs/configuration.md#resource-qos-config) and ``merge_node_slo_spec``:
each part of the NodeSLO is overlaid on the defaults, then LSR/LS/BE features whose ``enable`` is not
true get the "None" values.
Every call returns fresh objects. Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from apis.gojson import (
    overlay,
)
from apis.nodeslo import (
    BlkIOQOSCfg,
    CPUBurstStrategy,
    CPUQOSCfg,
    MemoryQOSCfg,
    NetworkQOSCfg,
    NodeSLOSpec,
    ResctrlQOSCfg,
    ResourceQOS,
    ResourceQOSPolicies,
    ResourceQOSStrategy,
    ResourceThresholdStrategy,
    SystemStrategy,
)
from apis.qos import QoSClass

# (groupIdentity, schedIdle, coreExpeller) per class, docs/configuration.md#resource-qos-config
_CPU: Final[dict[QoSClass, tuple[int, int, bool]]] = {
    QoSClass.LSR: (2, 0, True),
    QoSClass.LS: (2, 0, True),
    QoSClass.BE: (-1, 0, False),
    QoSClass.SYSTEM: (0, 0, False),
}
# (catRangeStart, catRangeEnd, mba)
_RESCTRL: Final[dict[QoSClass, tuple[int, int, int]]] = {
    QoSClass.LSR: (0, 100, 100),
    QoSClass.LS: (0, 100, 100),
    QoSClass.BE: (0, 30, 100),
    QoSClass.SYSTEM: (0, 100, 100),
}
# (min, low, throttling, wmarkRatio, wmarkScalePermill, wmarkMinAdj, priorityEnable, priority, oomKillGroup)
_MEMORY: Final[dict[QoSClass, tuple[int, ...]]] = {
    QoSClass.LSR: (0, 0, 0, 95, 20, -25, 0, 0, 0),
    QoSClass.LS: (0, 0, 0, 95, 20, -25, 0, 0, 0),
    QoSClass.BE: (0, 0, 0, 95, 20, 50, 0, 0, 0),
    QoSClass.SYSTEM: (0, 0, 0, 0, 50, 0, 0, 0, 0),
}
_MEMORY_NONE: Final = (0, 0, 0, 0, 50, 0, 0, 0, 0)
POD_CLASSES: Final = (QoSClass.LSR, QoSClass.LS, QoSClass.BE)


# --- manager side: default cluster strategies (docs/configuration.md#how-a-key-is-loaded) -----------
def default_resource_threshold_strategy() -> ResourceThresholdStrategy:
    """``DefaultResourceThresholdStrategy`` (docs/configuration.md#resource-threshold-config)."""
    return ResourceThresholdStrategy(
        enable=False,
        cpu_suppress_threshold_percent=65,
        cpu_suppress_policy="cpuset",
        memory_evict_threshold_percent=70,
        cpu_evict_policy="evictByRealLimit",
    )


def default_cpu_burst_strategy() -> CPUBurstStrategy:
    """``DefaultCPUBurstStrategy`` (docs/configuration.md#cpu-burst-config)."""
    return CPUBurstStrategy(
        policy="none",
        cpu_burst_percent=1000,
        cfs_quota_burst_percent=300,
        cfs_quota_burst_period_seconds=-1,
        share_pool_threshold_percent=50,
    )


def default_system_strategy() -> SystemStrategy:
    """``DefaultSystemStrategy``: everything unset but ``totalNetworkBandwidth: "0"``.

    See docs/configuration.md#system-config.
    """
    return SystemStrategy()


def manager_default_resource_qos_strategy() -> ResourceQOSStrategy:
    """The manager's default cluster QoS strategy: an empty object.

    An upstream quirk, docs/rules/manager.md#the-managers-default-resourceqosstrategy-is-empty.
    """
    return ResourceQOSStrategy()


# --- koordlet side: per-class values (docs/configuration.md#resource-qos-config) ---------------------
def _memory(values: tuple[int, ...], enable: bool | None) -> MemoryQOSCfg:
    mn, low, throttling, ratio, permill, adj, prio_enable, prio, oom = values
    return MemoryQOSCfg(
        enable=enable,
        min_limit_percent=mn,
        low_limit_percent=low,
        throttling_percent=throttling,
        wmark_ratio=ratio,
        wmark_scale_permill=permill,
        wmark_min_adj=adj,
        priority_enable=prio_enable,
        priority=prio,
        oom_kill_group=oom,
    )


def default_cpu_qos(qos: QoSClass) -> CPUQOSCfg:
    """Recommended cpu QoS of a class, disabled."""
    gi, idle, expeller = _CPU[qos]
    return CPUQOSCfg(enable=False, group_identity=gi, sched_idle=idle, core_expeller=expeller)


def default_resctrl_qos(qos: QoSClass) -> ResctrlQOSCfg:
    """Recommended resctrl QoS of a class, disabled."""
    start, end, mba = _RESCTRL[qos]
    return ResctrlQOSCfg(
        enable=False, cat_range_start_percent=start, cat_range_end_percent=end, mba_percent=mba
    )


def default_memory_qos(qos: QoSClass) -> MemoryQOSCfg:
    """Recommended memory QoS of a class, disabled."""
    return _memory(_MEMORY[qos], False)


def none_cpu_qos(enable: bool | None = False) -> CPUQOSCfg:
    """The "None" cpu QoS (0/0/false)."""
    return CPUQOSCfg(enable=enable, group_identity=0, sched_idle=0, core_expeller=False)


def none_resctrl_qos(enable: bool | None = False) -> ResctrlQOSCfg:
    """The "None" resctrl QoS (0/100/100)."""
    return ResctrlQOSCfg(enable=enable, cat_range_start_percent=0, cat_range_end_percent=100, mba_percent=100)


def none_memory_qos(enable: bool | None = False) -> MemoryQOSCfg:
    """The "None" memory QoS (all 0 except wmarkScalePermill 50)."""
    return _memory(_MEMORY_NONE, enable)


def none_blkio_qos(enable: bool | None = False) -> BlkIOQOSCfg:
    """The "None" blkio QoS (no blocks)."""
    return BlkIOQOSCfg(enable=enable)


def none_network_qos(enable: bool | None = False) -> NetworkQOSCfg:
    """The "None" network QoS (every request/limit 0)."""
    return NetworkQOSCfg(enable=enable, ingress_request=0, ingress_limit=0, egress_request=0, egress_limit=0)


def default_resource_qos_policies() -> ResourceQOSPolicies:
    """Default policies: ``groupIdentity`` cpu policy, ``tc`` network policy."""
    return ResourceQOSPolicies(cpu_policy="groupIdentity", net_qos_policy="tc")


def default_resource_qos(qos: QoSClass) -> ResourceQOS:
    """Koordlet default ResourceQOS of LSR/LS/BE/SYSTEM: recommended values, every feature disabled."""
    return ResourceQOS(
        cpu_qos=default_cpu_qos(qos),
        memory_qos=default_memory_qos(qos),
        blkio_qos=none_blkio_qos(),
        resctrl_qos=default_resctrl_qos(qos),
        network_qos=none_network_qos(),
    )


def default_resource_qos_strategy() -> ResourceQOSStrategy:
    """Koordlet ``DefaultResourceQOSStrategy``: cgroupRoot carries only a disabled blkioQOS.

    The table of docs/configuration.md#resource-qos-config.
    """
    return ResourceQOSStrategy(
        policies=default_resource_qos_policies(),
        lsr_class=default_resource_qos(QoSClass.LSR),
        ls_class=default_resource_qos(QoSClass.LS),
        be_class=default_resource_qos(QoSClass.BE),
        system_class=default_resource_qos(QoSClass.SYSTEM),
        cgroup_root=ResourceQOS(blkio_qos=none_blkio_qos()),
    )


def none_resource_qos(qos: QoSClass) -> ResourceQOS:
    """All-disabled ResourceQOS (``QoSClass.NONE``: the cgroup root, blkio only)."""
    if qos is QoSClass.NONE:
        return ResourceQOS(blkio_qos=none_blkio_qos())
    return ResourceQOS(
        cpu_qos=none_cpu_qos(),
        memory_qos=none_memory_qos(),
        blkio_qos=none_blkio_qos(),
        resctrl_qos=none_resctrl_qos(),
        network_qos=none_network_qos(),
    )


def none_resource_qos_strategy() -> ResourceQOSStrategy:
    """The QoS strategy with every feature of every class disabled."""
    return ResourceQOSStrategy(
        policies=default_resource_qos_policies(),
        lsr_class=none_resource_qos(QoSClass.LSR),
        ls_class=none_resource_qos(QoSClass.LS),
        be_class=none_resource_qos(QoSClass.BE),
        system_class=none_resource_qos(QoSClass.SYSTEM),
        cgroup_root=none_resource_qos(QoSClass.NONE),
    )


def default_node_slo_spec() -> NodeSLOSpec:
    """Koordlet ``DefaultNodeSLOSpecConfig`` (no extension plugin registered: ``extensions`` is ``{}``)."""
    return NodeSLOSpec(
        resource_used_threshold_with_be=default_resource_threshold_strategy(),
        resource_qos_strategy=default_resource_qos_strategy(),
        cpu_burst_strategy=default_cpu_burst_strategy(),
        system_strategy=default_system_strategy(),
        extensions={},
    )


# --- koordlet merge (docs/rules/koordlet.md#start-order-and-readiness) --------------------------------
def _none_if_disabled(cls_qos: ResourceQOS | None) -> ResourceQOS | None:
    """Replace the values of each cpu/resctrl/memory feature whose ``enable`` is not true.

    See docs/configuration.md#resource-qos-config.
    """
    if cls_qos is None:
        return None
    changes: dict[str, Any] = {}
    if cls_qos.cpu_qos is not None and cls_qos.cpu_qos.enable is not True:
        changes["cpu_qos"] = none_cpu_qos(cls_qos.cpu_qos.enable)
    if cls_qos.resctrl_qos is not None and cls_qos.resctrl_qos.enable is not True:
        changes["resctrl_qos"] = none_resctrl_qos(cls_qos.resctrl_qos.enable)
    if cls_qos.memory_qos is not None and cls_qos.memory_qos.enable is not True:
        changes["memory_qos"] = none_memory_qos(cls_qos.memory_qos.enable)
    return replace(cls_qos, **changes) if changes else cls_qos


def merge_resource_qos_strategy(strategy: ResourceQOSStrategy | None) -> ResourceQOSStrategy:
    """Overlay a NodeSLO QoS strategy on the koordlet defaults, then apply the "None" rule to LSR/LS/BE."""
    merged = overlay(default_resource_qos_strategy(), strategy)
    return replace(
        merged,
        lsr_class=_none_if_disabled(merged.lsr_class),
        ls_class=_none_if_disabled(merged.ls_class),
        be_class=_none_if_disabled(merged.be_class),
    )


def merge_node_slo_spec(spec: NodeSLOSpec) -> NodeSLOSpec:
    """The koordlet's view of a NodeSLO: every part overlaid on ``default_node_slo_spec``.

    See docs/rules/koordlet.md#start-order-and-readiness. A part missing from the NodeSLO becomes the pure
    default; ``hostApplications`` are kept as they are.
    """
    defaults = default_node_slo_spec()
    extensions = dict(defaults.extensions or {})
    extensions.update(spec.extensions or {})
    return replace(
        spec,
        resource_used_threshold_with_be=overlay(
            defaults.resource_used_threshold_with_be, spec.resource_used_threshold_with_be
        ),
        resource_qos_strategy=merge_resource_qos_strategy(spec.resource_qos_strategy),
        cpu_burst_strategy=overlay(defaults.cpu_burst_strategy, spec.cpu_burst_strategy),
        system_strategy=overlay(defaults.system_strategy, spec.system_strategy),
        extensions=extensions,
    )
