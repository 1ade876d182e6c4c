"""The default plugins of a scheduling profile, per configuration version, and kube-scheduler's rule for
merging a profile's `enabled`/`disabled` lists into them (docs/configuration.md#scheduler-profiles).

Versions: `v1beta1` (kube-scheduler 1.20) and `v1beta2` list defaults per extension point; `v1beta3` and `v1`
(1.23+) list them under `multiPoint`, a plugin there joining every point it implements. koord adds
LoadAwareScheduling (filter, score weight 1, reserve) to every version's defaults. Without a configuration
file koord-scheduler runs the `v1beta2` defaults: kube-scheduler 1.20's default profile (the one it
replaces) with the LeastAllocated score given by NodeResourcesFit, as from 1.22 — the same scores as
1.20's NodeResourcesLeastAllocated at weight 1.
Imports: standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

GROUP: Final = "kubescheduler.config.k8s.io"
VERSIONS: Final = ("v1beta1", "v1beta2", "v1beta3", "v1")
DEFAULT_VERSION: Final = "v1beta2"

# Extension points, in the order a pod meets them.
POINTS: Final = (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
    "permit", "preBind", "bind", "postBind",
)  # fmt: skip
MULTI_POINT: Final = "multiPoint"


def points_of(version: str) -> tuple[str, ...]:
    """The `plugins` fields a version's profile has."""
    if version in ("v1beta1", "v1beta2"):
        return tuple(p for p in POINTS if p != "preEnqueue")
    if version == "v1beta3":
        return (MULTI_POINT, *(p for p in POINTS if p != "preEnqueue"))
    return (MULTI_POINT, *POINTS)


@dataclass(frozen=True, slots=True)
class Entry:
    """A plugin named at an extension point; `weight` only where scores are weighted (0 = not given)."""

    name: str
    weight: int = 0


def _e(*names: str) -> tuple[Entry, ...]:
    return tuple(Entry(n) for n in names)


_VOLUME_FILTERS = ("VolumeRestrictions", "EBSLimits", "GCEPDLimits", "NodeVolumeLimits", "AzureDiskLimits")

# kube-scheduler 1.20.2's default profile (pkg/scheduler/algorithmprovider), with LoadAwareScheduling.
_FILTERS = _e(
    "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
    *_VOLUME_FILTERS, "VolumeBinding", "VolumeZone", "PodTopologySpread", "InterPodAffinity",
    "LoadAwareScheduling",
)  # fmt: skip
_SCORES = (
    Entry("NodeResourcesBalancedAllocation", 1), Entry("ImageLocality", 1), Entry("InterPodAffinity", 1),
    Entry("NodeResourcesLeastAllocated", 1), Entry("NodeAffinity", 1), Entry("NodePreferAvoidPods", 10000),
    Entry("PodTopologySpread", 2), Entry("TaintToleration", 1), Entry("LoadAwareScheduling", 1),
)  # fmt: skip
_V1BETA1: Final[Mapping[str, tuple[Entry, ...]]] = {
    "queueSort": _e("PrioritySort"),
    "preFilter": _e(
        "NodeResourcesFit", "NodePorts", "PodTopologySpread", "InterPodAffinity", "VolumeBinding"
    ),
    "filter": _FILTERS,
    "postFilter": _e("DefaultPreemption"),
    "preScore": _e("InterPodAffinity", "PodTopologySpread", "TaintToleration"),
    "score": _SCORES,
    "reserve": _e("VolumeBinding", "LoadAwareScheduling"),
    "preBind": _e("VolumeBinding"),
    "bind": _e("DefaultBinder"),
}

# v1beta2 (1.22): NodeResourcesFit scores (scoringStrategy LeastAllocated) in place of the separate plugin.
_V1BETA2: Final[Mapping[str, tuple[Entry, ...]]] = {
    **_V1BETA1,
    "score": tuple(
        Entry("NodeResourcesFit", 1) if e.name == "NodeResourcesLeastAllocated" else e
        for e in _V1BETA1["score"]
    ),
}

# v1beta3 and v1 (1.23+): one multiPoint list; NodePreferAvoidPods is gone, some weights changed.
_MULTI: Final[tuple[Entry, ...]] = (
    Entry("PrioritySort"), Entry("NodeUnschedulable"), Entry("NodeName"), Entry("TaintToleration", 3),
    Entry("NodeAffinity", 2), Entry("NodePorts"), Entry("NodeResourcesFit", 1), *_e(*_VOLUME_FILTERS),
    Entry("VolumeBinding"), Entry("VolumeZone"), Entry("PodTopologySpread", 2), Entry("InterPodAffinity", 2),
    Entry("DefaultPreemption"), Entry("NodeResourcesBalancedAllocation", 1), Entry("ImageLocality", 1),
    Entry("DefaultBinder"), Entry("LoadAwareScheduling", 1),
)  # fmt: skip


def defaults(version: str) -> Mapping[str, tuple[Entry, ...]]:
    """The version's default plugins per `plugins` field (multiPoint included for v1beta3/v1)."""
    if version == "v1beta1":
        return _V1BETA1
    if version == "v1beta2":
        return _V1BETA2
    return {MULTI_POINT: _MULTI}


def merge(default: Sequence[Entry], enabled: Sequence[Entry], disabled: Sequence[str]) -> tuple[Entry, ...]:
    """kube-scheduler's merge of a profile's lists into a point's defaults: `disabled` drops defaults by
    name (`*` drops them all); an enabled plugin that is also a (kept) default replaces it in place
    (its weight re-configured); the other enabled plugins follow, in their order."""
    drop_all = "*" in disabled
    custom = {e.name: e for e in enabled}
    out: list[Entry] = []
    if not drop_all:
        for d in default:
            if d.name in disabled:
                continue
            out.append(custom.pop(d.name, d))
    out.extend(e for e in enabled if e.name in custom and custom.pop(e.name) is e)
    return tuple(out)
