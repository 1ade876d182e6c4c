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
Errors name the field and value. Imports: standard library, PyYAML.
"""

from __future__ import annotations

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
_EXTENSION_POINTS = ("multiPoint", "preFilter", "filter", "preScore", "score", "reserve", "bind")


class ConfigError(ValueError):
    """An invalid scheduler configuration; the message names the field and value."""


@dataclass(frozen=True)
class Profile:
    scheduler_name: str = SCHEDULER_NAME
    plugins: tuple[str, ...] = DEFAULT_PLUGINS
    weights: Mapping[str, int] = field(default_factory=dict)
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


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


def parse_profile(doc: object, known: frozenset[str] | None = None) -> Profile:
    """A Profile from a parsed configuration document (None → defaults). `known` are registered
    plugin names; an unknown name is an error."""
    if doc is None:
        return Profile()
    root = _obj(doc, "config")
    if root.get("apiVersion", API_VERSION) != API_VERSION:
        raise ConfigError(f"apiVersion={root.get('apiVersion')!r}: expected {API_VERSION}")
    if root.get("kind", KIND) != KIND:
        raise ConfigError(f"kind={root.get('kind')!r}: expected {KIND}")
    profiles = _list(root.get("profiles"), "profiles")
    if not profiles:
        return Profile()
    if len(profiles) > 1:
        raise ConfigError(f"profiles: {len(profiles)} given; koord-scheduler runs exactly one profile")
    prof = _obj(profiles[0], "profiles[0]")
    sched_name = prof.get("schedulerName", SCHEDULER_NAME)
    if not isinstance(sched_name, str) or not sched_name:
        raise ConfigError(f"profiles[0].schedulerName={sched_name!r}: expected a non-empty string")

    plugins = list(DEFAULT_PLUGINS)
    weights: dict[str, int] = {}
    points = _obj(prof.get("plugins") or {}, "profiles[0].plugins")
    for point, spec in points.items():
        base = f"profiles[0].plugins.{point}"
        if point not in _EXTENSION_POINTS:
            raise ConfigError(f"{base}: unknown extension point (known: {', '.join(_EXTENSION_POINTS)})")
        spec = _obj(spec, base)
        for k, entry in enumerate(_list(spec.get("disabled"), f"{base}.disabled")):
            name = _name(entry, f"{base}.disabled[{k}]")
            plugins = [] if name == "*" else [p for p in plugins if p != name]
        for k, entry in enumerate(_list(spec.get("enabled"), f"{base}.enabled")):
            path = f"{base}.enabled[{k}]"
            name = _name(entry, path)
            if name not in plugins:
                plugins.append(name)
            if "weight" in entry:
                w = entry["weight"]
                if not isinstance(w, int) or isinstance(w, bool) or not 1 <= w <= 100:
                    raise ConfigError(f"{path}.weight={w!r}: must be an integer in 1..100")
                weights[name] = w

    args: dict[str, Mapping[str, Any]] = {}
    for k, entry in enumerate(_list(prof.get("pluginConfig"), "profiles[0].pluginConfig")):
        path = f"profiles[0].pluginConfig[{k}]"
        name = _name(entry, path)
        args[name] = _obj(entry.get("args") or {}, f"{path}.args")

    if known is not None:
        for name in [*plugins, *weights, *args]:
            if name not in known:
                raise ConfigError(f"plugin {name!r}: not registered (known: {', '.join(sorted(known))})")
    return Profile(sched_name, tuple(plugins), weights, args)


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
    return parse_profile(doc, known)
