"""Oracles for PodTopologySpread and SelectorSpread (docs/rules/scheduler-spread.md): kube-scheduler
v1.20.2's rules node by node, in plain Python over the snapshot's NodeInfos — maps keyed by
(topology key, value) filled by walking every node and every pod, critical paths as the minimum over
those maps, selectors matched with apis.labelselector on the raw objects, the default selector
re-derived from the stored Services/RCs/RSs/StatefulSets. Go's ``math.Log`` is the production
``go_log`` (pinned against Go's own values by its unit test). `spread_oracle_for` maps a production
plugin to its oracle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.labelselector import LabelSelector, LabelSelectorError
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import IntArray, Plugin, Pod
from scheduler.framework.listers import (
    REPLICA_SET,
    REPLICATION_CONTROLLER,
    SERVICE,
    STATEFUL_SET,
    ClusterObjects,
)
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, Status
from scheduler.plugins.nodeaffinity import NodeAffinity
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.podtopologyspread.constraints import DefaultConstraint, go_log
from scheduler.plugins.selectorspread import SelectorSpread
from tests.oracles.plugins import oracle_for

HOSTNAME = "kubernetes.io/hostname"
NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
REASON_LABEL = REASON + " (missing required label)"

# A selector: ("set", {k: v}) ANDed with requirements — kept as a list of predicates over labels.
Matcher = list[LabelSelector] | None  # None: matches nothing


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def labels(obj: Mapping[str, Any]) -> dict[str, str]:
    raw = _map(_map(obj.get("metadata")).get("labels"))
    return {str(k): v if isinstance(v, str) else "" for k, v in raw.items()}


def namespace(obj: Mapping[str, Any]) -> str:
    ns = _map(obj.get("metadata")).get("namespace")
    return ns if isinstance(ns, str) else ""


def matches(m: Matcher, lbls: Mapping[str, str]) -> bool:
    return m is not None and all(s.matches(lbls) for s in m)


def default_selector(objects: ClusterObjects | None, pod: Pod) -> Matcher:
    """helper.DefaultSelector, spelled out; an empty result is []."""
    if objects is None:
        return []
    ns, pl = namespace(pod), labels(pod)
    merged: dict[str, str] = {}
    for svc in objects.objects(SERVICE, ns):
        sel = _map(svc.get("spec")).get("selector")
        if isinstance(sel, Mapping) and all(pl.get(k) == v for k, v in sel.items()):
            merged.update(sel)
    if pl:
        for rc in objects.objects(REPLICATION_CONTROLLER, ns):
            sel = _map(_map(rc.get("spec")).get("selector"))
            if sel and all(pl.get(k) == v for k, v in sel.items()):
                merged.update(sel)
    out = [LabelSelector(merged)] if merged else []
    for kind in (REPLICA_SET, STATEFUL_SET):
        if not pl:
            continue
        found: list[LabelSelector] = []
        try:
            for obj in objects.objects(kind, ns):
                raw = _map(obj.get("spec")).get("selector")
                if raw is None:
                    continue
                sel = LabelSelector.from_dict(raw)
                if not sel.is_empty() and sel.matches(pl):
                    found.append(sel)
        except LabelSelectorError:
            found = []  # the lister fails: no selector of this kind
        out += [s for s in found if not s.is_empty()]
    return out


def constraints(
    pod: Pod, action: str, defaults: tuple[DefaultConstraint, ...], objects: ClusterObjects | None
) -> list[tuple[int, str, Matcher]]:
    raw = _map(pod.get("spec")).get("topologySpreadConstraints")
    if isinstance(raw, list) and raw:
        out = []
        for c in raw:
            if c.get("whenUnsatisfiable") != action:
                continue
            sel = c.get("labelSelector")
            out.append(
                (
                    int(c.get("maxSkew") or 0),
                    str(c.get("topologyKey")),
                    None if sel is None else [LabelSelector.from_dict(sel)],
                )
            )
        return out
    chosen = [d for d in defaults if d.when_unsatisfiable == action]
    sel = default_selector(objects, pod)
    if not chosen or not sel:
        return []
    return [(d.max_skew, d.topology_key, sel) for d in chosen]


def count(info: NodeInfo, m: Matcher, ns: str) -> int:
    return sum(
        1
        for p in info.pods.values()
        if _map(p.pod.get("metadata")).get("deletionTimestamp") is None
        and namespace(p.pod) == ns
        and matches(m, labels(p.pod))
    )


def _eligible(pod: Pod, snapshot: Snapshot, i: int) -> bool:
    affinity = oracle_for(NodeAffinity())
    return affinity.filter(CycleState(0.0), pod, snapshot, i).is_success()  # type: ignore[union-attr]


class PodTopologySpreadOracle:
    def __init__(self, plugin: PodTopologySpread) -> None:
        self.defaults = plugin.defaults
        self.objects = plugin.objects

    @property
    def name(self) -> str:
        return NAME

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        try:
            cs = constraints(pod, "DoNotSchedule", self.defaults, self.objects)
        except LabelSelectorError as e:
            return Status.error(str(e), plugin=NAME)
        pairs: dict[tuple[str, str], int] = {}
        for i, info in enumerate(snapshot.infos):
            nl = labels(info.node)
            if not _eligible(pod, snapshot, i) or any(k not in nl for _, k, _ in cs):
                continue
            for _, k, _ in cs:
                pairs.setdefault((k, nl[k]), 0)
        for info in snapshot.infos:  # every node: v1.20.2 checks only that the domain exists
            nl = labels(info.node)
            for _, k, m in cs:
                pair = (k, nl.get(k, ""))  # a missing label reads as "" (a Go map lookup)
                if pair in pairs:
                    pairs[pair] += count(info, m, namespace(pod))
        mins: dict[str, int] = {k: 2**31 - 1 for _, k, _ in cs}
        for (k, _), n in pairs.items():
            mins[k] = min(mins[k], n)
        state.write("oracle" + NAME, (cs, pairs, mins))
        return Status.success()

    def filter(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> Status:
        if state.get("oracle" + NAME) is None:
            st = self.pre_filter(state, pod, snapshot)
            if not st.is_success():
                return st
        cs, pairs, mins = state.read("oracle" + NAME)  # type: ignore[misc]
        nl = labels(snapshot.infos[i].node)
        for skew, k, m in cs:
            if k not in nl:
                return Status.unresolvable(REASON_LABEL, plugin=NAME)
            me = 1 if matches(m, labels(pod)) else 0
            if pairs.get((k, nl[k]), 0) + me - mins[k] > skew:
                return Status.unschedulable(REASON, plugin=NAME)
        return Status.success()

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        cs = constraints(pod, "ScheduleAnyway", self.defaults, self.objects)
        ignored: set[int] = set()
        pairs: dict[tuple[str, str], int] = {}
        size = [0] * len(cs)
        for i in feasible.tolist():
            nl = labels(snapshot.infos[i].node)
            if any(k not in nl for _, k, _ in cs):
                ignored.add(i)
                continue
            for j, (_, k, _) in enumerate(cs):
                if k != HOSTNAME and (k, nl[k]) not in pairs:
                    pairs[(k, nl[k])] = 0
                    size[j] += 1
        weights = [
            go_log(float((len(feasible) - len(ignored) if k == HOSTNAME else size[j]) + 2))
            for j, (_, k, _) in enumerate(cs)
        ]
        for i, info in enumerate(snapshot.infos):
            nl = labels(info.node)
            if not _eligible(pod, snapshot, i) or any(k not in nl for _, k, _ in cs):
                continue
            for _, k, m in cs:
                if (k, nl[k]) in pairs:
                    pairs[(k, nl[k])] += count(info, m, namespace(pod))
        state.write("oracleScore" + NAME, (cs, ignored, pairs, weights, feasible.tolist()))
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        cs, ignored, pairs, weights, _ = state.read("oracleScore" + NAME)  # type: ignore[misc]
        if i in ignored:
            return 0, Status.success()
        info = snapshot.infos[i]
        nl = labels(info.node)
        total = 0.0
        for (skew, k, m), w in zip(cs, weights, strict=True):
            cnt = count(info, m, namespace(pod)) if k == HOSTNAME else pairs[(k, nl[k])]
            total += float(cnt) * w + float(skew - 1)
        return int(total), Status.success()

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        _, ignored, _, _, rows = state.read("oracleScore" + NAME)  # type: ignore[misc]
        lo, hi = 2**63 - 1, 0
        for i, s in zip(rows, scores.tolist(), strict=True):
            if i not in ignored:
                lo, hi = min(lo, s), max(hi, s)
        for j, (i, s) in enumerate(zip(rows, scores.tolist(), strict=True)):
            if i in ignored:
                scores[j] = 0
            elif hi == 0:
                scores[j] = MAX_NODE_SCORE
            else:
                scores[j] = MAX_NODE_SCORE * (hi + lo - s) // hi
        return Status.success()


def zone_key(node: Mapping[str, Any]) -> str:
    nl = labels(node)
    zone = nl.get("failure-domain.beta.kubernetes.io/zone", nl.get("topology.kubernetes.io/zone", ""))
    region = nl.get("failure-domain.beta.kubernetes.io/region", nl.get("topology.kubernetes.io/region", ""))
    return "" if not region and not zone else region + ":\x00:" + zone


class SelectorSpreadOracle:
    def __init__(self, plugin: SelectorSpread) -> None:
        self.objects = plugin.objects

    @property
    def name(self) -> str:
        return "SelectorSpread"

    @staticmethod
    def _skip(pod: Pod) -> bool:
        return bool(_map(pod.get("spec")).get("topologySpreadConstraints"))

    def pre_score(self, state: CycleState, pod: Pod, snapshot: Snapshot, feasible: IntArray) -> Status:
        if not self._skip(pod):
            state.write(
                "oracleSelectorSpread", (default_selector(self.objects, pod), feasible.tolist(), snapshot)
            )
        return Status.success()

    def score(self, state: CycleState, pod: Pod, snapshot: Snapshot, i: int) -> tuple[int, Status]:
        if self._skip(pod):
            return 0, Status.success()
        sel, _, _ = state.read("oracleSelectorSpread")  # type: ignore[misc]
        if not sel:
            return 0, Status.success()
        return count(snapshot.infos[i], sel, namespace(pod)), Status.success()

    def normalize_scores(self, state: CycleState, pod: Pod, scores: IntArray) -> Status:
        if self._skip(pod):
            return Status.success()
        _, rows, snapshot = state.read("oracleSelectorSpread")  # type: ignore[misc]
        by_zone: dict[str, int] = {}
        max_node = 0
        for i, s in zip(rows, scores.tolist(), strict=True):
            max_node = max(max_node, s)
            z = zone_key(snapshot.infos[i].node)
            if z:
                by_zone[z] = by_zone.get(z, 0) + s
        max_zone = max([0, *by_zone.values()])
        for j, (i, s) in enumerate(zip(rows, scores.tolist(), strict=True)):
            f = 100.0
            if max_node > 0:
                f = 100.0 * (float(max_node - s) / float(max_node))
            z = zone_key(snapshot.infos[i].node)
            if by_zone and z:
                zs = 100.0
                if max_zone > 0:
                    zs = 100.0 * (float(max_zone - by_zone[z]) / float(max_zone))
                f = (f * (1.0 - 2.0 / 3.0)) + (2.0 / 3.0 * zs)
            scores[j] = int(f)
        return Status.success()


def spread_oracle_for(plugin: Plugin) -> Plugin | None:
    if isinstance(plugin, PodTopologySpread):
        return PodTopologySpreadOracle(plugin)
    if isinstance(plugin, SelectorSpread):
        return SelectorSpreadOracle(plugin)
    return None
