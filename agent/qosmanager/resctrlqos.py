"""The RDT QoS strategy, ResctrlReconcile (docs/rules/koordlet.md#resctrl-gate-rdtresctrl-every-1-s): L3
cache (CAT) and memory bandwidth (MBA) isolation of the QoS classes. Each tick, for the control groups
LSR/LS/BE, the L3 CAT ``schemata`` line from the class's ``resctrlQOS`` cat range over the root cache bit
mask and the MBA line from its ``mbaPercent`` (Intel: round up to a multiple of 10; AMD: 160 Gbps scale,
100 → 2048), then the thread ids of the containers of pods whose class enables resctrl, appended to the
group's ``tasks``.

``decide`` is pure: the resctrl host facts (mounted root, ``cbm_mask``, cache ids, CPU vendor, current group
``tasks``) come in the config as a ``ResctrlInfo`` (None = not mounted → no actions), container thread ids
from ``snapshot.cgroups``. Resctrl files are not cgroup files: the decision carries ``mkdirs`` (a missing
group dir) and ``resctrl_writes`` (``FileWrite``). ``ResctrlConfigSource`` (effectful, through
``read_resctrl_info``) builds the config each tick.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions},
agent.qosmanager.framework.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from agent.podmeta import PodMeta
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import FileWrite, MakeDir
from agent.system.cgroup import TASKS
from agent.system.resctrl import RESCTRL_GROUPS, is_resctrl_mounted
from apis.nodeslo import ResctrlQOSCfg, ResourceQOS, ResourceQOSStrategy
from apis.pod import PHASE_PENDING, PHASE_RUNNING, phase, pod_annotations
from apis.qos import QoSClass, qos_class_with_default

__all__ = [
    "ResctrlConfig",
    "ResctrlConfigSource",
    "ResctrlInfo",
    "ResctrlReconcileStrategy",
    "decide",
    "l3_mask",
    "l3_schemata",
    "mb_schemata",
    "mba_value",
    "read_resctrl_info",
]

NAME: Final = "ResctrlReconcile"
ANNOTATION_POD_RESCTRL: Final = "node.koordinator.sh/resctrl"
VENDOR_AMD: Final = "AuthenticAMD"
AMD_MBA_UNLIMITED: Final = 2048
AMD_MBA_MAX_GBPS: Final = 160


@dataclass(frozen=True)
class ResctrlInfo:
    """The resctrl host facts for one tick (read by ``read_resctrl_info``)."""

    root: Path
    cbm_mask: str
    """``info/L3/cbm_mask`` (hex)."""
    cache_ids: tuple[int, ...]
    """The L3 cache ids of the root ``schemata``, ascending."""
    vendor: str = ""
    """``vendor_id`` of /proc/cpuinfo (``GenuineIntel`` / ``AuthenticAMD``)."""
    group_tasks: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """The ids currently in ``<root>/<group>/tasks`` (read once per tick per group)."""


@dataclass(frozen=True)
class ResctrlConfig:
    info: ResctrlInfo | None = None
    """None: resctrl not mounted (or unreadable) → the strategy does nothing."""


# --- pure building blocks ---------------------------------------------------------------------------
def l3_mask(cbm_mask: str, start_percent: int, end_percent: int) -> str | None:
    """The group's CAT mask as lower-case hex (``(1<<endWay) − (1<<startWay)``), None when invalid.

    ``ways = bitlen(cbm)``, ``startWay = ceil(ways × start/100)``, ``endWay = ceil(ways × end/100)``; the cbm
    must be contiguous low bits and 0 ≤ start < end ≤ 100.
    """
    try:
        cbm = int(cbm_mask.strip(), 16)
    except ValueError:
        return None
    if cbm <= 0 or (cbm + 1) & cbm != 0:
        return None
    if not 0 <= start_percent < end_percent <= 100:
        return None
    ways = cbm.bit_length()
    start_way = math.ceil(float(ways) * float(start_percent) / 100.0)
    end_way = math.ceil(float(ways) * float(end_percent) / 100.0)
    mask = (1 << end_way) - (1 << start_way)
    return f"{mask:x}" if mask > 0 else None


def mba_value(percent: int, vendor: str) -> int | None:
    """The MB schemata value for ``percent`` (1..100, else None): Intel rounds up to a multiple of 10; AMD
    maps 100 → 2048 (unlimited), else ``int64(160 × pct / 100)``."""
    if not 1 <= percent <= 100:
        return None
    if vendor == VENDOR_AMD:
        return AMD_MBA_UNLIMITED if percent == 100 else int(AMD_MBA_MAX_GBPS * percent / 100)
    return percent if percent % 10 == 0 else percent // 10 * 10 + 10


def _line(prefix: str, ids: Sequence[int], value: str) -> str:
    return f"{prefix}:" + "".join(f"{i}={value};" for i in sorted(ids)) + "\n"


def l3_schemata(ids: Sequence[int], mask: str) -> str:
    """``L3:0=f;1=f;\\n`` (ids ascending, trailing ``;``)."""
    return _line("L3", ids, mask)


def mb_schemata(ids: Sequence[int], value: int) -> str:
    """``MB:0=60;1=60;\\n``."""
    return _line("MB", ids, str(value))


def _class_cfg(strategy: ResourceQOSStrategy, qos: QoSClass) -> ResourceQOS | None:
    if qos in (QoSClass.LSE, QoSClass.LSR):
        return strategy.lsr_class
    if qos is QoSClass.LS:
        return strategy.ls_class
    if qos is QoSClass.BE:
        return strategy.be_class
    if qos is QoSClass.SYSTEM:
        return strategy.system_class
    return None


def _resctrl_cfg(strategy: ResourceQOSStrategy, qos: QoSClass) -> ResctrlQOSCfg | None:
    cls = _class_cfg(strategy, qos)
    return cls.resctrl_qos if cls is not None else None


_GROUP_QOS: Final[Mapping[str, QoSClass]] = {"LSR": QoSClass.LSR, "LS": QoSClass.LS, "BE": QoSClass.BE}
_POD_GROUP: Final[Mapping[QoSClass, str]] = {
    QoSClass.LSE: "LSR",
    QoSClass.LSR: "LSR",
    QoSClass.LS: "LS",
    QoSClass.BE: "BE",
}


def schemata_writes(strategy: ResourceQOSStrategy, info: ResctrlInfo) -> list[FileWrite]:
    """The L3 then MB line of every group LSR/LS/BE (whether or not the class enables resctrl)."""
    out: list[FileWrite] = []
    for group in RESCTRL_GROUPS:
        cfg = _resctrl_cfg(strategy, _GROUP_QOS[group])
        if cfg is None:
            continue
        path = info.root / group / "schemata"
        start, end = cfg.cat_range_start_percent, cfg.cat_range_end_percent
        if start is not None and end is not None and info.cache_ids:
            mask = l3_mask(info.cbm_mask, start, end)
            if mask is not None:
                out.append(FileWrite(NAME, path, l3_schemata(info.cache_ids, mask), True))
        if cfg.mba_percent is not None and info.cache_ids:
            mba = mba_value(cfg.mba_percent, info.vendor)
            if mba is not None:
                out.append(FileWrite(NAME, path, mb_schemata(info.cache_ids, mba), True))
    return out


def pod_group(pod: PodMeta, strategy: ResourceQOSStrategy) -> str | None:
    """The group a Running/Pending pod's tasks join: its class (with default) must enable resctrl, and the
    pod must not carry ``node.koordinator.sh/resctrl``."""
    if phase(pod.pod) not in (PHASE_RUNNING, PHASE_PENDING):
        return None
    if ANNOTATION_POD_RESCTRL in pod_annotations(pod.pod):
        return None
    qos = qos_class_with_default(pod.pod)
    cfg = _resctrl_cfg(strategy, qos)
    if cfg is None or cfg.enable is not True:
        return None
    return _POD_GROUP.get(qos)


def task_writes(snapshot: Snapshot, strategy: ResourceQOSStrategy, info: ResctrlInfo) -> list[FileWrite]:
    """Per group, the container thread ids not yet in its ``tasks``, ascending, one uncached write each."""
    out: list[FileWrite] = []
    for group in RESCTRL_GROUPS:
        present = info.group_tasks.get(group, frozenset())
        owners: dict[int, tuple[PodMeta, str]] = {}
        for pod in snapshot.pods:
            if pod_group(pod, strategy) != group:
                continue
            for container in pod.containers:
                ids = snapshot.cgroups.read(TASKS, container.cgroup_dir)
                if not isinstance(ids, list):
                    continue
                for tid in ids:
                    if isinstance(tid, int) and tid not in present:
                        owners.setdefault(tid, (pod, container.container_id))
        path = info.root / group / "tasks"
        for tid in sorted(owners):
            pod, cid = owners[tid]
            out.append(FileWrite(NAME, path, str(tid), False, pod, cid))
    return out


def decide(snapshot: Snapshot, config: ResctrlConfig) -> Decision[None]:
    """The group dirs the schemata lines need (created when missing), then the schemata and tasks writes."""
    slo = snapshot.node_slo
    strategy = slo.resource_qos_strategy if slo is not None else None
    info = config.info
    if strategy is None or info is None:
        return Decision()
    schemata = schemata_writes(strategy, info)
    groups = dict.fromkeys(w.path.parent for w in schemata)
    return Decision(
        mkdirs=tuple(MakeDir(NAME, group) for group in groups),
        resctrl_writes=(*schemata, *task_writes(snapshot, strategy, info)),
    )


# --- the effectful reader (daemon side) ----------------------------------------------------------------
def parse_l3_ids(schemata: str) -> tuple[int, ...]:
    """Pure: the cache ids of the ``L3:`` line (``L3:0=fff;1=fff``), ascending; () when absent."""
    for line in schemata.splitlines():
        key, _, rest = line.strip().partition(":")
        if key.strip() != "L3":
            continue
        ids = []
        for part in rest.split(";"):
            cid, sep, _ = part.partition("=")
            if sep and cid.strip().isdigit():
                ids.append(int(cid.strip()))
        return tuple(sorted(ids))
    return ()


def parse_vendor(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "vendor_id":
            return value.strip()
    return ""


def _ids(text: str) -> frozenset[int]:
    return frozenset(int(t) for t in text.split() if t.isdigit())


def read_resctrl_info(root: Path, proc: Path, static: ResctrlInfo | None = None) -> ResctrlInfo | None:
    """Read the resctrl facts (None when not mounted or unreadable). ``static``: a previous result whose
    cbm mask, cache ids and vendor are reused (upstream reads them once per process)."""
    if not is_resctrl_mounted(root):
        return None
    try:
        if static is None or static.root != root:
            cbm = (root / "info" / "L3" / "cbm_mask").read_text().strip()
            ids = parse_l3_ids((root / "schemata").read_text())
            try:
                vendor = parse_vendor((proc / "cpuinfo").read_text())
            except OSError:
                vendor = ""
            static = ResctrlInfo(root, cbm, ids, vendor)
        tasks: dict[str, frozenset[int]] = {}
        for group in RESCTRL_GROUPS:
            try:
                tasks[group] = _ids((root / group / "tasks").read_text())
            except OSError:
                tasks[group] = frozenset()
    except OSError:
        return None
    return ResctrlInfo(static.root, static.cbm_mask, static.cache_ids, static.vendor, tasks)


class ResctrlReconcileStrategy:
    """The strategy (registered with gate ``RdtResctrl``), every 1 s."""

    name: str = NAME
    interval_seconds: float = 1.0

    def decide(self, snapshot: Snapshot, config: ResctrlConfig, state: None) -> Decision[None]:
        return decide(snapshot, config)


class ResctrlConfigSource:
    """Builds the strategy's config each tick from the host (the runner's config callable)."""

    def __init__(self, root: Path, proc: Path) -> None:
        self.root = root
        self.proc = proc
        self._static: ResctrlInfo | None = None

    def __call__(self) -> ResctrlConfig:
        info = read_resctrl_info(self.root, self.proc, self._static)
        if info is not None:
            self._static = info
        return ResctrlConfig(info)
