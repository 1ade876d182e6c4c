"""koord-scheduler against the real kube-scheduler v1.20.2 on a small seed set
(docs/testing.md#the-kube-scheduler-oracle; `bench/scheduler_differential.py --seeds N` runs a large one):
for every pending pod of every seed, the same outcome and FitError message, placements that pass the
independent checker, and koord's in-process feasible nodes and per-plugin scores equal to kube's logged ones.
"""

from __future__ import annotations

import json

import pytest

from tests.differential.harness import Differential, Report

pytestmark = [pytest.mark.apiserver, pytest.mark.differential]

# Chosen so that every comparison runs in about the time four seeds took before preemption and local
# volumes were compared (a preemption waits for kube's retry, a claim for its PreBind's 1 s poll): seed 5
# preempts (kube deletes a victim) and binds an unbound local-PV claim; all three refuse volume pods;
# seeds 10 and 14 give ImageLocality, SelectorSpread and NodePreferAvoidPods unequal scores to compare.
SEEDS = (5, 10, 14)
# The score plugins only the score-only families exercise (tests/differential/scorefamilies.py).
SCORE_FAMILY_PLUGINS = ("ImageLocality", "SelectorSpread", "NodePreferAvoidPods")


@pytest.fixture(scope="module")
def reports(differential: Differential) -> dict[int, Report]:
    """Each seed's report, run once."""
    return {}


def report_of(differential: Differential, reports: dict[int, Report], seed: int) -> Report:
    if seed not in reports:
        reports[seed] = differential.run(seed)
    return reports[seed]


@pytest.mark.parametrize("seed", SEEDS)
def test_koord_decides_as_kube_scheduler(
    differential: Differential, reports: dict[int, Report], seed: int
) -> None:
    report = report_of(differential, reports, seed)
    assert report.pods == 12
    details = json.dumps(report.as_dict()["mismatch_details"], indent=1, default=str)
    assert not report.mismatches, f"seed {seed}: {len(report.mismatches)} mismatch(es):\n{details}"


def test_the_seed_set_exercises_every_comparison(
    differential: Differential, reports: dict[int, Report]
) -> None:
    """The small set is not vacuous: pods bind and fail, kube scores several nodes and those scores are
    compared; kube preempts and its choice is compared with koord's candidates; local-PV pods bind
    (kube binding a claim at PreBind, the harness completing it) and are refused; ImageLocality,
    SelectorSpread and NodePreferAvoidPods scores are compared, on pods whose scores differ by node."""
    total = Report()
    for seed in SEEDS:
        total.add(report_of(differential, reports, seed))
    assert total.scheduled >= 10 and total.unschedulable >= 5
    assert total.scored_pods >= 8 and total.score_comparisons >= 25
    assert total.preemptions >= 1 and total.preemption_checks > total.preemptions
    assert total.volume_pods_bound >= 1 and total.claims_bound >= 1 and total.volume_pods_refused >= 1
    for plugin in SCORE_FAMILY_PLUGINS:
        assert total.plugin_scores.get(plugin, 0) >= 25, (plugin, total.plugin_scores)
        assert total.plugin_varied.get(plugin, 0) >= 3, (plugin, total.plugin_varied)
