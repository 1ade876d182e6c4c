"""GPU device-cgroup strategy (docs/rules/koordlet-gpu.md#container): on cgroup v1, every container of a
pod with a GPU allocation (``scheduling.koordinator.sh/device-allocated``) may read and write only the
NVIDIA cards it was allocated, plus ``/dev/nvidiactl`` and ``/dev/nvidia-uvm{,-tools}``
(agent.topology.gpuhook has the rules).

``decide`` reads each such container's ``devices.list`` and returns only the writes that change it:
``devices.deny`` for every NVIDIA card rule (char major 195) the container holds beyond its allocation (a
``195:*`` wildcard loses its ``rw``, ``/dev/nvidia-modeset`` getting back what the wildcard gave it), then
``devices.allow`` for each wanted device not already readable and writable. Once applied,
``devices.list`` shows the wanted state and the next round writes nothing.
Left alone, with a note the strategy logs once: pods without an allocation; pods whose annotation does not
decode; containers in default-allow mode (privileged: given every device on purpose, and their
``devices.list`` cannot show deny rules); containers holding ``c *:* rw`` (removing it would cut every
other device); cgroup v2, where device access is an eBPF program of the runtime (not enforced).

Imports: standard library, apis.*, agent.{podmeta,system.cgroup,resourceexecutor.actions,topology.gpuhook},
agent.qosmanager.framework.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CgroupFile, CgroupVersion
from agent.topology.gpuhook import (
    NVIDIA_MAJOR,
    DeviceCgroupRules,
    DeviceRule,
    device_cgroup_rules,
    gpu_allocation,
)
from apis.device import DeviceError
from apis.pod import PHASE_PENDING, PHASE_RUNNING, phase

__all__ = [
    "DEVICES_ALLOW",
    "DEVICES_DENY",
    "DEVICES_LIST",
    "GATES",
    "DevicesList",
    "GPUDevicesConfig",
    "GPUDevicesConfigSource",
    "GPUDevicesStrategy",
    "decide_gpu_devices",
    "parse_devices_list",
    "rule_delta",
    "uvm_major",
]

log = logging.getLogger(__name__)

NAME: Final = "GPUDeviceCgroup"
GATES: Final = ("GPUEnvInject",)
V2_NOTE: Final = (
    "cgroup v2: device access is an eBPF program attached by the container runtime; koord does not "
    "enforce GPU allocations there (docs/rules/koordlet-gpu.md#container)"
)
_KINDS: Final = frozenset("abc")
_MAX_NOTES: Final = 1024


@dataclass(frozen=True, slots=True)
class DevicesList:
    """A v1 ``devices.list``: ``default_allow`` (the single ``a *:* rwm`` line: every device, exceptions
    hidden) or the allowed rules of a default-deny cgroup."""

    default_allow: bool
    rules: tuple[DeviceRule, ...] = ()


def _majmin(text: str, name: str, line: str) -> int | None:
    if text == "*":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}: bad device number {text!r} in {line!r}") from None


def parse_devices_list(text: str, name: str) -> DevicesList:
    """``<a|b|c> <major|*>:<minor|*> <access>`` per line; ``ValueError`` naming the file and the line."""
    rules: list[DeviceRule] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if (
            len(parts) != 3
            or parts[0] not in _KINDS
            or ":" not in parts[1]
            or not set(parts[2]) <= set("rwm")
        ):
            raise ValueError(f"{name}: bad devices.list line {line!r}")
        major, _, minor = parts[1].partition(":")
        if parts[0] == "a":
            return DevicesList(True)
        rules.append(DeviceRule(parts[0], _majmin(major, name, line), _majmin(minor, name, line), parts[2]))
    return DevicesList(False, tuple(rules))


def _rule_text(rule: DeviceRule) -> str:
    return rule.text()


# Write-only kernel files (reading them fails with EINVAL): one rule per write(2), written blind by the
# executor; the state is read back from devices.list (docs/rules/koordlet-gpu.md#container).
DEVICES_LIST: CgroupFile[DevicesList] = CgroupFile(
    "devices_list", "devices", "devices.list", parse_devices_list, None, None
)
DEVICES_ALLOW: CgroupFile[DeviceRule] = CgroupFile(
    "devices_allow", "devices", "devices.allow", None, None, None, v1_format=_rule_text, write_only=True
)
DEVICES_DENY: CgroupFile[DeviceRule] = CgroupFile(
    "devices_deny", "devices", "devices.deny", None, None, None, v1_format=_rule_text, write_only=True
)


def _covers(rule: DeviceRule, major: int, minor: int) -> bool:
    """Does ``rule`` grant both read and write on char ``major:minor`` (the kernel wants one rule to hold
    every bit an open asks for)?"""
    return (
        rule.kind == "c"
        and rule.major in (None, major)
        and rule.minor in (None, minor)
        and "r" in rule.access
        and "w" in rule.access
    )


def rule_delta(
    current: DevicesList, wanted: DeviceCgroupRules
) -> tuple[list[DeviceRule], list[DeviceRule]] | None:
    """(deny, allow) writes turning a default-deny ``current`` into ``wanted``; None when not enforceable
    (default allow, or a ``c *:*`` rule granting read or write)."""
    if current.default_allow:
        return None
    deny: list[DeviceRule] = []
    remaining: list[DeviceRule] = []
    wildcard_rw = ""
    for rule in current.rules:
        rw = "".join(ch for ch in "rw" if ch in rule.access)
        if rule.kind != "c" or not rw:
            remaining.append(rule)
        elif rule.major is None:
            return None
        elif rule.major != NVIDIA_MAJOR:
            remaining.append(rule)
        elif rule.minor is None:
            # The kernel removes only the exact rule written; the wildcard keeps its other bits (mknod).
            deny.append(DeviceRule("c", NVIDIA_MAJOR, None, rw))
            wildcard_rw = rw
            kept = rule.access.replace("r", "").replace("w", "")
            if kept:
                remaining.append(DeviceRule("c", NVIDIA_MAJOR, None, kept))
        elif rule.minor in wanted.keep or wanted.allowed(NVIDIA_MAJOR, rule.minor):
            remaining.append(rule)
        else:
            deny.append(DeviceRule("c", NVIDIA_MAJOR, rule.minor, "rwm"))
    allow = [
        w
        for w in wanted.allow
        if w.major is not None
        and w.minor is not None
        and not any(_covers(r, w.major, w.minor) for r in remaining)
    ]
    # A minor left as it is (nvidia-modeset) keeps what the removed wildcard gave it: the kernel merges
    # the bits into an exact rule.
    for minor in sorted(wanted.keep) if wildcard_rw else ():
        exact = "".join(
            r.access for r in remaining if r.kind == "c" and r.major == NVIDIA_MAJOR and r.minor == minor
        )
        if not set(wildcard_rw) <= set(exact):
            allow.append(DeviceRule("c", NVIDIA_MAJOR, minor, wildcard_rw))
    return deny, allow


@dataclass(frozen=True, slots=True)
class GPUDevicesConfig:
    uvm_major: int | None = None
    """The char major of ``nvidia-uvm`` from ``/proc/devices`` (dynamic; None: not loaded)."""


def uvm_major(proc_devices: str) -> int | None:
    """The ``nvidia-uvm`` character major in ``/proc/devices`` text (None when absent)."""
    section = ""
    for line in proc_devices.splitlines():
        text = line.strip()
        if text.endswith(":"):
            section = text
            continue
        parts = text.split()
        if (
            section.startswith("Character")
            and len(parts) == 2
            and parts[1] == "nvidia-uvm"
            and parts[0].isdigit()
        ):
            return int(parts[0])
    return None


class GPUDevicesConfigSource:
    """Builds the config each tick from ``<proc>/devices`` (unreadable: no uvm major)."""

    def __init__(self, proc: Path) -> None:
        self.proc = Path(proc)

    def __call__(self) -> GPUDevicesConfig:
        try:
            return GPUDevicesConfig(uvm_major((self.proc / "devices").read_text()))
        except OSError:
            return GPUDevicesConfig()


def decide_gpu_devices(
    snapshot: Snapshot, config: GPUDevicesConfig
) -> tuple[Decision[None], tuple[str, ...]]:
    """The device-cgroup writes of every Running/Pending pod with a GPU allocation, and notes on what was
    left alone (see the module docstring). Pure."""
    if snapshot.cgroup_version is CgroupVersion.V2:
        return Decision(), (V2_NOTE,)
    notes: list[str] = []
    writes: list[CgroupWrite] = []
    for pod in snapshot.pods:
        if phase(pod.pod) not in (PHASE_RUNNING, PHASE_PENDING):
            continue
        try:
            rules = device_cgroup_rules(gpu_allocation(pod.pod), config.uvm_major)
        except DeviceError as e:
            notes.append(f"pod {pod.namespace}/{pod.name}: GPU allocation not enforced: {e}")
            continue
        if rules is None:
            continue
        for ctr in pod.containers:
            current = snapshot.cgroups.read(DEVICES_LIST, ctr.cgroup_dir)
            if current is None:  # vanished, or no devices controller
                continue
            delta = rule_delta(current, rules)
            if delta is None:
                why = "default allow (privileged)" if current.default_allow else "holds c *:* read/write"
                where = f"pod {pod.namespace}/{pod.name} container {ctr.name}"
                notes.append(f"{where}: {why}: GPU devices left as they are")
                continue
            deny, allow = delta
            writes += [
                CgroupWrite(NAME, DEVICES_DENY, ctr.cgroup_dir, r, pod, ctr.container_id, False, 0)
                for r in deny
            ]
            writes += [
                CgroupWrite(NAME, DEVICES_ALLOW, ctr.cgroup_dir, r, pod, ctr.container_id, False, 1)
                for r in allow
            ]
    return Decision(cgroup_writes=tuple(writes)), tuple(notes)


class GPUDevicesStrategy:
    """The GPU device-cgroup strategy (registered with gate ``GPUEnvInject``), every second: a container
    can open a card between its start and the first round, and an open file stays usable after a deny."""

    name: str = NAME
    interval_seconds: float = 1.0

    def __init__(self, logger: Callable[[str], None] | None = None) -> None:
        self._log = logger or log.info
        self._noted: set[str] = set()

    def decide(self, snapshot: Snapshot, config: GPUDevicesConfig, state: None) -> Decision[None]:
        decision, notes = decide_gpu_devices(snapshot, config)
        for note in notes:  # each said once (the set is bounded: restarted when full)
            if note not in self._noted:
                if len(self._noted) >= _MAX_NOTES:
                    self._noted.clear()
                self._noted.add(note)
                self._log(note)
        return decision
