"""Oracle for NodeNUMAResource's Score (docs/rules/scheduler-nodenumaresource.md#score): one node at a
time in plain Python integers, as the rule reads. This was the production per-node form before Score
became one vectorised formula (scheduler/plugins/nodenumaresource/scoring.py); the tests hold that
formula to it. ``score_node`` reads the node through the plugin's NodeFacts; ``score_facts`` takes the
facts already worked out (what the vectorised form gets as columns)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from scheduler.plugins.nodenumaresource.filtering import NodeFacts, cpu_ratio, request_cpu_bind
from scheduler.plugins.nodenumaresource.prefilter import PodState
from scheduler.plugins.nodenumaresource.scoring import MOST_ALLOCATED, ScoringStrategy

_NATIVE = ("cpu", "memory", "ephemeral-storage")


def _scored(strategy: ScoringStrategy, pod: Mapping[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name, weight in strategy.resources:
        scalar = "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))
        if name in _NATIVE or (scalar and pod.get(name, 0) != 0):
            out[name] = weight  # the last weight of a name given twice
    return out


def score_values(
    strategy: ScoringStrategy,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
    pod: Mapping[str, int],
) -> int:
    """One node's score (requested = the node's pods, without the incoming pod)."""
    total = weights = 0
    for name, weight in _scored(strategy, pod).items():
        alloc = allocatable.get(name, 0)
        if alloc == 0:
            continue
        req = requested.get(name, 0) + pod.get(name, 0)
        if strategy.type == MOST_ALLOCATED:
            score = min(req, alloc) * 100 // alloc
        else:
            score = 0 if req > alloc else (alloc - req) * 100 // alloc
        total += score * weight
        weights += weight
    return total // weights if weights else 0


def _amplify(origin: int, ratio: float) -> int:
    return origin if ratio <= 1 else math.ceil(float(origin) * ratio)


def score_facts(
    strategy: ScoringStrategy,
    state: PodState,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
    *,
    ratio: float,
    bind: bool,
    refused: bool,
    valid: bool,
    held: int | None,
) -> int:
    """One node's score from its facts: ``ratio`` NaN when the annotation does not decode, ``held``
    None when the topology is present but invalid."""
    if state.skip or refused or (bind and not valid) or math.isnan(ratio):
        return 0
    pod = dict(state.requests)
    if state.cpu_milli == 0 or ratio <= 1:
        return score_values(strategy, requested, allocatable, pod)
    if held is None:
        return 0
    if bind:
        pod["cpu"] = _amplify(pod["cpu"], ratio)
    req = dict(requested)
    req["cpu"] = req.get("cpu", 0) - held * 1000 + _amplify(held * 1000, ratio)
    return score_values(strategy, req, allocatable, pod)


def score_node(
    state: PodState,
    facts: NodeFacts,
    strategy: ScoringStrategy,
    requested: Mapping[str, int],
    allocatable: Mapping[str, int],
) -> int:
    """One node's Score, its facts read from NodeFacts."""
    bind, status = request_cpu_bind(state, facts.node_bind_policy)
    try:
        ratio = cpu_ratio(facts.annotations)
    except ValueError:
        ratio = math.nan
    return score_facts(
        strategy,
        state,
        requested,
        allocatable,
        ratio=ratio,
        bind=bind,
        refused=status is not None,
        valid=facts.topology_valid,
        held=facts.allocated_cpus(),
    )
