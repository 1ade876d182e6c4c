"""NodePreferAvoidPods Score plugin of kube-scheduler v1.20 (weight 10000 in the default profile):
a node whose annotation ``scheduler.alpha.kubernetes.io/preferAvoidPods`` lists the pod's controller
scores 0, every other node 100 (docs/rules/scheduler-basic.md#nodepreferavoidpods).

The pod's controller is its first ``ownerReferences`` entry with ``controller: true``; only a
``ReplicationController`` or ``ReplicaSet`` counts (any other pod scores 100 everywhere). A node's
annotation is decoded as Go decodes ``v1.AvoidPods`` (keys case-insensitive, unknown keys ignored, null
is empty); an entry matches when its ``podSignature.podController`` has the same ``kind`` and ``uid``.
An annotation that does not decode (bad JSON, a value of the wrong type, an ``evictionTime`` that is
not RFC 3339) makes the node score 100, as kube ignores it; an entry without ``podController`` (which
would make kube's plugin dereference nil) matches nothing.

Vectorised: each row's set of avoided controllers is interned in a snapshot view (rows share sets, and
almost all are empty); a pod is checked once per distinct set and the scores gathered over the rows.
Imports: standard library, numpy, apis (gojson, gojson_base, gojson_collections, gojson_kinds, jsonfields),
scheduler.framework.
"""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from apis.gojson import GoStruct, StructKind, jf
from apis.gojson_base import DecodeError
from apis.gojson_collections import ListKind
from apis.gojson_kinds import BoolKind, StrKind, TimeKind
from apis.jsonfields import as_mapping
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Pod, uniform_scores
from scheduler.framework.snapshot import RowChange, Snapshot
from scheduler.framework.status import MAX_NODE_SCORE

NAME: Final = "NodePreferAvoidPods"
ANNOTATION: Final = "scheduler.alpha.kubernetes.io/preferAvoidPods"
CONTROLLER_KINDS: Final = frozenset({"ReplicationController", "ReplicaSet"})

Controller = tuple[str, str]  # (kind, uid)


@dataclass(frozen=True)
class OwnerReference(GoStruct):
    api_version: str | None = jf("apiVersion", StrKind())
    kind: str | None = jf("kind", StrKind())
    name: str | None = jf("name", StrKind())
    uid: str | None = jf("uid", StrKind())
    controller: bool | None = jf("controller", BoolKind())
    block_owner_deletion: bool | None = jf("blockOwnerDeletion", BoolKind())


@dataclass(frozen=True)
class PodSignature(GoStruct):
    pod_controller: OwnerReference | None = jf("podController", StructKind(OwnerReference))


@dataclass(frozen=True)
class PreferAvoidPodsEntry(GoStruct):
    pod_signature: PodSignature = jf("podSignature", StructKind(PodSignature, pointer=False))
    eviction_time: Any = jf("evictionTime", TimeKind())
    reason: str | None = jf("reason", StrKind())
    message: str | None = jf("message", StrKind())


@dataclass(frozen=True)
class AvoidPods(GoStruct):
    prefer_avoid_pods: list[PreferAvoidPodsEntry] | None = jf(
        "preferAvoidPods", ListKind(StructKind(PreferAvoidPodsEntry, pointer=False))
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON literal {name}")


def avoided_controllers(node: Mapping[str, Any]) -> frozenset[Controller]:
    """The (kind, uid) pairs the node's annotation lists; empty when absent or not decodable."""
    text = as_mapping(as_mapping(node.get("metadata")).get("annotations")).get(ANNOTATION)
    if not isinstance(text, str) or not text:
        return frozenset()
    try:
        raw = json.loads(text, parse_constant=_reject_constant)
        if raw is not None and not isinstance(raw, Mapping):
            return frozenset()
        avoid = AvoidPods.from_dict(raw)
    except (ValueError, DecodeError, RecursionError):
        return frozenset()
    out = set()
    for entry in avoid.prefer_avoid_pods or ():
        ref = entry.pod_signature.pod_controller
        if ref is not None:
            out.add((ref.kind or "", ref.uid or ""))
    return frozenset(out)


def pod_controller(pod: Pod) -> Controller | None:
    """``GetControllerOf`` when it is a ReplicationController or ReplicaSet, else None."""
    refs = as_mapping(pod.get("metadata")).get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        m = as_mapping(ref)
        if m.get("controller") is True:
            kind, uid = m.get("kind"), m.get("uid")
            kind = kind if isinstance(kind, str) else ""
            return (kind, uid if isinstance(uid, str) else "") if kind in CONTROLLER_KINDS else None
    return None


class AvoidSets:
    """Row-aligned ids of interned avoided-controller sets (a snapshot view; Node objects only)."""

    reads_pods = False

    def __init__(self) -> None:
        self.ids: npt.NDArray[np.int32] = np.zeros(0, np.int32)
        self.sets: list[frozenset[Controller]] = []
        self.index: dict[frozenset[Controller], int] = {}

    def _intern(self, s: frozenset[Controller]) -> int:
        k = self.index.get(s)
        if k is None:
            k = self.index[s] = len(self.sets)
            self.sets.append(s)
        return k

    def rebuild(self, snapshot: Snapshot) -> None:
        self.sets, self.index = [], {}
        self.ids = np.fromiter(
            (self._intern(avoided_controllers(info.node)) for info in snapshot.infos), np.int32, snapshot.n
        )

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        for i in rows:
            self.ids[i] = self._intern(avoided_controllers(snapshot.infos[i].node))
        if len(self.sets) > 64 + snapshot.n // 8:  # sets no row uses any more piled up: drop them
            self.rebuild(snapshot)

    def resize(self, snapshot: Snapshot, change: RowChange) -> None:
        """Nodes joined or left (docs/scheduler-scale.md#node-list): the ids follow their rows; new rows
        are refreshed next."""
        self.ids = change.array(self.ids)


class NodePreferAvoidPods:
    """Score plugin; see the module docstring."""

    @property
    def name(self) -> str:
        return NAME

    def score_all(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> IntArray:
        """Every row's score (the shared all-100 array when nothing applies)."""
        view = snapshot.view((NAME, "avoid"), AvoidSets)
        controller = pod_controller(pod)
        if controller is None or not any(view.sets):
            return uniform_scores(snapshot.n, MAX_NODE_SCORE)
        verdict = np.array([0 if controller in s else MAX_NODE_SCORE for s in view.sets], np.int64)
        return verdict[view.ids]
