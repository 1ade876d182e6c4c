"""Extension points of the scheduling framework, one small Protocol each, as in Kubernetes.

A Filter or Score plugin implements exactly ONE form (docs/architecture.md, "The scheduler's plugin
contract"):
- all nodes at once (`FilterAllPlugin.filter_all`, `ScoreAllPlugin.score_all`: numpy arrays over the
  snapshot's rows), the default for rules that are arithmetic over node columns; per-node facts a
  plugin derives from Node objects are kept as snapshot columns (`Snapshot.column`/`Snapshot.view`);
- or node by node (`FilterPlugin.filter`, `ScorePlugin.score`: row i), for rules that are not
  (affinity, topology spread). The runtime adapts: it calls a per-node form only on the rows still
  feasible.
Readable per-node forms of vectorised plugins live in tests/ as oracles, not here.
Pods and nodes are Kubernetes JSON objects typed by apis.kubeobjects (`Pod`, re-exported here, and `Node`).
Imports: numpy, apis.kubeobjects, scheduler.framework.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from apis.kubeobjects import Pod as Pod  # re-exported: the pod every extension point is given
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Status

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


_ALL_PASS: dict[int, npt.NDArray[np.int32]] = {}
_UNIFORM: dict[tuple[int, int], IntArray] = {}
_UNIFORM_BY_ID: dict[int, tuple[IntArray, int]] = {}  # id of a kept array in _UNIFORM -> it, its value


def uniform_scores(n: int, value: int) -> IntArray:
    """n scores of `value`, shared and read-only: a Score plugin that gives every row the same score
    returns this, and the runtime adds the value once instead of the array
    (docs/architecture.md#uniform-scores)."""
    got = _UNIFORM.get((n, value))
    if got is None:
        got = np.full(n, value, np.int64)
        got.setflags(write=False)
        if len(_UNIFORM) >= 32:
            _UNIFORM.clear()
            _UNIFORM_BY_ID.clear()
        _UNIFORM[n, value] = got
        _UNIFORM_BY_ID[id(got)] = (got, value)
    return got


def uniform_value(scores: IntArray) -> int | None:
    """The value of an array `uniform_scores` returned (and still keeps), else None."""
    kept = _UNIFORM_BY_ID.get(id(scores))
    return kept[1] if kept is not None and kept[0] is scores else None


@dataclass(frozen=True, slots=True)
class FilterResult:
    """The outcome of one Filter plugin over all rows: `which[i]` is -1 when node i passes, else the
    index into `statuses` of the (rejecting) status node i gets."""

    which: npt.NDArray[np.int32]
    statuses: tuple[Status, ...] = ()  # empty: the plugin rejected no node

    @classmethod
    def all_pass(cls, n: int) -> FilterResult:
        """Shared, read-only: a plugin that rejects nothing allocates nothing."""
        which = _ALL_PASS.get(n)
        if which is None:
            which = np.full(n, -1, np.int32)
            which.setflags(write=False)
            if len(_ALL_PASS) > 16:
                _ALL_PASS.clear()
            _ALL_PASS[n] = which
        return cls(which)

    @classmethod
    def from_mask(cls, failed: BoolArray, status: Status) -> FilterResult:
        """Nodes where `failed` is true get `status`; the others pass."""
        if not np.count_nonzero(failed):
            return cls.all_pass(len(failed))
        return cls(np.where(failed, 0, -1).astype(np.int32), (status,))

    @property
    def passed(self) -> BoolArray:
        return self.which < 0

    def status_of(self, i: int) -> Status:
        k = int(self.which[i])
        return Status.success() if k < 0 else self.statuses[k]


@runtime_checkable
class Plugin(Protocol):
    @property
    def name(self) -> str: ...


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Asked before a pod enters activeQ (docs/architecture.md#gated-pods): a non-success keeps it
    parked, without backoff, until a cluster event or an explicit activation lets it try again."""

    def pre_enqueue(self, pod: Pod) -> Status: ...


@runtime_checkable
class NextPodPlugin(Plugin, Protocol):
    """Offers the pod to schedule next, ahead of the queue's head (a gang's next member), or None."""

    def next_pod(self) -> Pod | None: ...


@runtime_checkable
class BeforePreFilterPlugin(Plugin, Protocol):
    """Runs before every PreFilter plugin; a rejection ends the cycle as a PreFilter rejection does."""

    def before_pre_filter(self, state: CycleState, pod: Pod) -> Status: ...


@runtime_checkable
class NodeInfoTransformer(Plugin, Protocol):
    """Koordinator's BeforePreFilter node transformer (docs/architecture.md#node-transformers): before
    PreFilter, the NodeInfos every plugin of this cycle sees in place of the snapshot's (copies, e.g.
    with a reservation's reserve pod taken off); the runtime puts the snapshot's own back after the
    cycle. An empty list changes nothing."""

    def transform_node_infos(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> list[NodeInfo]: ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status: ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """kube's PreFilterExtensions: a PreFilter plugin whose cycle state depends on other pods adjusts
    a cloned state when one pod is added to or removed from one node, so its Filter can then be run on
    a single node evaluated apart from the snapshot (preemption's victims removed, nominated pods
    added: scheduler.framework.nominated, docs/rules/scheduler-preemption.md#filters-on-one-node).
    `info` is that node as it is after the change; a non-success status is an error."""

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status: ...

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Per-node Filter: the status of row i."""

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status: ...


@runtime_checkable
class FilterAllPlugin(Plugin, Protocol):
    """Vectorised Filter: every row at once."""

    def filter_all(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> FilterResult: ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status: ...


@runtime_checkable
class AfterPostFilterPlugin(Plugin, Protocol):
    """Runs after the PostFilter plugins, whatever they answered, for a pod that found no node;
    `fit_error` is the cycle's FitError text."""

    def after_post_filter(self, state: CycleState, pod: Pod, fit_error: str) -> Status: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status: ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Per-node Score of row i. Scores are integers in [MIN_NODE_SCORE, MAX_NODE_SCORE] after
    normalisation."""

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]: ...


@runtime_checkable
class ScoreAllPlugin(Plugin, Protocol):
    """Vectorised Score."""

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Scores of the rows listed in `feasible` (ascending, distinct), in that order, or of every
        row (the runtime reads the feasible ones): a rule that costs the same for every row returns
        them all rather than pick. The runtime never modifies the array."""
        ...


@runtime_checkable
class NormalizeScorePlugin(Plugin, Protocol):
    """A plugin may also declare `normalizes_by_range = True` (class attribute): when it returns
    `uniform_scores`, each normalised score depends only on the score and the scores' minimum and
    maximum, so they normalise as one element does (docs/architecture.md#uniform-scores)."""

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        """Rewrites `scores` (aligned with the feasible rows) in place."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """A WAIT status comes with a timeout in seconds."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status: ...


@runtime_checkable
class AnnotatingPreBind(Plugin, Protocol):
    """A PreBind plugin whose annotations (these keys, set on the pod dict) must reach the API object before
    the Binding: the binder patches them in one request (scheduler.annotationbinder)."""

    bind_annotations: tuple[str, ...]


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """SKIP passes the pod to the next bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change that may make parked pods schedulable: resource kind and action."""

    resource: str  # "Pod", "Node", "NodeMetric", "ElasticQuota" (its objects), ...
    action: str  # "Add", "Update", "Delete"


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    def events_to_register(self) -> list[ClusterEvent]: ...


@runtime_checkable
class PodEventHandler(Plugin, Protocol):
    """A plugin that follows assigned pods (the scheduler's informer feeds it, under its lock)."""

    def on_pod_add(self, pod: Pod) -> None: ...

    def on_pod_update(self, old: Pod, new: Pod) -> None: ...

    def on_pod_delete(self, pod: Pod) -> None: ...


@runtime_checkable
class AnyPodEventHandler(Plugin, Protocol):
    """A plugin that follows every pod, pending ones too (a gang's members), under the scheduler's lock."""

    def on_any_pod_add(self, pod: Pod) -> None: ...

    def on_any_pod_update(self, old: Pod, new: Pod) -> None: ...

    def on_any_pod_delete(self, pod: Pod) -> None: ...


@runtime_checkable
class WaitingPod(Protocol):
    """A pod held at Permit (kube's framework.WaitingPod): bound once every plugin that asked it to wait
    has allowed it; rejected by any one of them."""

    @property
    def pod(self) -> Mapping[str, Any]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


@runtime_checkable
class WaitingPods(Protocol):
    """kube's Handle.IterateOverWaitingPods: the pods held at Permit now (a copy: allowing or rejecting
    one may remove it)."""

    def waiting_pods(self) -> list[WaitingPod]: ...


@runtime_checkable
class SessionPlugin(Plugin, Protocol):
    """Acts once per session: a periodic tick of the scheduling loop, every `session_period` seconds,
    run on the scheduling thread between pod cycles under the scheduler's lock, with the profile's
    snapshot brought up to date; `now` is the clock (epoch seconds)
    (docs/rules/scheduler-jobreservation.md#sessions)."""

    @property
    def session_period(self) -> float: ...

    def on_session(self, snapshot: Snapshot, now: float) -> None: ...


@runtime_checkable
class NodeMetricEventHandler(Plugin, Protocol):
    """A plugin that follows node metrics (`nm` None: the node's metric is gone)."""

    def on_node_metric(self, name: str, nm: Any) -> None: ...


@runtime_checkable
class TopologyEventHandler(Plugin, Protocol):
    """A plugin that follows NodeResourceTopology objects (`nrt` None: the node's object is gone;
    docs/rules/scheduler-nodenumaresource.md#wiring)."""

    def on_topology(self, node_name: str, nrt: Any) -> None: ...


@runtime_checkable
class DeviceEventHandler(Plugin, Protocol):
    """A plugin that follows Device objects (`device` None: the node's object is gone;
    docs/rules/scheduler-deviceshare.md#wiring)."""

    def on_device(self, node_name: str, device: Any) -> None: ...
