"""What the differential harness records (docs/testing.md#the-kube-scheduler-oracle): a `Mismatch`, a
case's or a run's `Report` (counts and mismatches, as the JSON bench/scheduler_differential.py prints),
each copy's `Decision`, and the cluster as `Seen` before a pod's copies were decided; and koord's known
differences in wording (`KNOWN_REASONS`, applied by `known`).
Imports: standard library, tests.differential.checker.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tests.differential.checker import Cluster, Obj

# Known koord differences, each a reason string koord writes → the one kube-scheduler 1.20.2 writes,
# applied to koord's FitError messages before they are compared (and counted in Report.known). Deleting
# an entry turns its check back on.
KNOWN_REASONS: dict[str, str] = {}


def known(message: str) -> str:
    """koord's FitError message with KNOWN_REASONS replaced by kube's wording."""
    for koord_reason, kube_reason in KNOWN_REASONS.items():
        message = message.replace(koord_reason, kube_reason)
    return message


@dataclass
class Mismatch:
    seed: int
    pod: str
    # outcome, fit-error, constraint-kube, constraint-koord, feasible, in-process-fit-error, score, log,
    # harness-race
    kind: str
    kube: Any
    koord: Any
    detail: str = ""


@dataclass
class Report:
    seeds: int = 0
    pods: int = 0
    scheduled: int = 0
    unschedulable: int = 0
    scored_pods: int = 0
    score_comparisons: int = 0
    known: int = 0
    """FitError messages that matched only through KNOWN_REASONS."""
    preemptions: int = 0
    """Pods kube preempted for whose nominated node and victims were compared."""
    preemption_checks: int = 0
    """Unschedulable pods whose preemption (or its absence) was compared."""
    volume_pods_bound: int = 0
    """Pods with a claim kube bound (and whose claims the checker found bound to fitting PVs)."""
    volume_pods_refused: int = 0
    claims_bound: int = 0
    """Claims unbound when kube's copy came that its PreBind bound (the harness completing the bind)."""
    plugin_scores: dict[str, int] = field(default_factory=dict)
    """Per compared kube score plugin: node scores compared."""
    plugin_varied: dict[str, int] = field(default_factory=dict)
    """Per compared kube score plugin: pods whose scores kube logged were not all equal."""
    mismatches: list[Mismatch] = field(default_factory=list)
    families: list[str] = field(default_factory=list)

    def add(self, other: Report) -> None:
        for mine, theirs in (
            (self.plugin_scores, other.plugin_scores),
            (self.plugin_varied, other.plugin_varied),
        ):
            for plugin, n in theirs.items():
                mine[plugin] = mine.get(plugin, 0) + n
        self.preemptions += other.preemptions
        self.preemption_checks += other.preemption_checks
        self.volume_pods_bound += other.volume_pods_bound
        self.volume_pods_refused += other.volume_pods_refused
        self.claims_bound += other.claims_bound
        self.seeds += other.seeds
        self.pods += other.pods
        self.scheduled += other.scheduled
        self.unschedulable += other.unschedulable
        self.scored_pods += other.scored_pods
        self.score_comparisons += other.score_comparisons
        self.known += other.known
        self.mismatches.extend(other.mismatches)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["mismatches"] = len(self.mismatches)
        d["mismatch_details"] = [asdict(m) for m in self.mismatches]
        return d


@dataclass
class Decision:
    """A copy's first decision: `node`, or the FitError `message`. For kube's copy also: the node it was
    `nominated` to and the `victims` it deleted when it preempted, the node it was bound to at its
    retry (`final`), and the PVs and claims after its binding (`volumes`, when it has claims)."""

    node: str | None
    message: str | None
    pod: Obj
    nominated: str | None = None
    victims: list[str] = field(default_factory=list)
    final: str | None = None
    volumes: tuple[list[Obj], list[Obj]] | None = None

    @property
    def placed(self) -> str | None:
        return self.node or self.final

    def reread_as_retry(self) -> bool:
        """A pod first seen bound whose status names a nominated node: kube preempted, and its retry bound
        it before any read saw the failure (the victims' deletion moves it straight back to the queue,
        and binding turns its PodScheduled condition True). Turns it into that failed attempt, bound at
        its retry (`final`), as if seen in time — its FitError `message` is the condition's while it is
        still there, else None (the harness takes kube's logged one); True when it did."""
        status = self.pod.get("status") or {}
        nominated = status.get("nominatedNodeName")
        if self.node is None or not nominated:
            return False
        unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        failed = next(
            (
                c
                for c in status.get("conditions") or []
                if all(c.get(k) == v for k, v in unschedulable.items())
            ),
            {},
        )
        self.final, self.node, self.message, self.nominated = (
            self.node,
            None,
            failed.get("message"),
            nominated,
        )
        return True


@dataclass
class Seen:
    """The cluster as listed just before a pod's two copies were decided."""

    nodes: list[Obj]
    bound: list[Obj]
    pvs: list[Obj]
    pvcs: list[Obj]
    classes: list[Obj]
    pdbs: list[Obj]
    workloads: dict[str, list[Obj]] = field(default_factory=dict)
    """Services, RCs, ReplicaSets and StatefulSets by kind (they do not change during a case)."""

    def cluster(self, without: frozenset[str] = frozenset()) -> Cluster:
        pods = [p for p in self.bound if p["metadata"]["name"] not in without]
        return Cluster(self.nodes, pods, self.pvs, self.pvcs, self.classes)
