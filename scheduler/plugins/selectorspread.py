"""SelectorSpread (docs/rules/scheduler-spread.md#selectorspread): kube-scheduler v1.20.2's legacy
spreading of a Service's/controller's pods over nodes and zones. PreScore, Score (vectorised) and
NormalizeScore; a pod with ``topologySpreadConstraints`` of its own is skipped (every score 0).

PreScore deduces the pod's selector from the Services, RCs, RSs and StatefulSets that select it
(``helper.DefaultSelector``, scheduler.framework.listers). A node's raw score is the number of its pods
in the pod's namespace, not being deleted, that the selector matches (0 for an empty selector).
NormalizeScore, over the feasible nodes in float64 as Go: ``fScore = 100·((maxNode - s)/maxNode)``
(100 when maxNode is 0); when some feasible node has a zone key (``region + ":\\x00:" + zone``, the
``failure-domain.beta.kubernetes.io`` labels first, then the ``topology.kubernetes.io`` ones), a
node with a zone key gets ``fScore·(1 - 2/3) + 2/3·zoneScore`` where ``zoneScore = 100·((maxZone -
zoneCount)/maxZone)`` (100 when maxZone is 0) and zoneCount sums the raw scores of the feasible nodes
of its zone; truncated to int64.

In v1.20.2's default profile SelectorSpread is off: the DefaultPodTopologySpread feature gate (beta,
on by default) leaves default spreading to PodTopologySpread; with the gate off it is added to
PreScore and Score with weight 1.
Imports: numpy, apis (jsonfields, kubeobjects), scheduler.framework, scheduler.plugins.podtopologyspread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from apis.jsonfields import as_mapping
from apis.kubeobjects import Node, Pod
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray
from scheduler.framework.listers import ClusterObjects, Requirements, namespace_of
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.podtopologyspread.constraints import pod_constraints
from scheduler.plugins.podtopologyspread.podindex import CodeColumn, pod_index

NAME: Final = "SelectorSpread"
PRE_SCORE_STATE_KEY: Final = "PreScore" + NAME
DEFAULT_WEIGHT: Final = 1  # when the DefaultPodTopologySpread gate is off
ZONE_WEIGHTING: Final = 2.0 / 3.0

LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
LABEL_REGION: Final = "topology.kubernetes.io/region"


def zone_key(node: Node) -> str:
    """``utilnode.GetZoneKey``: "" when the node has neither region nor zone."""
    raw = as_mapping(as_mapping(node.get("metadata")).get("labels"))

    def label(beta: str, stable: str) -> str:
        value = raw[beta] if beta in raw else raw.get(stable, "")
        return value if isinstance(value, str) else ""

    zone, region = label(LABEL_ZONE_BETA, LABEL_ZONE), label(LABEL_REGION_BETA, LABEL_REGION)
    return "" if not region and not zone else f"{region}:\x00:{zone}"


@dataclass(frozen=True, slots=True)
class _State:
    selector: Requirements
    feasible: IntArray
    zones: IntArray  # zone code of each feasible row (-1: none)


class SelectorSpread:
    """PreScore + Score (vectorised) + NormalizeScore; see the module docstring."""

    def __init__(self, objects: ClusterObjects | None = None) -> None:
        self.objects = objects

    @property
    def name(self) -> str:
        return NAME

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        if pod_constraints(pod):
            return Status.success()
        selector = self.objects.default_selector(pod) if self.objects is not None else ()
        zones = snapshot.view((NAME, "zone"), lambda: CodeColumn(zone_key)).codes[feasible]
        state.write(PRE_SCORE_STATE_KEY, _State(selector, feasible, zones.astype(np.int64)))
        return Status.success()

    def _state(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> _State:
        found = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(found, _State) or not (
            found.feasible is feasible or np.array_equal(found.feasible, feasible)
        ):
            self.pre_score(state, pod, snapshot, feasible)
            found = state.read(PRE_SCORE_STATE_KEY)
        assert isinstance(found, _State)
        return found

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        if pod_constraints(pod):
            return np.zeros(len(feasible), np.int64)
        s = self._state(state, pod, snapshot, feasible)
        if not s.selector:
            return np.zeros(len(feasible), np.int64)
        return pod_index(snapshot).counts(namespace_of(pod), s.selector)  # every row's

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        if pod_constraints(pod):
            return Status.success()
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _State):
            return Status.error(f'reading "{PRE_SCORE_STATE_KEY}" from cycleState: not found', plugin=NAME)
        top = float(MAX_NODE_SCORE)
        max_node = max(int(scores.max()), 0) if len(scores) else 0
        if max_node > 0:
            f_score = top * ((max_node - scores).astype(np.float64) / float(max_node))
        else:
            f_score = np.full(len(scores), top)
        zoned = s.zones >= 0
        if np.any(zoned):
            codes = s.zones[zoned]
            by_zone = np.zeros(int(codes.max()) + 1, np.int64)
            np.add.at(by_zone, codes, scores[zoned])
            max_zone = max(int(by_zone.max()), 0)
            zone_count = by_zone[codes]
            if max_zone > 0:
                zone_score = top * ((max_zone - zone_count).astype(np.float64) / float(max_zone))
            else:
                zone_score = np.full(len(codes), top)
            f_score[zoned] = f_score[zoned] * (1.0 - ZONE_WEIGHTING) + ZONE_WEIGHTING * zone_score
        scores[:] = f_score.astype(np.int64)
        return Status.success()
