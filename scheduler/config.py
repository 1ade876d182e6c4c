"""koord-scheduler configuration: `KubeSchedulerConfiguration` of `kubescheduler.config.k8s.io` `v1beta1`
(kube-scheduler 1.20's format) through `v1`, from YAML or JSON (docs/configuration.md#scheduler-profiles).

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    podInitialBackoffSeconds: 1
    profiles:
    - schedulerName: koord-scheduler
      plugins:
        multiPoint:                   # v1beta3/v1; per point: queueSort, preFilter, filter, ..., bind
          enabled: [{name: LoadAwareScheduling, weight: 2}]
          disabled: [{name: NodeResourcesBalancedAllocation}]
      pluginConfig:
      - name: LoadAwareScheduling
        args: {usageThresholds: {cpu: 65, memory: 95}}
    - schedulerName: koord-scheduler-packed    # several profiles: one per schedulerName, one queue

Each profile starts from its version's default plugins (scheduler.profiledefaults) and merges its
`enabled`/`disabled` lists into them point by point, as kube-scheduler does. A plugin koord-scheduler does
not have is an error that names every such plugin at once; with `ignore_unknown` (the daemons'
`--ignore-unknown-plugins`) they are skipped instead and listed in `SchedulerConfig.skipped` (logged as a
warning). Default plugins koord does not have yet are left out and listed in `ignored`, as are the root
fields koord accepts without using. Every other bad value is an error naming the field and the value.
Imports: standard library, PyYAML, apis.constants, scheduler.profiledefaults.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from apis.constants import SCHEDULER_NAME
from scheduler.profiledefaults import (
    DEFAULT_VERSION,
    GROUP,
    MULTI_POINT,
    VERSIONS,
    Entry,
    defaults,
    merge,
    points_of,
)

KIND = "KubeSchedulerConfiguration"
API_VERSION = f"{GROUP}/v1"
# Part of the queue and the binder rather than plugins of the framework: always there.
BUILTIN = frozenset({"PrioritySort", "DefaultBinder"})
# Root fields koord-scheduler accepts without using (listed in `ignored` when given).
_UNUSED_ROOT = frozenset({
    "clientConnection", "healthzBindAddress", "metricsBindAddress", "enableProfiling",
    "enableContentionProfiling", "extenders", "delayCacheUntilActive", "algorithmSource",
})  # fmt: skip
_ROOT = _UNUSED_ROOT | {
    "apiVersion", "kind", "profiles", "leaderElection", "parallelism", "percentageOfNodesToScore",
    "podInitialBackoffSeconds", "podMaxBackoffSeconds",
}  # fmt: skip
# Root fields parsed and validated, not acted on yet: what koord does instead.
_NOT_YET = {
    "parallelism": "parallelism (binds run on --bind-workers threads)",
}
_PROFILE = frozenset({"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"})
_LEADER_UNUSED = frozenset({"leaseDuration", "renewDeadline", "retryPeriod"})
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
    """One profile, its plugin lists merged with the defaults: `points` for the regular extension points,
    `multi_point` (v1beta3/v1) for plugins that join every point they implement, except where `disabled`
    at that point. `args` are the plugins' pluginConfig (apiVersion/kind dropped)."""

    scheduler_name: str = SCHEDULER_NAME
    points: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)
    multi_point: tuple[Entry, ...] = ()
    disabled: Mapping[str, frozenset[str]] = field(default_factory=dict)
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    percentage_of_nodes_to_score: int | None = None
    """The profile's percentageOfNodesToScore, else the root one; None (both unset): every node is
    filtered and scored (docs/architecture.md#sampling-nodes)."""
    explicit: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The plugins the document itself enables, per point (the rest come from the defaults)."""

    @property
    def plugins(self) -> tuple[str, ...]:
        """Every framework plugin the profile names, each once, in the order first named."""
        seen: dict[str, None] = {}
        for e in (*self.multi_point, *(e for entries in self.points.values() for e in entries)):
            if e.name not in BUILTIN:
                seen[e.name] = None
        return tuple(seen)


@dataclass(frozen=True)
class SchedulerConfig:
    profiles: tuple[Profile, ...]
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    version: str = DEFAULT_VERSION
    parallelism: int = 16
    percentage_of_nodes_to_score: int | None = None  # the root field; profiles carry what applies
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    ignored: tuple[str, ...] = ()
    """What the configuration asks for, or the defaults name, that koord-scheduler does not do."""
    skipped: tuple[str, ...] = ()
    """Plugins koord-scheduler does not have, skipped under `ignore_unknown`."""

    def profile(self, scheduler_name: str) -> Profile | None:
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)


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


def _str(v: object, path: str) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{path}={v!r}: expected a non-empty string")
    return v


def _int(root: Mapping[str, Any], key: str, default: int, lo: int, hi: int | None = None) -> int:
    v = root.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or (hi is not None and v > hi):
        bound = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
        raise ConfigError(f"{key}={v!r}: must be an integer {bound}")
    return v


INT32_MAX = 2**31 - 1


def _entry(v: object, path: str, weighted: bool) -> Entry:
    spec = _obj(v, path)
    name = _str(spec.get("name"), f"{path}.name")
    for key in spec:
        if key not in ("name", "weight"):
            raise ConfigError(f"{path}.{key}: unknown field (name and weight are)")
    w = spec.get("weight", 0)
    if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= INT32_MAX:
        # kube-scheduler's field is an int32: a larger number fails to decode there
        raise ConfigError(f"{path}.weight={w!r}: must be an integer in 0..{INT32_MAX} (int32)")
    if w and not weighted:
        raise ConfigError(f"{path}.weight={w!r}: only score and multiPoint plugins have a weight")
    return Entry(name, w)


def _leader_election(v: object, ignored: dict[str, None]) -> LeaderElection:
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
            ignored[f"leaderElection.{key}"] = None
        elif key not in ("leaderElect", "resourceLock", "resourceName", "resourceNamespace"):
            raise ConfigError(f"leaderElection.{key}: unknown field")
    return LeaderElection(
        elect,
        None if name is None else _str(name, "leaderElection.resourceName"),
        None if namespace is None else _str(namespace, "leaderElection.resourceNamespace"),
    )


class _ProfileParser:
    """One profile of a document: its plugin lists merged with the version's defaults."""

    def __init__(self, version: str, known: frozenset[str] | None, ignore_unknown: bool) -> None:
        self.version = version
        self.known = None if known is None else known | BUILTIN
        self.ignore_unknown = ignore_unknown
        self.missing: dict[str, dict[str, None]] = {}  # plugin koord lacks → where the profile names it
        self.ignored: dict[str, None] = {}

    def _have(self, name: str) -> bool:
        return self.known is None or name in self.known

    def parse(self, v: object, path: str) -> Profile:
        spec = _obj(v, path)
        for key in spec:
            if key not in _PROFILE:
                raise ConfigError(f"{path}.{key}: unknown field")
        name = _str(spec.get("schedulerName", SCHEDULER_NAME), f"{path}.schedulerName")
        pct = spec.get("percentageOfNodesToScore")
        if pct is not None and (not isinstance(pct, int) or isinstance(pct, bool) or not 0 <= pct <= 100):
            raise ConfigError(f"{path}.percentageOfNodesToScore={pct!r}: must be an integer in 0..100")
        allowed = points_of(self.version)
        given = _obj(spec.get("plugins") or {}, f"{path}.plugins")
        for point in given:
            if point not in allowed:
                raise ConfigError(
                    f"{path}.plugins.{point}: not an extension point of {GROUP}/{self.version} "
                    f"(known: {', '.join(allowed)})"
                )
        base = defaults(self.version)
        merged: dict[str, tuple[Entry, ...]] = {}
        disabled: dict[str, frozenset[str]] = {}
        explicit: dict[str, frozenset[str]] = {}
        for point in allowed:
            at = f"{path}.plugins.{point}"
            lists = _obj(given.get(point) or {}, at)
            for key in lists:
                if key not in ("enabled", "disabled"):
                    raise ConfigError(f"{at}.{key}: unknown field (enabled and disabled are)")
            weighted = point in ("score", MULTI_POINT)
            on_list = _list(lists.get("enabled"), f"{at}.enabled")
            off_list = _list(lists.get("disabled"), f"{at}.disabled")
            enabled = [_entry(e, f"{at}.enabled[{k}]", weighted) for k, e in enumerate(on_list)]
            off = [_entry(e, f"{at}.disabled[{k}]", True).name for k, e in enumerate(off_list)]
            names = [e.name for e in enabled]
            dup = next((n for n in names if names.count(n) > 1), None)
            if dup is not None:
                raise ConfigError(f"{at}.enabled: plugin {dup!r} named twice")
            for e in enabled:
                if not self._have(e.name):
                    self.missing.setdefault(e.name, {})[point] = None
            kept = tuple(e for e in merge(base.get(point, ()), enabled, off) if self._wanted(e, names))
            if kept:
                merged[point] = kept
            if off:
                disabled[point] = frozenset(off)
            if names:
                explicit[point] = frozenset(names)
        multi = merged.pop(MULTI_POINT, ())
        args = self._plugin_args(spec.get("pluginConfig"), path)
        return Profile(name, merged, multi, disabled, args, pct, explicit)

    def _wanted(self, e: Entry, enabled_here: list[str]) -> bool:
        """Whether a merged entry stays: a default koord lacks is left out (noted); one the profile
        enables is kept only to be reported (the whole configuration then fails) or skipped."""
        if self._have(e.name):
            return True
        if e.name not in enabled_here:
            self.ignored.setdefault(f"default plugins koord-scheduler does not have yet: {e.name}", None)
        return False

    def _plugin_args(self, v: object, path: str) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        for k, raw in enumerate(_list(v, f"{path}.pluginConfig")):
            at = f"{path}.pluginConfig[{k}]"
            entry = _obj(raw, at)
            name = _str(entry.get("name"), f"{at}.name")
            if name in out:
                raise ConfigError(f"{at}.name={name!r}: configured twice")
            args = dict(_obj(entry.get("args") or {}, f"{at}.args"))
            api, kind = args.pop("apiVersion", None), args.pop("kind", f"{name}Args")
            if api is not None and api != f"{GROUP}/{self.version}":
                raise ConfigError(f"{at}.args.apiVersion={api!r}: expected {GROUP}/{self.version}")
            if kind != f"{name}Args":
                raise ConfigError(f"{at}.args.kind={kind!r}: expected {name}Args")
            if not self._have(name):
                self.missing.setdefault(name, {})["pluginConfig"] = None
                continue
            out[name] = args
        return out


def parse_config(
    doc: object, known: frozenset[str] | None = None, ignore_unknown: bool = False
) -> SchedulerConfig:
    """A SchedulerConfig from a parsed document (None → the defaults). `known` are the registered
    plugins (None: every name is taken as known)."""
    if doc is None:
        parser = _ProfileParser(DEFAULT_VERSION, known, ignore_unknown)
        return SchedulerConfig((parser.parse({}, "profiles[0]"),), ignored=tuple(parser.ignored))
    root = _obj(doc, "config")
    api = root.get("apiVersion", API_VERSION)
    version = api.removeprefix(f"{GROUP}/") if isinstance(api, str) else ""
    if version not in VERSIONS or api == version:
        raise ConfigError(f"apiVersion={api!r}: expected {GROUP}/ one of {', '.join(VERSIONS)}")
    if root.get("kind", KIND) != KIND:
        raise ConfigError(f"kind={root.get('kind')!r}: expected {KIND}")
    ignored: dict[str, None] = {}
    for key in root:
        if key not in _ROOT:
            raise ConfigError(f"{key}: unknown field of {KIND}")
        if key in _UNUSED_ROOT or key in _NOT_YET:
            ignored[_NOT_YET.get(key, key)] = None
    leader = _leader_election(root.get("leaderElection"), ignored)
    initial = _int(root, "podInitialBackoffSeconds", 1, 1)
    maximum = _int(root, "podMaxBackoffSeconds", 10, 1)
    if maximum < initial:
        raise ConfigError(f"podMaxBackoffSeconds={maximum}: must be >= podInitialBackoffSeconds ({initial})")
    parser = _ProfileParser(version, known, ignore_unknown)
    raw = _list(root.get("profiles"), "profiles") or [{}]
    profiles = tuple(parser.parse(p, f"profiles[{i}]") for i, p in enumerate(raw))
    names = [p.scheduler_name for p in profiles]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ConfigError(f"profiles: schedulerName {dup!r} used by more than one profile")
    skipped = tuple(f"{n} ({', '.join(where)})" for n, where in parser.missing.items())
    if skipped and not ignore_unknown:
        raise ConfigError(
            f"plugins koord-scheduler does not have: {'; '.join(skipped)}. Remove them from the "
            "configuration, or start with --ignore-unknown-plugins to skip them"
        )
    pct = (
        None
        if root.get("percentageOfNodesToScore") is None
        else _int(root, "percentageOfNodesToScore", 0, 0, 100)
    )
    if pct is not None:  # a profile's own value wins
        profiles = tuple(
            p if p.percentage_of_nodes_to_score is not None else replace(p, percentage_of_nodes_to_score=pct)
            for p in profiles
        )
    return SchedulerConfig(
        profiles,
        leader,
        version,
        _int(root, "parallelism", 16, 1),
        pct,
        initial,
        maximum,
        tuple({**ignored, **parser.ignored}),
        skipped,
    )


def load_config(
    path: str | Path | None, known: frozenset[str] | None = None, ignore_unknown: bool = False
) -> SchedulerConfig:
    """Reads a YAML/JSON configuration file (None → defaults) and logs what it skips and ignores."""
    if path is None:
        return parse_config(None, known, ignore_unknown)
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"--config={path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"--config={path}: invalid YAML: {e}") from None
    config = parse_config(doc, known, ignore_unknown)
    if config.skipped:
        log.warning("%s: skipped (--ignore-unknown-plugins): %s", path, "; ".join(config.skipped))
    if config.ignored:
        log.info("%s: accepted, not used by koord-scheduler: %s", path, "; ".join(config.ignored))
    return config
