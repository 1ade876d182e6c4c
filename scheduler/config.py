"""koord-scheduler configuration: the subset of `KubeSchedulerConfiguration`
(`kubescheduler.config.k8s.io/v1`) that koord-scheduler honours, read from YAML or JSON.

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: koord-scheduler
      plugins:
        multiPoint:                    # or filter/score: same meaning here
          enabled: [{name: LoadAwareScheduling, weight: 2}]
          disabled: [{name: NodeResourcesFit}]   # "*" disables every default plugin
      pluginConfig:
      - name: LoadAwareScheduling
        args: {usageThresholds: {cpu: 65, memory: 95}}

One profile. Defaults: the plugins of DEFAULT_PLUGINS in that order, each score weight 1.
Errors name the field and value.

Upstream Koordinator's chart configuration (deploy/manager/scheduler-config.yaml ships it) loads too:
what koord-scheduler does not implement — plugins it does not have (Coscheduling, Reservation, ...) and
their pluginConfig, the extension points it does not configure (queueSort, permit, bind, ...),
NodeResourcesFit scoring resources beyond cpu and memory, leaderElection tuning — is accepted and listed
in ``Profile.ignored`` (``load_profile`` logs it in one line); a name neither koord nor upstream knows, and
a bad value of anything koord uses, is still an error. ``leaderElection`` (leaderElect, resourceName,
resourceNamespace) is honoured by the standalone scheduler where its flags leave it open.
Imports: standard library, PyYAML.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from apis.constants import SCHEDULER_NAME

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "NodeUnschedulable",
    "NodeAffinity",
    "TaintToleration",
    "NodeResourcesFit",
    "LoadAwareScheduling",
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Points whose enabled/disabled lists choose koord's plugins (a plugin joins every point it implements).
_EXTENSION_POINTS = ("multiPoint", "preFilter", "filter", "preScore", "score", "reserve")
# Points koord-scheduler has no configurable plugins at (it sorts by priority and binds through the API
# itself): accepted, their plugins listed as ignored.
_OTHER_POINTS = ("preEnqueue", "queueSort", "postFilter", "permit", "preBind", "bind", "postBind")
# Plugins of upstream kube-scheduler and Koordinator koord-scheduler does not have (yet).
UPSTREAM_PLUGINS = _words(
    "PrioritySort DefaultBinder DefaultPreemption NodeName NodePorts NodeResourcesBalancedAllocation "
    "ImageLocality InterPodAffinity PodTopologySpread VolumeBinding VolumeRestrictions VolumeZone "
    "NodeVolumeLimits EBSLimits GCEPDLimits AzureDiskLimits CinderLimits SchedulingGates DynamicResources "
    "SelectorSpread Coscheduling ElasticQuota Reservation NodeNUMAResource DeviceShare SchedulingHint "
    "DefaultPreBind NodeResourcesFitPlus ScarceResourceAvoidance"
)
# KubeSchedulerConfiguration (v1) fields koord-scheduler does not use: accepted, listed as ignored.
_UNUSED_ROOT = _words(
    "parallelism clientConnection healthzBindAddress metricsBindAddress enableProfiling "
    "enableContentionProfiling percentageOfNodesToScore podInitialBackoffSeconds podMaxBackoffSeconds "
    "extenders delayCacheUntilActive"
)
_ROOT = frozenset({"apiVersion", "kind", "profiles", "leaderElection"}) | _UNUSED_ROOT
_PROFILE = frozenset({"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"})
_LEADER_UNUSED = frozenset({"leaseDuration", "renewDeadline", "retryPeriod"})
# NodeResourcesFit scores LeastAllocated over these resources with these weights (its module docstring).
_FIT_SCORING = {"cpu": 1, "memory": 1}
log = logging.getLogger("koord-scheduler.config")


class ConfigError(ValueError):
    """An invalid scheduler configuration; the message names the field and value."""


@dataclass(frozen=True)
class LeaderElection:
    """``leaderElection`` of the configuration; None = not given."""

    leader_elect: bool | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = SCHEDULER_NAME
    plugins: tuple[str, ...] = DEFAULT_PLUGINS
    weights: Mapping[str, int] = field(default_factory=dict)
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    ignored: tuple[str, ...] = ()
    """What the configuration asks for that koord-scheduler accepts without implementing."""


def _obj(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ConfigError(f"{path}={v!r}: expected an object")
    return v


def _list(v: object, path: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ConfigError(f"{path}={v!r}: expected a list")
    return v


def _name(v: object, path: str) -> str:
    entry = _obj(v, path)
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{path}.name={name!r}: expected a plugin name")
    return name


class _Ignored:
    """What koord accepts without implementing, grouped: ``plugins: A, B``, ``leaderElection.retryPeriod``."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, None]] = {}

    def add(self, group: str, item: str = "") -> None:
        items = self._groups.setdefault(group, {})
        if item:
            items[item] = None

    def lines(self) -> tuple[str, ...]:
        return tuple(f"{g}: {', '.join(items)}" if items else g for g, items in self._groups.items())


def _str(v: object, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{path}={v!r}: expected a non-empty string")
    return v


def _weight(entry: Mapping[str, Any], path: str) -> int | None:
    if "weight" not in entry:
        return None
    w = entry["weight"]
    if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
        raise ConfigError(f"{path}.weight={w!r}: must be an integer in 1..100")
    return w


def _leader_election(v: object, ignored: _Ignored) -> LeaderElection:
    if v is None:
        return LeaderElection()
    spec = _obj(v, "leaderElection")
    elect = spec.get("leaderElect")
    if elect is not None and not isinstance(elect, bool):
        raise ConfigError(f"leaderElection.leaderElect={elect!r}: expected true or false")
    lock = spec.get("resourceLock", "leases")
    if lock != "leases":
        raise ConfigError(f"leaderElection.resourceLock={lock!r}: koord-scheduler locks a Lease ('leases')")
    name, namespace = spec.get("resourceName"), spec.get("resourceNamespace")
    for key in spec:
        if key in _LEADER_UNUSED:
            ignored.add(f"leaderElection.{key}")
        elif key not in ("leaderElect", "resourceLock", "resourceName", "resourceNamespace"):
            raise ConfigError(f"leaderElection.{key}: unknown field")
    return LeaderElection(
        elect,
        None if name is None else _str(name, "leaderElection.resourceName"),
        None if namespace is None else _str(namespace, "leaderElection.resourceNamespace"),
    )


def _fit_args(args: dict[str, Any], path: str, ignored: _Ignored) -> None:
    """NodeResourcesFit's ``scoringStrategy``: LeastAllocated only; resources beyond koord's cpu and
    memory at weight 1 are listed as ignored. Removed from ``args`` (the plugin takes none)."""
    if "scoringStrategy" not in args:
        return
    base = f"{path}.scoringStrategy"
    strategy = _obj(args.pop("scoringStrategy"), base)
    kind = strategy.get("type", "LeastAllocated")
    if kind != "LeastAllocated":
        raise ConfigError(f"{base}.type={kind!r}: koord-scheduler scores LeastAllocated only")
    for key in strategy:
        if key not in ("type", "resources"):
            raise ConfigError(f"{base}.{key}: not supported (type and resources are)")
    for k, entry in enumerate(_list(strategy.get("resources"), f"{base}.resources")):
        name = _name(entry, f"{base}.resources[{k}]")
        weight = _weight(entry, f"{base}.resources[{k}]") or 1
        if _FIT_SCORING.get(name) != weight:
            ignored.add("NodeResourcesFit scoringStrategy.resources", f"{name}={weight}")


def _plugin_args(
    entry: object, path: str, known: frozenset[str] | None, ignored: _Ignored
) -> tuple[str, dict[str, Any] | None]:
    """A pluginConfig entry's name and args (``apiVersion``/``kind`` checked and dropped); None for a
    plugin koord does not have but upstream does."""
    name = _name(entry, path)
    args = dict(_obj(_obj(entry, path).get("args") or {}, f"{path}.args"))
    api, kind = args.pop("apiVersion", API_VERSION), args.pop("kind", f"{name}Args")
    if api != API_VERSION:
        raise ConfigError(f"{path}.args.apiVersion={api!r}: expected {API_VERSION}")
    if kind != f"{name}Args":
        raise ConfigError(f"{path}.args.kind={kind!r}: expected {name}Args")
    if _upstream_only(name, known):
        ignored.add("pluginConfig", name)
        return name, None
    if name == "NodeResourcesFit":
        _fit_args(args, f"{path}.args", ignored)
    return name, args


def _upstream_only(name: str, known: frozenset[str] | None) -> bool:
    return name in UPSTREAM_PLUGINS and (known is None or name not in known)


def parse_profile(doc: object, known: frozenset[str] | None = None) -> Profile:
    """A Profile from a parsed configuration document (None → defaults). `known` are registered
    plugin names; a name neither registered nor upstream's is an error."""
    if doc is None:
        return Profile()
    root = _obj(doc, "config")
    if root.get("apiVersion", API_VERSION) != API_VERSION:
        raise ConfigError(f"apiVersion={root.get('apiVersion')!r}: expected {API_VERSION}")
    if root.get("kind", KIND) != KIND:
        raise ConfigError(f"kind={root.get('kind')!r}: expected {KIND}")
    ignored = _Ignored()
    for key in root:
        if key not in _ROOT:
            raise ConfigError(f"{key}: unknown field of {KIND}")
        if key in _UNUSED_ROOT:
            ignored.add(key)
    leader = _leader_election(root.get("leaderElection"), ignored)
    profiles = _list(root.get("profiles"), "profiles")
    if not profiles:
        return Profile(leader_election=leader, ignored=ignored.lines())
    if len(profiles) > 1:
        raise ConfigError(f"profiles: {len(profiles)} given; koord-scheduler runs exactly one profile")
    prof = _obj(profiles[0], "profiles[0]")
    for key in prof:
        if key not in _PROFILE:
            raise ConfigError(f"profiles[0].{key}: unknown field")
    if "percentageOfNodesToScore" in prof:
        ignored.add("profiles[0].percentageOfNodesToScore")
    sched_name = prof.get("schedulerName", SCHEDULER_NAME)
    if not isinstance(sched_name, str) or not sched_name:
        raise ConfigError(f"profiles[0].schedulerName={sched_name!r}: expected a non-empty string")

    plugins = list(DEFAULT_PLUGINS)
    weights: dict[str, int] = {}
    names: list[str] = []  # every plugin name the document gives, checked against `known` at the end
    points = _obj(prof.get("plugins") or {}, "profiles[0].plugins")
    for point, spec in points.items():
        base = f"profiles[0].plugins.{point}"
        if point not in _EXTENSION_POINTS and point not in _OTHER_POINTS:
            known_points = ", ".join((*_EXTENSION_POINTS, *_OTHER_POINTS))
            raise ConfigError(f"{base}: unknown extension point (known: {known_points})")
        modelled = point in _EXTENSION_POINTS
        spec = _obj(spec, base)
        for k, entry in enumerate(_list(spec.get("disabled"), f"{base}.disabled")):
            name = _name(entry, f"{base}.disabled[{k}]")
            if not modelled or _upstream_only(name, known):
                continue  # nothing of koord's to disable there
            plugins = [] if name == "*" else [p for p in plugins if p != name]
        for k, entry in enumerate(_list(spec.get("enabled"), f"{base}.enabled")):
            path = f"{base}.enabled[{k}]"
            name = _name(entry, path)
            if _upstream_only(name, known) or not modelled:
                w = entry.get("weight", 1)
                if not isinstance(w, int) or isinstance(w, bool) or w < 1:
                    raise ConfigError(f"{path}.weight={w!r}: must be a positive integer")
                names.append(name)
                ignored.add("plugins", name if _upstream_only(name, known) else f"{name} at {point}")
                continue
            w = _weight(entry, path)
            if name not in plugins:
                plugins.append(name)
            if w is not None:
                weights[name] = w

    args: dict[str, Mapping[str, Any]] = {}
    for k, entry in enumerate(_list(prof.get("pluginConfig"), "profiles[0].pluginConfig")):
        name, plugin_args = _plugin_args(entry, f"profiles[0].pluginConfig[{k}]", known, ignored)
        if plugin_args is not None:
            args[name] = plugin_args

    if known is not None:
        for name in [*plugins, *weights, *args, *names]:
            if name not in known and name not in UPSTREAM_PLUGINS:
                raise ConfigError(f"plugin {name!r}: not registered (known: {', '.join(sorted(known))})")
    return Profile(sched_name, tuple(plugins), weights, args, leader, ignored.lines())


def load_profile(path: str | Path | None, known: frozenset[str] | None = None) -> Profile:
    """Reads a YAML/JSON configuration file (None → defaults)."""
    if path is None:
        return parse_profile(None, known)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"--config={path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"--config={path}: invalid YAML: {e}") from None
    profile = parse_profile(doc, known)
    if profile.ignored:
        log.warning(
            "%s: accepted, not implemented by koord-scheduler (ignored): %s", path, "; ".join(profile.ignored)
        )
    return profile
