"""DefaultPreemption, kube-scheduler v1.20.2's PostFilter plugin
(docs/rules/scheduler-preemption.md#defaultpreemption).

When no node fits a pod, it looks for a node where deleting lower-priority pods would make room:
eligibility, the nodes where preemption might help, a sampled dry run of victim selection
(scheduler.plugins.defaultpreemption.victims) and the choice among candidates
(scheduler.plugins.defaultpreemption.candidates); nodes where no victims can make room are left out
of the walk first (scheduler.plugins.defaultpreemption.pruning, docs/rules/scheduler-preemption.md#pruning).
Success names the chosen node in its first reason (the framework's PostFilter contract); the
decision — victims to delete, lower-priority pods nominated to that node whose nomination is cleared —
is written to the cycle state as a `PreemptionResult`, and the gateway carries it out through a
`PreemptionAPI` (scheduler.plugins.defaultpreemption.effects). The plugin runs the profile's filters
itself, so the framework it belongs to is `attach`ed after both are built (kube's framework handle).
Imports: standard library, numpy, scheduler.framework, scheduler.plugins.defaultpreemption.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import NominatedPods, pre_filter_state, priority
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.plugins.defaultpreemption.args import DefaultPreemptionArgs
from scheduler.plugins.defaultpreemption.candidates import dry_run, eligible, pick_one, potential_array
from scheduler.plugins.defaultpreemption.pdb import PDB
from scheduler.plugins.defaultpreemption.pruning import fit_checks, hopeless, walk
from scheduler.plugins.defaultpreemption.victims import Candidate, Victims, select_victims_on_node

NAME: Final = "DefaultPreemption"
RESULT_KEY: Final = NAME + "/result"


@dataclass(frozen=True, slots=True)
class PreemptionResult:
    """What the gateway must do after a PostFilter: delete `victims`, clear the nomination of
    `clear_nominated` (lower-priority pods nominated to `node`), and nominate the pod to `node`; or,
    with `node` None and `clear_preemptor`, clear the pod's own nomination (preemption cannot help
    anywhere)."""

    node: str | None
    victims: tuple[Pod, ...] = ()
    clear_nominated: tuple[Pod, ...] = ()
    clear_preemptor: bool = False
    candidate: Candidate | None = None

    @classmethod
    def of(cls, state: CycleState) -> PreemptionResult | None:
        found = state.get(RESULT_KEY)
        return found if isinstance(found, PreemptionResult) else None


class DefaultPreemption:
    """PostFilter plugin; see the module docstring. `pdbs()` lists the cluster's PodDisruptionBudget
    objects, `nominated` the scheduler's nominated pods, `rng` draws the dry run's offset."""

    def __init__(
        self,
        args: DefaultPreemptionArgs | None = None,
        *,
        rng: random.Random | None = None,
        pdbs: Callable[[], Iterable[Mapping[str, Any]]] = lambda: (),
        nominated: NominatedPods | None = None,
        framework: Framework | None = None,
        prune: bool = True,
    ) -> None:
        self.args = args or DefaultPreemptionArgs()
        self.rng = rng or random.Random()
        self.pdbs = pdbs
        self.nominated = nominated if nominated is not None else NominatedPods()
        self.framework = framework
        self.prune = prune  # docs/rules/scheduler-preemption.md#pruning: off only to compare

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None, **kwargs: Any) -> Self:
        return cls(DefaultPreemptionArgs.from_args(args), **kwargs)

    @property
    def name(self) -> str:
        return NAME

    def attach(self, framework: Framework) -> None:
        """The framework whose Filter plugins decide whether the pod fits a node without its victims."""
        self.framework = framework

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status:
        fw = self.framework
        if fw is None:
            return Status.error("DefaultPreemption: no framework attached", plugin=NAME)
        if not eligible(pod, snapshot, statuses):
            return Status.unschedulable(plugin=NAME)
        if snapshot.n == 0:
            return Status.error("no nodes available to schedule pods", plugin=NAME)
        base = pre_filter_state(fw, pod, snapshot, state.now)
        if isinstance(base, Status):
            return Status.error(f"running PreFilter again: {base.message()}", plugin=NAME)
        candidates = self.find_candidates(fw, base, pod, snapshot, statuses)
        if candidates is None:
            state.write(RESULT_KEY, PreemptionResult(None, clear_preemptor=True))
            return Status.unschedulable(plugin=NAME)
        best = pick_one(candidates, state.now)
        if best is None:
            return Status.unschedulable(plugin=NAME)
        prio = priority(pod)
        lower = tuple(p for p in self.nominated.for_node(best.name) if priority(p) < prio)
        state.write(RESULT_KEY, PreemptionResult(best.name, best.victims.pods, lower, candidate=best))
        return Status(reasons=(best.name,), plugin=NAME)

    def find_candidates(
        self, fw: Framework, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: Mapping[str, Status]
    ) -> list[Candidate] | None:
        """kube's ``FindCandidates``: None when preemption can help on no node, else the dry run's
        candidates (non-violating first). `state` holds PreFilter's data only (`pre_filter_state`)."""
        rows = potential_array(snapshot, statuses)
        if not len(rows):
            return None
        pdbs = [PDB.of(o) for o in self.pdbs()]
        offset = self.rng.randrange(len(rows))  # kube's rand.Int31n(len(potentialNodes))
        num = self.args.num_candidates(len(rows))  # counted over the unpruned rows, as kube's
        # kube's walk less the rows where the search must fail (docs/rules/scheduler-preemption.md#pruning)
        order = walk(rows, offset, hopeless(fw, state, pod, snapshot) if self.prune else None)
        fit = fit_checks(fw, state) if self.prune else None
        resources = snapshot.resources

        def victims_of(i: int) -> Victims | None:
            info = snapshot.infos[i]
            nominated = self.nominated.for_node(info.name)
            return select_victims_on_node(fw, state, pod, info, pdbs, nominated, resources, fit)

        return dry_run(order, 0, num, victims_of, snapshot.names)
