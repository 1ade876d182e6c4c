"""System config (docs/rules/koordlet.md, docs/configuration.md#system-config; gate ``SystemConfig``,
off by default): the node-wide kernel knobs of the NodeSLO ``systemStrategy`` — ``min_free_kbytes`` from
the node's memory capacity, ``watermark_scale_factor``, memcg reaper, group identity, idle-saver
watermark, page-cache limit and ``sched_features`` toggles.

``decide`` is pure: which files exist and the current ``sched_features`` come in the config, built each tick
by ``SystemConfigSource`` (the only part that looks at the host). Values outside the koordlet's ranges are
silently not written; nothing is restored when a field is later unset (as upstream). The decision carries
``sysctl_writes`` (``FileWrite``).
Imports: standard library, apis.*, agent.resourceexecutor.actions, agent.qosmanager.framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import FileWrite
from apis.gonum import go_div as _go_div
from apis.kubeobjects import Node
from apis.quantity import Quantity, QuantityError

__all__ = [
    "NAME",
    "SystemConfigInput",
    "SystemConfigSource",
    "SystemConfigStrategy",
    "decide",
    "min_free_kbytes",
    "system_roots",
]

NAME: Final = "SystemConfig"
MIN_FREE_KBYTES_RANGE: Final = (10240, 10485760)
WATERMARK_SCALE_FACTOR_RANGE: Final = (10, 400)

# (root, relative file) per knob: "proc" is --proc-root-dir, "sys" is --sys-root-dir
# (docs/configuration.md#system-config).
FILES: Final = {
    "min_free_kbytes": ("proc", "sys/vm/min_free_kbytes"),
    "watermark_scale_factor": ("proc", "sys/vm/watermark_scale_factor"),
    "sched_group_identity_enabled": ("proc", "sys/kernel/sched_group_identity_enabled"),
    "sched_idle_saver_wmark": ("proc", "sys/kernel/sched_idle_saver_wmark"),
    "memcg_reap_background": ("sys", "kernel/mm/memcg_reaper/reap_background"),
    "page_cache_limit_enabled": ("sys", "kernel/mm/pagecache_limit/enabled"),
    "sched_features": ("sys", "kernel/debug/sched_features"),
}


@dataclass(frozen=True)
class SystemConfigInput:
    proc: Path
    sys: Path
    existing: frozenset[str] = frozenset()
    """Knob names (keys of FILES) whose file exists on this host."""
    sched_features: Mapping[str, bool] = field(default_factory=dict)
    """Current ``sched_features``: name → enabled (``NO_NAME`` means disabled)."""

    def path(self, knob: str) -> Path:
        root, rel = FILES[knob]
        return (self.proc if root == "proc" else self.sys) / rel


def min_free_kbytes(capacity_bytes: int, factor: int) -> int:
    """``(capacityBytes/1024) × factor / 10000`` with Go int64 integer divisions, left to right."""
    return _go_div(_go_div(capacity_bytes, 1024) * factor, 10000)


def _capacity_memory(node: Node | None) -> int:
    raw = (((node or {}).get("status") or {}).get("capacity") or {}).get("memory")
    if raw is None:
        return 0
    try:
        return Quantity.from_json(raw).value()
    except (QuantityError, ValueError, TypeError):
        return 0


def parse_sched_features(text: str) -> dict[str, bool]:
    """``FEATURE NO_OTHER ...`` → {FEATURE: True, OTHER: False}."""
    out: dict[str, bool] = {}
    for word in text.split():
        if word.startswith("NO_"):
            out[word[3:]] = False
        else:
            out[word] = True
    return out


def decide(snapshot: Snapshot, config: SystemConfigInput, state: None = None) -> Decision[None]:
    slo = snapshot.node_slo
    strategy = slo.system_strategy if slo is not None else None
    capacity = _capacity_memory(snapshot.node)
    if strategy is None or snapshot.node is None or capacity <= 0:
        return Decision()
    writes: list[FileWrite] = []

    def write(knob: str, value: int | str) -> None:
        if knob in config.existing:
            writes.append(FileWrite(NAME, config.path(knob), str(value), cacheable=True))

    if strategy.min_free_kbytes_factor is not None:
        v = min_free_kbytes(capacity, strategy.min_free_kbytes_factor)
        if MIN_FREE_KBYTES_RANGE[0] <= v <= MIN_FREE_KBYTES_RANGE[1]:
            write("min_free_kbytes", v)
    w = strategy.watermark_scale_factor
    if w is not None and WATERMARK_SCALE_FACTOR_RANGE[0] <= w <= WATERMARK_SCALE_FACTOR_RANGE[1]:
        write("watermark_scale_factor", w)
    for knob, value in (
        ("memcg_reap_background", strategy.memcg_reap_background),
        ("sched_group_identity_enabled", strategy.sched_group_identity_enabled),
        ("page_cache_limit_enabled", strategy.page_cache_limit_enabled),
    ):
        if value in (0, 1):
            write(knob, value)
    if strategy.sched_idle_saver_wmark is not None:
        write("sched_idle_saver_wmark", strategy.sched_idle_saver_wmark)
    for name, wanted in sorted((strategy.sched_features or {}).items()):
        current = config.sched_features.get(name)
        if current is not None and current != wanted:
            write("sched_features", name if wanted else f"NO_{name}")
    return Decision(sysctl_writes=tuple(writes))


class SystemConfigSource:
    """Builds ``SystemConfigInput`` each tick: which knob files exist and the current sched_features."""

    def __init__(self, proc: Path, sys: Path) -> None:
        self.proc = proc
        self.sys = sys

    def __call__(self) -> SystemConfigInput:
        probe = SystemConfigInput(self.proc, self.sys)
        existing = frozenset(k for k in FILES if probe.path(k).is_file())
        features: dict[str, bool] = {}
        if "sched_features" in existing:
            try:
                features = parse_sched_features(probe.path("sched_features").read_text())
            except OSError:
                existing = existing - {"sched_features"}
        return SystemConfigInput(self.proc, self.sys, existing, features)


def system_roots(proc: Path, sys: Path) -> tuple[Path, ...]:
    """The directories the executor must allow for this strategy (nothing else under /proc or /sys)."""
    return tuple(sorted({SystemConfigInput(proc, sys).path(k).parent for k in FILES}))


@dataclass(frozen=True)
class SystemConfigStrategy:
    """The strategy (registered with gate ``SystemConfig``, default off), every 1 s."""

    name: str = NAME
    interval_seconds: float = 1.0

    def decide(self, snapshot: Snapshot, config: SystemConfigInput, state: None) -> Decision[None]:
        return decide(snapshot, config, state)
