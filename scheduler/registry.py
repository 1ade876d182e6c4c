"""The plugin registry: plugin name → factory(args, handle), and building a profile's Framework (its
plugins per extension point and score weights, expanded as kube-scheduler does).
Imports: scheduler.framework, scheduler.config, scheduler.profiledefaults, scheduler.plugins.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.config import BUILTIN, ConfigError, Profile, parse_config
from scheduler.framework.interfaces import (
    BindPlugin,
    FilterAllPlugin,
    FilterPlugin,
    PermitPlugin,
    Plugin,
    Pod,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScoreAllPlugin,
    ScorePlugin,
)
from scheduler.framework.listers import ClusterObjects
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.volumes import VolumeObjects
from scheduler.framework.waiting import WaitingPodMap
from scheduler.plugins.balancedallocation import NodeResourcesBalancedAllocation
from scheduler.plugins.coscheduling.plugin import Coscheduling
from scheduler.plugins.defaultpreemption import DefaultPreemption
from scheduler.plugins.deviceshare.plugin import DeviceShare
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.plugins.imagelocality import ImageLocality
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.jobreservation.plugin import JobReservation
from scheduler.plugins.loadaware.args import ArgsError
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.nodename import NodeName
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource
from scheduler.plugins.nodepool import NodePool
from scheduler.plugins.nodeports import NodePorts
from scheduler.plugins.nodepreferavoidpods import NodePreferAvoidPods
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.noderesources_allocated import (
    NodeResourcesLeastAllocated,
    NodeResourcesMostAllocated,
    RequestedToCapacityRatio,
)
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.reservation.plugin import Reservation
from scheduler.plugins.scarcedevice import ScarceDevice
from scheduler.plugins.selectorspread import SelectorSpread
from scheduler.plugins.tainttoleration import TaintToleration
from scheduler.plugins.volume.binderapi import VolumeBinderAPI
from scheduler.plugins.volume.binding import VolumeBinding
from scheduler.plugins.volume.limits import NodeVolumeLimits
from scheduler.plugins.volume.limits_intree import AzureDiskLimits, CinderLimits, EBSLimits, GCEPDLimits
from scheduler.plugins.volume.restrictions import VolumeRestrictions
from scheduler.plugins.volume.zone import VolumeZone
from scheduler.profiledefaults import POINTS


@dataclass(frozen=True)
class Handle:
    """What a plugin may get from the scheduler at construction: the clock, the cluster's Services
    and workload controllers and PodDisruptionBudgets (kept by the scheduler's informers), the
    scheduler's nominated pods, and the generator preemption samples nodes with (None: seeded from
    the OS)."""

    clock: Callable[[], float] = field(default=time.time)
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    pdbs: Callable[[], Iterable[Mapping[str, Any]]] = field(default=lambda: ())
    nominated: NominatedPods = field(default_factory=NominatedPods)
    rng: random.Random | None = None
    volumes: VolumeObjects = field(default_factory=VolumeObjects)
    volume_api: VolumeBinderAPI | None = None  # VolumeBinding's PreBind writes through it
    # The pods held at Permit (the Scheduler is given the same map) and the queue's Activate.
    waiting: WaitingPodMap = field(default_factory=WaitingPodMap)
    activate: Callable[[list[Pod]], object] | None = None


Factory = Callable[[Mapping[str, Any], Handle], Plugin]


def _no_args(cls: Callable[[], Plugin], name: str) -> Factory:
    def make(args: Mapping[str, Any], handle: Handle) -> Plugin:
        if args:
            raise ConfigError(f"pluginConfig {name}.args={dict(args)!r}: {name} takes no arguments")
        return cls()

    return make


def _load_aware(args: Mapping[str, Any], handle: Handle) -> Plugin:
    try:
        return LoadAwareScheduling(args or None, clock=handle.clock)
    except ArgsError as e:
        raise ConfigError(f"pluginConfig LoadAwareScheduling.args: {e}") from None


def _with_args(cls: Any, name: str) -> Factory:
    """A plugin built by `cls.from_args(args)`, whose ValueError names the field and value."""

    def make(args: Mapping[str, Any], handle: Handle) -> Plugin:
        try:
            plugin: Plugin = cls.from_args(args)
        except ValueError as e:
            raise ConfigError(f"pluginConfig {name}.args: {e}") from None
        return plugin

    return make


def _spread(args: Mapping[str, Any], handle: Handle) -> Plugin:
    try:
        return PodTopologySpread.from_args(args, handle.objects)
    except ValueError as e:
        raise ConfigError(f"pluginConfig PodTopologySpread.args: {e}") from None


def _selector_spread(args: Mapping[str, Any], handle: Handle) -> Plugin:
    if args:
        raise ConfigError(
            f"pluginConfig SelectorSpread.args={dict(args)!r}: SelectorSpread takes no arguments"
        )
    return SelectorSpread(handle.objects)


def _preemption(args: Mapping[str, Any], handle: Handle) -> Plugin:
    """Attached to its framework by `build_framework` (it runs the profile's filters)."""
    try:
        return DefaultPreemption.from_args(
            args, rng=handle.rng or random.Random(), pdbs=handle.pdbs, nominated=handle.nominated
        )
    except ValueError as e:
        raise ConfigError(f"pluginConfig DefaultPreemption.args: {e}") from None


def _with_volumes(cls: Callable[[VolumeObjects], Plugin], name: str) -> Factory:
    """A volume plugin reading the handle's storage objects; it takes no args."""

    def make(args: Mapping[str, Any], handle: Handle) -> Plugin:
        if args:
            raise ConfigError(f"pluginConfig {name}.args={dict(args)!r}: {name} takes no arguments")
        return cls(handle.volumes)

    return make


def _volume_binding(args: Mapping[str, Any], handle: Handle) -> Plugin:
    try:
        return VolumeBinding.from_args(args, handle.volumes, handle.volume_api)
    except ValueError as e:
        raise ConfigError(f"pluginConfig VolumeBinding.args: {e}") from None


def _coscheduling(args: Mapping[str, Any], handle: Handle) -> Plugin:
    try:
        return Coscheduling.from_args(args, handle.waiting, handle.activate)
    except ValueError as e:
        raise ConfigError(f"pluginConfig Coscheduling.args: {e}") from None


def _job_reservation(args: Mapping[str, Any], handle: Handle) -> Plugin:
    """Attached to its profile's Coscheduling by `build_framework`."""
    try:
        return JobReservation.from_args(args, handle.activate)
    except ValueError as e:
        raise ConfigError(f"pluginConfig JobReservation.args: {e}") from None


def _elastic_quota(args: Mapping[str, Any], handle: Handle) -> Plugin:
    """Attached to its framework by `build_framework` (its PostFilter runs the profile's filters)."""
    try:
        return ElasticQuota.from_args(args, pdbs=handle.pdbs, nominated=handle.nominated)
    except ValueError as e:
        raise ConfigError(f"pluginConfig ElasticQuota.args: {e}") from None


REGISTRY: dict[str, Factory] = {
    "NodeUnschedulable": _no_args(NodeUnschedulable, "NodeUnschedulable"),
    "NodeName": _no_args(NodeName, "NodeName"),
    "NodePorts": _no_args(NodePorts, "NodePorts"),
    "NodeAffinity": _with_args(NodeAffinity, "NodeAffinity"),
    "TaintToleration": _no_args(TaintToleration, "TaintToleration"),
    "NodeResourcesFit": _with_args(NodeResourcesFit, "NodeResourcesFit"),
    "NodeResourcesBalancedAllocation": _no_args(
        NodeResourcesBalancedAllocation, "NodeResourcesBalancedAllocation"
    ),
    "NodeResourcesLeastAllocated": _with_args(NodeResourcesLeastAllocated, "NodeResourcesLeastAllocated"),
    "NodeResourcesMostAllocated": _with_args(NodeResourcesMostAllocated, "NodeResourcesMostAllocated"),
    "RequestedToCapacityRatio": _with_args(RequestedToCapacityRatio, "RequestedToCapacityRatio"),
    "ImageLocality": _no_args(ImageLocality, "ImageLocality"),
    "NodePreferAvoidPods": _no_args(NodePreferAvoidPods, "NodePreferAvoidPods"),
    "InterPodAffinity": _with_args(InterPodAffinity, "InterPodAffinity"),
    "PodTopologySpread": _spread,
    "SelectorSpread": _selector_spread,
    "LoadAwareScheduling": _load_aware,
    "DefaultPreemption": _preemption,
    "VolumeRestrictions": _no_args(VolumeRestrictions, "VolumeRestrictions"),
    "VolumeZone": _with_volumes(VolumeZone, "VolumeZone"),
    "NodeVolumeLimits": _with_volumes(NodeVolumeLimits, "NodeVolumeLimits"),
    "EBSLimits": _with_volumes(EBSLimits, "EBSLimits"),
    "GCEPDLimits": _with_volumes(GCEPDLimits, "GCEPDLimits"),
    "AzureDiskLimits": _with_volumes(AzureDiskLimits, "AzureDiskLimits"),
    "CinderLimits": _with_volumes(CinderLimits, "CinderLimits"),
    "VolumeBinding": _volume_binding,
    "Coscheduling": _coscheduling,  # not in the defaults: a profile enables it
    # not in the defaults: Hard (a Filter) or Soft (a Score) by their args' mode
    "NodePool": _with_args(NodePool, "NodePool"),
    "ScarceDevice": _with_args(ScarceDevice, "ScarceDevice"),
    "JobReservation": _job_reservation,  # not in the defaults: a profile enables it with Coscheduling
    # not in the defaults: a profile enables it (docs/rules/scheduler-reservation.md#wiring)
    "Reservation": _no_args(Reservation, "Reservation"),
    "ElasticQuota": _elastic_quota,  # not in the defaults (docs/rules/scheduler-elasticquota.md#wiring)
    # not in the defaults: a profile enables them (docs/rules/scheduler-nodenumaresource.md#wiring,
    # docs/rules/scheduler-deviceshare.md#wiring)
    "NodeNUMAResource": _with_args(NodeNUMAResource, "NodeNUMAResource"),
    "DeviceShare": _with_args(DeviceShare, "DeviceShare"),
}
KNOWN = frozenset(REGISTRY)

# What each extension point needs a plugin to implement (queueSort and bind: BUILTIN's only).
_POINT_KIND: dict[str, Any] = {
    "preEnqueue": PreEnqueuePlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin | FilterAllPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin | ScoreAllPlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


def default_profile() -> Profile:
    """The profile koord-scheduler runs without a configuration file."""
    return parse_config(None, KNOWN).profiles[0]


def _implements(plugin: Plugin, point: str) -> bool:
    kind = _POINT_KIND.get(point)
    return kind is not None and isinstance(plugin, kind)


def profile_points(
    profile: Profile, plugins: Mapping[str, Plugin]
) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Each extension point's plugins in order, and the score weights, as kube-scheduler expands a
    profile (docs/configuration.md#scheduler-profiles): a multiPoint plugin joins every point it
    implements unless disabled there; a plugin also named at the point keeps that point's order and
    comes first, then the multiPoint-only ones, then the point's other plugins. A plugin the document
    enables at a point it does not implement is an error; a default one is left out there. A plugin at
    filter (score) also runs its preFilter (preScore): that is where it prepares what its filter reads."""
    where = f"profile {profile.scheduler_name!r}"
    multi = {e.name: e for e in profile.multi_point if e.name not in BUILTIN}
    points: dict[str, list[str]] = {}
    for point in POINTS:
        regular = []
        for e in profile.points.get(point, ()):
            if e.name in BUILTIN:
                continue
            if _implements(plugins[e.name], point):
                regular.append(e)
            elif e.name in profile.explicit.get(point, ()):
                raise ConfigError(
                    f"{where}: plugins.{point}: plugin {e.name!r} does not extend the {point} extension point"
                )
        off = profile.disabled.get(point, frozenset())
        here = [] if "*" in off else [n for n in multi if n not in off and _implements(plugins[n], point)]
        named = {e.name for e in regular}
        points[point] = [
            *(e.name for e in regular if e.name in here),
            *(n for n in here if n not in named),
            *(e.name for e in regular if e.name not in here),
        ]
    for setup, main in (("preFilter", "filter"), ("preScore", "score")):
        points[setup] += [
            n for n in points[main] if n not in points[setup] and _implements(plugins[n], setup)
        ]
    given = {e.name: e.weight for e in profile.points.get("score", ()) if e.weight}
    weights = {n: given.get(n) or (multi[n].weight if n in multi else 0) or 1 for n in points["score"]}
    return points, weights


def build_framework(
    profile: Profile,
    handle: Handle | None = None,
    observer: Callable[[str, str, float], None] | None = None,
    rng: random.Random | None = None,
) -> Framework:
    """The profile's Framework; `rng` draws among equal top scores (None: first in name order). Its
    Filters count the handle's nominated pods (docs/rules/scheduler-preemption.md#nominated-pods) and
    stop at the profile's percentageOfNodesToScore when set (docs/architecture.md#sampling-nodes)."""
    h = handle or Handle()
    plugins: dict[str, Plugin] = {}
    for name in profile.plugins:
        factory = REGISTRY.get(name)
        if factory is None:
            raise ConfigError(f"profile {profile.scheduler_name!r}: plugin {name!r} is not registered")
        plugins[name] = factory(profile.args.get(name, {}), h)
    points, weights = profile_points(profile, plugins)
    if {"ElasticQuota", "DefaultPreemption"} <= set(points["postFilter"]):
        # PostFilters run until one succeeds: DefaultPreemption would then evict other quotas' pods
        # whenever ElasticQuota finds no candidate (docs/rules/scheduler-elasticquota.md#wiring).
        raise ConfigError(
            f"profile {profile.scheduler_name!r}: plugins.postFilter: 'ElasticQuota' and 'DefaultPreemption' "
            "are both enabled; preemption must stay within a quota: disable DefaultPreemption at postFilter"
        )
    fw = Framework(
        list(plugins.values()),
        weights,
        observer,
        rng,
        points,
        nominated=h.nominated,
        percentage_of_nodes_to_score=profile.percentage_of_nodes_to_score,
    )
    for plugin in plugins.values():
        if isinstance(plugin, DefaultPreemption | ElasticQuota):
            plugin.attach(fw)
        if isinstance(plugin, JobReservation):  # docs/rules/scheduler-jobreservation.md#wiring
            gangs = [p for p in plugins.values() if isinstance(p, Coscheduling)]
            if not gangs:
                raise ConfigError(
                    f"profile {profile.scheduler_name!r}: plugin 'JobReservation' needs 'Coscheduling' "
                    "enabled in the same profile (its jobs are Coscheduling's gangs)"
                )
            plugin.attach(gangs[0])
    return fw
