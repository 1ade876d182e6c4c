"""NodeSLO spec (``slo.koordinator.sh/v1alpha1``, docs/crds.md) as typed dataclasses, upstream JSON names.

Optional fields are ``None`` when unset (Go pointers); ``to_dict()`` omits them like ``omitempty``;
``from_dict()`` checks JSON types like Go's decoder (ints must be integer literals in range, strings
strings, …). Go facts kept: ``systemStrategy.totalNetworkBandwidth`` is a non-pointer quantity, always
written (``"0"`` by default); ``blocks[].ioCfg`` is a non-pointer struct, always written; ``extensions``
is written as ``{"Object": {...}}`` and read in that form or as a plain object. Value bounds and enums
(webhook rules) are declared per field and checked only by ``apis.gojson.validate``; the ``crd_*``
bounds and defaults are upstream's CRD markers, written into the CRD schema (docs/crds.md lists where
the two differ). The memoryQOS page-cache switches ``pageCacheEnable`` and ``pageCacheReclaimSync``
are booleans, as upstream has them; the integer form 0/1 an earlier koord wrote is still read.
Imports: the standard library and ``apis`` modules (codec, qos, quantity). Pure, no I/O.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from apis.gojson import GoStruct, StructKind, jf
from apis.gojson_base import FieldError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import BoolKind, ExtensionsKind, IntKind, IntOrStrKind, QuantityKind, StrKind
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


class LegacyIntBoolKind(BoolKind):
    """A ``*bool`` that also reads the integer form 0/1 it had before (0 → false, 1 → true; any other
    integer is an error naming the value); always written as a boolean. Its CRD node keeps unknown
    fields (the only structural way to admit two scalar types other than int-or-string) and an enum
    limits it to the four values."""

    LEGACY: Final = {0: False, 1: True}
    MESSAGE: Final = "must be a boolean (or the legacy integer 0 or 1)"

    def decode(self, old: Any, raw: Any, path: str, errs: list[FieldError]) -> Any:
        if raw is None or isinstance(raw, bool):
            return super().decode(old, raw, path, errs)
        if isinstance(raw, int) and raw in self.LEGACY:
            return self.LEGACY[raw]
        errs.append(FieldError(path, raw, self.MESSAGE))
        return old

    def openapi(self) -> dict[str, Any]:
        return {"x-kubernetes-preserve-unknown-fields": True, "enum": [False, True, 0, 1]}


LB = LegacyIntBoolKind()


def _bounded(name: str, low: int | None, high: int | None, *, crd: bool, kind: Any = I64) -> Any:
    """An integer within ``low..high`` (webhook rule); ``crd``: the CRD schema declares the same bounds."""
    if not crd:
        return jf(name, kind, minimum=low, maximum=high)
    return jf(name, kind, minimum=low, maximum=high, crd_minimum=low, crd_maximum=high)


def _pct(name: str, *, crd: bool) -> Any:
    return _bounded(name, 0, 100, crd=crd)


def _flag(name: str) -> Any:
    return _bounded(name, 0, 1, crd=False)


def _min0_pct(name: str) -> Any:
    """0..100 for the webhook; upstream's CRD only declares ``minimum: 0``."""
    return jf(name, I64, minimum=0, maximum=100, crd_minimum=0)


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


# --- resourceQOSStrategy (docs/configuration.md#resource-qos-config) ---------------------------------
@dataclass(frozen=True)
class CPUQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    group_identity: int | None = jf("groupIdentity", I64, minimum=-1, maximum=2)
    sched_idle: int | None = _flag("schedIdle")
    core_expeller: bool | None = jf("coreExpeller", B)


@dataclass(frozen=True)
class MemoryQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    min_limit_percent: int | None = _min0_pct("minLimitPercent")
    low_limit_percent: int | None = _min0_pct("lowLimitPercent")
    throttling_percent: int | None = _min0_pct("throttlingPercent")
    wmark_ratio: int | None = _pct("wmarkRatio", crd=True)
    wmark_scale_permill: int | None = _bounded("wmarkScalePermill", 1, 1000, crd=True)
    wmark_min_adj: int | None = _bounded("wmarkMinAdj", -25, 50, crd=True)
    priority_enable: int | None = _flag("priorityEnable")
    priority: int | None = jf("priority", I64, minimum=0, maximum=12)
    oom_kill_group: int | None = _flag("oomKillGroup")
    page_cache_enable: bool | None = jf("pageCacheEnable", LB)
    page_cache_limit_percent: int | None = _pct("pageCacheLimitPercent", crd=True)
    page_cache_limit_size: int | None = jf("pageCacheLimitSize", I64, minimum=0)  # no CRD bound upstream
    page_cache_reclaim_sync: bool | None = jf("pageCacheReclaimSync", LB)


@dataclass(frozen=True)
class IOCfg(GoStruct):
    read_iops: int | None = _bounded("readIOPS", 0, None, crd=True)
    write_iops: int | None = _bounded("writeIOPS", 0, None, crd=True)
    read_bps: int | None = _bounded("readBPS", 0, None, crd=True)
    write_bps: int | None = _bounded("writeBPS", 0, None, crd=True)
    io_weight_percent: int | None = _bounded("ioWeightPercent", 1, 100, crd=True)
    read_latency: int | None = _bounded("readLatency", 0, None, crd=False)
    write_latency: int | None = _bounded("writeLatency", 0, None, crd=False)
    read_latency_percent: int | None = _pct("readLatencyPercent", crd=True)
    write_latency_percent: int | None = _pct("writeLatencyPercent", crd=True)
    enable_user_model: bool | None = jf("enableUserModel", B)
    model_read_bps: int | None = _bounded("modelReadBPS", 1, None, crd=True)
    model_write_bps: int | None = _bounded("modelWriteBPS", 1, None, crd=True)
    model_read_seq_iops: int | None = _bounded("modelReadSeqIOPS", 1, None, crd=True)
    model_write_seq_iops: int | None = _bounded("modelWriteSeqIOPS", 1, None, crd=True)
    model_read_rand_iops: int | None = _bounded("modelReadRandIOPS", 1, None, crd=True)
    model_write_rand_iops: int | None = _bounded("modelWriteRandIOPS", 1, None, crd=True)


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
    cat_range_start_percent: int | None = _pct("catRangeStartPercent", crd=True)
    cat_range_end_percent: int | None = _pct("catRangeEndPercent", crd=True)
    mba_percent: int | None = _pct("mbaPercent", crd=True)


@dataclass(frozen=True)
class NetworkQOSCfg(GoStruct):
    enable: bool | None = jf("enable", B)
    # CRD defaults (upstream's markers): the API server fills a missing request with 0, a limit with 100.
    ingress_request: int | str | None = jf("ingressRequest", IntOrStrKind(), check=_bandwidth, crd_default=0)
    ingress_limit: int | str | None = jf("ingressLimit", IntOrStrKind(), check=_bandwidth, crd_default=100)
    egress_request: int | str | None = jf("egressRequest", IntOrStrKind(), check=_bandwidth, crd_default=0)
    egress_limit: int | str | None = jf("egressLimit", IntOrStrKind(), check=_bandwidth, crd_default=100)


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


# --- resourceUsedThresholdWithBE (docs/configuration.md#resource-threshold-config) -------------------
@dataclass(frozen=True)
class ResourceThresholdStrategy(GoStruct):
    _GREATER: ClassVar[tuple[tuple[str, str], ...]] = (
        ("memoryEvictThresholdPercent", "memoryEvictLowerPercent"),
        ("cpuEvictBESatisfactionUpperPercent", "cpuEvictBESatisfactionLowerPercent"),
    )

    enable: bool | None = jf("enable", B)
    cpu_suppress_threshold_percent: int | None = _pct("cpuSuppressThresholdPercent", crd=True)
    cpu_suppress_min_percent: int | None = _pct("cpuSuppressMinPercent", crd=True)
    cpu_suppress_policy: str | None = jf("cpuSuppressPolicy", S, enum=CPU_SUPPRESS_POLICIES)
    memory_evict_threshold_percent: int | None = _pct("memoryEvictThresholdPercent", crd=True)
    memory_evict_lower_percent: int | None = _pct("memoryEvictLowerPercent", crd=True)
    memory_allocatable_evict_threshold_percent: int | None = _bounded(
        "memoryAllocatableEvictThresholdPercent", 0, None, crd=True
    )
    memory_allocatable_evict_lower_percent: int | None = _bounded(
        "memoryAllocatableEvictLowerPercent", 0, None, crd=True
    )
    cpu_evict_be_satisfaction_upper_percent: int | None = _pct(
        "cpuEvictBESatisfactionUpperPercent", crd=False
    )
    cpu_evict_be_satisfaction_lower_percent: int | None = _pct(
        "cpuEvictBESatisfactionLowerPercent", crd=False
    )
    cpu_evict_be_usage_threshold_percent: int | None = _pct("cpuEvictBEUsageThresholdPercent", crd=False)
    cpu_evict_time_window_seconds: int | None = jf("cpuEvictTimeWindowSeconds", I64, exclusive_minimum=0)
    cpu_evict_threshold_percent: int | None = _pct("cpuEvictThresholdPercent", crd=True)
    cpu_evict_lower_percent: int | None = _pct("cpuEvictLowerPercent", crd=True)
    cpu_allocatable_evict_threshold_percent: int | None = _bounded(
        "cpuAllocatableEvictThresholdPercent", 0, None, crd=True
    )
    cpu_allocatable_evict_lower_percent: int | None = _bounded(
        "cpuAllocatableEvictLowerPercent", 0, None, crd=True
    )
    cpu_evict_policy: str | None = jf("cpuEvictPolicy", S, enum=CPU_EVICT_POLICIES)
    evict_enabled_priority_threshold: int | None = jf("evictEnabledPriorityThreshold", I32)
    allocatable_evict_priority_threshold: int | None = _bounded(
        "allocatableEvictPriorityThreshold", 0, 7999, crd=False, kind=I32
    )


# --- cpuBurstStrategy (docs/configuration.md#cpu-burst-config) ---------------------------------------
@dataclass(frozen=True)
class CPUBurstStrategy(GoStruct):
    policy: str | None = jf("policy", S, enum=CPU_BURST_POLICIES)
    # webhook 1..10000, upstream's CRD 0..10000
    cpu_burst_percent: int | None = jf(
        "cpuBurstPercent", I64, minimum=1, maximum=10000, crd_minimum=0, crd_maximum=10000
    )
    cfs_quota_burst_percent: int | None = jf("cfsQuotaBurstPercent", I64, minimum=100)
    cfs_quota_burst_period_seconds: int | None = jf("cfsQuotaBurstPeriodSeconds", I64, minimum=-1)
    share_pool_threshold_percent: int | None = _pct("sharePoolThresholdPercent", crd=False)


# --- systemStrategy (docs/configuration.md#system-config) --------------------------------------------
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


# --- hostApplications (docs/configuration.md#host-application-config) --------------------------------
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
