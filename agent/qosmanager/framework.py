"""The QoS manager's contract (docs/rules/koordlet.md): a strategy is a pure
``decide(snapshot, config, state)`` that returns a ``Decision``: typed actions (host-file actions for the
resource executor, evictions for the evictor; the types live in agent.resourceexecutor.actions), its next
state (cool-downs, limiter tokens, "already recovered" flags) and gauges. Everything a strategy may look
at is in the ``Snapshot``: the node, the merged NodeSLO, the pods with their cgroup dirs, a read-only view
of the metric cache and of current cgroup values, the CPU topology and the time. The runner (thin,
effectful) builds the snapshot, calls ``decide`` and hands the actions to the executor / evictor.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions}.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from agent.podmeta import PodMeta
from agent.resourceexecutor.actions import Evict, HostActions
from agent.system.cgroup import CgroupFile, CgroupVersion
from agent.system.nodeinfo import NodeTopology
from agent.system.podcgroup import CgroupDriver
from apis.kubeobjects import Node
from apis.nodeslo import HostApplicationSpec, NodeSLOSpec

__all__ = ["CgroupView", "Decision", "MetricView", "Snapshot", "Strategy"]

S = TypeVar("S")
C = TypeVar("C", contravariant=True)


class MetricView(Protocol):
    """Read-only queries on the metric cache, windows ending at the snapshot's ``now``."""

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        """Value of the newest sample in ``[now − window, now]`` (None: no sample = missing)."""
        ...

    def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        """Mean of the samples in ``[now − window, now]`` (None: no sample)."""
        ...


class CgroupView(Protocol):
    """Current cgroup values (read-only). ``cgroup_dir`` is relative to the cgroup root, e.g. a pod's
    ``PodMeta.cgroup_dir``; None when the file cannot be read (vanished cgroup, unsupported knob)."""

    def read(self, spec: CgroupFile[Any], cgroup_dir: str) -> Any | None: ...

    def children(self, cgroup_dir: str) -> Sequence[str]:
        """Sub-directories (relative dirs, ``/``-terminated) of ``cgroup_dir`` on the cpu hierarchy."""
        ...


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    node: Node | None
    node_slo: NodeSLOSpec | None
    """Merged with the koordlet defaults (docs/rules/koordlet.md); None before the node's NodeSLO was
    observed."""
    pods: Sequence[PodMeta]
    metrics: MetricView
    cgroups: CgroupView
    cgroup_version: CgroupVersion
    cgroup_driver: CgroupDriver
    topology: NodeTopology | None
    collect_interval_seconds: float = 1.0
    host_apps: Sequence[HostApplicationSpec] = ()
    gates: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision(HostActions, Generic[S]):
    """What one tick decided: the host actions (typed fields of ``HostActions``, applied by the resource
    executor), the evictions (made by the evictor), the strategy's next state and its gauges."""

    evictions: tuple[Evict, ...] = ()
    state: S | None = None
    gauges: Mapping[str, float] = field(default_factory=dict)
    """Values for Prometheus (e.g. ``be_suppress_cpu_cores``), published by the runner."""


class Strategy(Protocol[C, S]):
    """A strategy: its ``name``, its loop period and the pure ``decide``. The gates that enable it and its
    factory are registered in ``agent.qosmanager.registry``."""

    @property
    def name(self) -> str: ...
    @property
    def interval_seconds(self) -> float: ...

    def decide(self, snapshot: Snapshot, config: C, state: S | None) -> Decision[S]: ...
