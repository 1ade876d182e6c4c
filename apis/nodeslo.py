"""NodeSLO spec (``slo.koordinator.sh/v1alpha1``, SPEC §3) as typed dataclasses with upstream JSON names.

Optional fields are ``None`` when unset (Go pointers); ``to_dict()`` omits them like ``omitempty``;
``from_dict()`` checks JSON types like Go's decoder (ints must be integer literals in range, strings
strings, …). Go facts kept: ``systemStrategy.totalNetworkBandwidth`` is a non-pointer quantity, always
written (``"0"`` by default); ``blocks[].ioCfg`` is a non-pointer struct, always written; ``extensions``
is written as ``{"Object": {...}}`` and read in that form or as a plain object. Value bounds and enums
(webhook rules) are declared per field and checked only by ``apis.gojson.validate``.
The memoryQOS page-cache knobs use the names of SPEC §3.2 (``pageCacheEnable``,
``pageCacheLimitPercent``, ``pageCacheLimitSize``, ``pageCacheReclaimSync``), typed int64 like the
other 0/1 memcg switches.
Imports: the standard library and ``apis`` modules (codec, qos, quantity). Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from apis.gojson import (
    GoStruct,
    ListKind,
    MapKind,
    StructKind,
    jf,
)
from apis.gojson_kinds import (
    BoolKind,
    ExtensionsKind,
    IntKind,
    IntOrStrKind,
    QuantityKind,
    StrKind,
)
from apis.qos import PriorityClass, QoSClass
from apis.quantity import Quantity, QuantityError

CPU_SUPPRESS_POLICIES: Final = ("cpuset", "cfsQuota")
CPU_EVICT_POLICIES: Final = ("evictByRealLimit", "evictByAllocatable")
CPU_BURST_POLICIES: Final = ("none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")
CPU_QOS_POLICIES: Final = ("groupIdentity", "coreSched")
NET_QOS_POLICIES: Final = ("tc", "terway-qos")
BLOCK_TYPES: Final = ("device", "volumegroup", "podvolume")
CGROUP_BASES: Final = ("CgroupRoot", "Kubepods", "KubepodsBurstable", "KubepodsBesteffort")
HOST_APP_QOS: Final = tuple(q.value for q in QoSClass if q.value)
HOST_APP_PRIORITIES: Final = tuple(p.value for p in PriorityClass if p.value)

B = BoolKind()
I64 = IntKind(64)
I32 = IntKind(32)
S = StrKind(pointer=False)
SP = StrKind(pointer=True)


def _pct(name: str) -> Any:
    return jf(name, I64, minimum=0, maximum=100)


def _flag(name: str) -> Any:
    return jf(name, I64, minimum=0, maximum=1)


def _bandwidth(value: Any) -> str | None:
    """intstr rule of networkQOS: an int is a percentage 0..100, a string a bandwidth quantity."""
    if isinstance(value, int):
        return None if 0 <= value <= 100 else "an integer percentage must be within 0..100"
    try:
        if Quantity.parse(value).sign() < 0:
            return "a bandwidth must not be negative"
    except QuantityError as exc:
        return f"is neither an integer percentage nor a quantity: {exc}"
    return None


# --- resourceQOSStrategy (§3.2) -------------------------------------------------------------------
@dataclass(frozen=True)
class CPUQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    group_identity: int | None = jf("groupIdentity", I64, minimum=-1, maximum=2)
    sched_idle: int | None = _flag("schedIdle")
    core_expeller: bool | None = jf("coreExpeller", B)


@dataclass(frozen=True)
class MemoryQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    min_limit_percent: int | None = _pct("minLimitPercent")
    low_limit_percent: int | None = _pct("lowLimitPercent")
    throttling_percent: int | None = _pct("throttlingPercent")
    wmark_ratio: int | None = _pct("wmarkRatio")
    wmark_scale_permill: int | None = jf("wmarkScalePermill", I64, minimum=1, maximum=1000)
    wmark_min_adj: int | None = jf("wmarkMinAdj", I64, minimum=-25, maximum=50)
    priority_enable: int | None = _flag("priorityEnable")
    priority: int | None = jf("priority", I64, minimum=0, maximum=12)
    oom_kill_group: int | None = _flag("oomKillGroup")
    page_cache_enable: int | None = _flag("pageCacheEnable")
    page_cache_limit_percent: int | None = _pct("pageCacheLimitPercent")
    page_cache_limit_size: int | None = jf("pageCacheLimitSize", I64, minimum=0)
    page_cache_reclaim_sync: int | None = _flag("pageCacheReclaimSync")


@dataclass(frozen=True)
class IOCfg(GoStruct):
    read_iops: int | None = jf("readIOPS", I64, minimum=0)
    write_iops: int | None = jf("writeIOPS", I64, minimum=0)
    read_bps: int | None = jf("readBPS", I64, minimum=0)
    write_bps: int | None = jf("writeBPS", I64, minimum=0)
    io_weight_percent: int | None = jf("ioWeightPercent", I64, minimum=1, maximum=100)
    read_latency: int | None = jf("readLatency", I64, minimum=0)
    write_latency: int | None = jf("writeLatency", I64, minimum=0)
    read_latency_percent: int | None = _pct("readLatencyPercent")
    write_latency_percent: int | None = _pct("writeLatencyPercent")
    enable_user_model: bool | None = jf("enableUserModel", B)
    model_read_bps: int | None = jf("modelReadBPS", I64, minimum=1)
    model_write_bps: int | None = jf("modelWriteBPS", I64, minimum=1)
    model_read_seq_iops: int | None = jf("modelReadSeqIOPS", I64, minimum=1)
    model_write_seq_iops: int | None = jf("modelWriteSeqIOPS", I64, minimum=1)
    model_read_rand_iops: int | None = jf("modelReadRandIOPS", I64, minimum=1)
    model_write_rand_iops: int | None = jf("modelWriteRandIOPS", I64, minimum=1)


@dataclass(frozen=True)
class BlockCfg(GoStruct):
    name: str | None = jf("name", S)
    type: str | None = jf("type", S, enum=BLOCK_TYPES)
    io_cfg: IOCfg = jf("ioCfg", StructKind(IOCfg, pointer=False))  # not a pointer: always written


@dataclass(frozen=True)
class BlkIOQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    blocks: list[BlockCfg | None] | None = jf("blocks", ListKind(StructKind(BlockCfg)))


@dataclass(frozen=True)
class ResctrlQOSCfg(GoStruct):
    _GREATER: ClassVar[tuple[tuple[str, str], ...]] = (("catRangeEndPercent", "catRangeStartPercent"),)

    enable: bool | None = jf("enable", B)
    cat_range_start_percent: int | None = _pct("catRangeStartPercent")
    cat_range_end_percent: int | None = _pct("catRangeEndPercent")
    mba_percent: int | None = _pct("mbaPercent")


@dataclass(frozen=True)
class NetworkQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    ingress_request: int | str | None = jf("ingressRequest", IntOrStrKind(), check=_bandwidth)
    ingress_limit: int | str | None = jf("ingressLimit", IntOrStrKind(), check=_bandwidth)
    egress_request: int | str | None = jf("egressRequest", IntOrStrKind(), check=_bandwidth)
    egress_limit: int | str | None = jf("egressLimit", IntOrStrKind(), check=_bandwidth)


@dataclass(frozen=True)
class ResourceQOS(GoStruct):
    cpu_qos: CPUQOSCfg | None = jf("cpuQOS", StructKind(CPUQOSCfg))
    memory_qos: MemoryQOSCfg | None = jf("memoryQOS", StructKind(MemoryQOSCfg))
    blkio_qos: BlkIOQOSCfg | None = jf("blkioQOS", StructKind(BlkIOQOSCfg))
    resctrl_qos: ResctrlQOSCfg | None = jf("resctrlQOS", StructKind(ResctrlQOSCfg))
    network_qos: NetworkQOSCfg | None = jf("networkQOS", StructKind(NetworkQOSCfg))


@dataclass(frozen=True)
class ResourceQOSPolicies(GoStruct):
    cpu_policy: str | None = jf("cpuPolicy", SP, enum=CPU_QOS_POLICIES)
    net_qos_policy: str | None = jf("netQOSPolicy", SP, enum=NET_QOS_POLICIES)


@dataclass(frozen=True)
class ResourceQOSStrategy(GoStruct):
    policies: ResourceQOSPolicies | None = jf("policies", StructKind(ResourceQOSPolicies))
    lsr_class: ResourceQOS | None = jf("lsrClass", StructKind(ResourceQOS))
    ls_class: ResourceQOS | None = jf("lsClass", StructKind(ResourceQOS))
    be_class: ResourceQOS | None = jf("beClass", StructKind(ResourceQOS))
    system_class: ResourceQOS | None = jf("systemClass", StructKind(ResourceQOS))
    cgroup_root: ResourceQOS | None = jf("cgroupRoot", StructKind(ResourceQOS))


# --- resourceUsedThresholdWithBE (§3.1) ----------------------------------------------------------
@dataclass(frozen=True)
class ResourceThresholdStrategy(GoStruct):
    _GREATER: ClassVar[tuple[tuple[str, str], ...]] = (
        ("memoryEvictThresholdPercent", "memoryEvictLowerPercent"),
        ("cpuEvictBESatisfactionUpperPercent", "cpuEvictBESatisfactionLowerPercent"),
    )

    enable: bool | None = jf("enable", B)
    cpu_suppress_threshold_percent: int | None = _pct("cpuSuppressThresholdPercent")
    cpu_suppress_min_percent: int | None = _pct("cpuSuppressMinPercent")
    cpu_suppress_policy: str | None = jf("cpuSuppressPolicy", S, enum=CPU_SUPPRESS_POLICIES)
    memory_evict_threshold_percent: int | None = _pct("memoryEvictThresholdPercent")
    memory_evict_lower_percent: int | None = _pct("memoryEvictLowerPercent")
    memory_allocatable_evict_threshold_percent: int | None = jf(
        "memoryAllocatableEvictThresholdPercent", I64, minimum=0
    )
    memory_allocatable_evict_lower_percent: int | None = jf(
        "memoryAllocatableEvictLowerPercent", I64, minimum=0
    )
    cpu_evict_be_satisfaction_upper_percent: int | None = _pct("cpuEvictBESatisfactionUpperPercent")
    cpu_evict_be_satisfaction_lower_percent: int | None = _pct("cpuEvictBESatisfactionLowerPercent")
    cpu_evict_be_usage_threshold_percent: int | None = _pct("cpuEvictBEUsageThresholdPercent")
    cpu_evict_time_window_seconds: int | None = jf("cpuEvictTimeWindowSeconds", I64, exclusive_minimum=0)
    cpu_evict_threshold_percent: int | None = _pct("cpuEvictThresholdPercent")
    cpu_evict_lower_percent: int | None = _pct("cpuEvictLowerPercent")
    cpu_allocatable_evict_threshold_percent: int | None = jf(
        "cpuAllocatableEvictThresholdPercent", I64, minimum=0
    )
    cpu_allocatable_evict_lower_percent: int | None = jf("cpuAllocatableEvictLowerPercent", I64, minimum=0)
    cpu_evict_policy: str | None = jf("cpuEvictPolicy", S, enum=CPU_EVICT_POLICIES)
    evict_enabled_priority_threshold: int | None = jf("evictEnabledPriorityThreshold", I32)
    allocatable_evict_priority_threshold: int | None = jf(
        "allocatableEvictPriorityThreshold", I32, minimum=0, maximum=7999
    )


# --- cpuBurstStrategy (§3.3) ------------------------------------------------------------------------
@dataclass(frozen=True)
class CPUBurstStrategy(GoStruct):
    policy: str | None = jf("policy", S, enum=CPU_BURST_POLICIES)
    cpu_burst_percent: int | None = jf("cpuBurstPercent", I64, minimum=1, maximum=10000)
    cfs_quota_burst_percent: int | None = jf("cfsQuotaBurstPercent", I64, minimum=100)
    cfs_quota_burst_period_seconds: int | None = jf("cfsQuotaBurstPeriodSeconds", I64, minimum=-1)
    share_pool_threshold_percent: int | None = _pct("sharePoolThresholdPercent")


# --- systemStrategy (§3.4) ----------------------------------------------------------------------
@dataclass(frozen=True)
class SystemStrategy(GoStruct):
    min_free_kbytes_factor: int | None = jf("minFreeKbytesFactor", I64, exclusive_minimum=0)
    watermark_scale_factor: int | None = jf("watermarkScaleFactor", I64, exclusive_minimum=0, maximum=400)
    memcg_reap_background: int | None = _flag("memcgReapBackGround")
    sched_group_identity_enabled: int | None = _flag("schedGroupIdentityEnabled")
    sched_idle_saver_wmark: int | None = jf("schedIdleSaverWmark", I64)
    sched_features: dict[str, bool] | None = jf("schedFeatures", MapKind(BoolKind(pointer=False)))
    page_cache_limit_enabled: int | None = _flag("pageCacheLimitEnabled")
    total_network_bandwidth: Quantity = jf("totalNetworkBandwidth", QuantityKind())


# --- hostApplications (§3.5) ----------------------------------------------------------------------
@dataclass(frozen=True)
class CgroupPath(GoStruct):
    base: str | None = jf("base", S, enum=CGROUP_BASES)
    parent_dir: str | None = jf("parentDir", S)
    relative_path: str | None = jf("relativePath", S)


@dataclass(frozen=True)
class HostApplicationStrategy(GoStruct):
    """Empty upstream (``strategy: {}``)."""


@dataclass(frozen=True)
class HostApplicationSpec(GoStruct):
    name: str | None = jf("name", S)
    priority: str | None = jf("priority", S, enum=HOST_APP_PRIORITIES)
    qos: str | None = jf("qos", S, enum=HOST_APP_QOS)
    cgroup_path: CgroupPath | None = jf("cgroupPath", StructKind(CgroupPath))
    strategy: HostApplicationStrategy | None = jf("strategy", StructKind(HostApplicationStrategy))


# --- the spec ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NodeSLOSpec(GoStruct):
    resource_used_threshold_with_be: ResourceThresholdStrategy | None = jf(
        "resourceUsedThresholdWithBE", StructKind(ResourceThresholdStrategy)
    )
    resource_qos_strategy: ResourceQOSStrategy | None = jf(
        "resourceQOSStrategy", StructKind(ResourceQOSStrategy)
    )
    cpu_burst_strategy: CPUBurstStrategy | None = jf("cpuBurstStrategy", StructKind(CPUBurstStrategy))
    system_strategy: SystemStrategy | None = jf("systemStrategy", StructKind(SystemStrategy))
    extensions: dict[str, Any] | None = jf("extensions", ExtensionsKind())
    host_applications: list[HostApplicationSpec] | None = jf(
        "hostApplications", ListKind(StructKind(HostApplicationSpec, pointer=False))
    )
