"""The plugin registry: plugin name → factory(args, handle), and building a profile's Framework.
Imports: scheduler.framework, scheduler.config, scheduler.plugins.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.config import ConfigError, Profile
from scheduler.framework.interfaces import Plugin
from scheduler.framework.runtime import Framework
from scheduler.plugins.loadaware.args import ArgsError
from scheduler.plugins.loadaware.plugin import LoadAwareScheduling
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.noderesources import NodeResourcesFit
from scheduler.plugins.nodeunschedulable import NodeUnschedulable
from scheduler.plugins.tainttoleration import TaintToleration


@dataclass(frozen=True)
class Handle:
    """What a plugin may get from the scheduler at construction."""

    clock: Callable[[], float] = field(default=time.time)


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


REGISTRY: dict[str, Factory] = {
    "NodeUnschedulable": _no_args(NodeUnschedulable, "NodeUnschedulable"),
    "NodeAffinity": _no_args(NodeAffinity, "NodeAffinity"),
    "TaintToleration": _no_args(TaintToleration, "TaintToleration"),
    "NodeResourcesFit": _no_args(NodeResourcesFit, "NodeResourcesFit"),
    "LoadAwareScheduling": _load_aware,
}
KNOWN = frozenset(REGISTRY)


def build_framework(
    profile: Profile,
    handle: Handle | None = None,
    observer: Callable[[str, str, float], None] | None = None,
    rng: random.Random | None = None,
) -> Framework:
    """The profile's Framework; `rng` draws among equal top scores (None: first in name order)."""
    h = handle or Handle()
    plugins = [REGISTRY[name](profile.args.get(name, {}), h) for name in profile.plugins]
    return Framework(plugins, profile.weights, observer, rng)
