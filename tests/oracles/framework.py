"""An oracle scheduler: the production profile with every plugin replaced by its per-node oracle
(tests/oracles/: plugins, basic, noderesources_scores, topologyspread, loadaware). The production
Framework runs per-node plugins node by node, so this is the readable form of the whole profile;
bench/scheduler_throughput.py and the scheduler tests compare its decisions with the production
plugins'.
"""

from __future__ import annotations

import copy

from scheduler.framework.interfaces import Plugin
from scheduler.framework.runtime import Framework
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.loadaware import LoadAwareScheduling
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.selectorspread import SelectorSpread
from tests.oracles import basic, nodepool, noderesources_scores
from tests.oracles.interpodaffinity import InterPodAffinityOracle
from tests.oracles.loadaware import LoadAwareOracle
from tests.oracles.plugins import oracle_for
from tests.oracles.topologyspread import PodTopologySpreadOracle, SelectorSpreadOracle


def oracle_of(plugin: Plugin) -> Plugin:
    """The plugin's oracle; a plugin without one (no Filter/Score rule) is kept as it is."""
    if isinstance(plugin, LoadAwareScheduling):
        return LoadAwareOracle(plugin)
    if isinstance(plugin, InterPodAffinity):
        return InterPodAffinityOracle(plugin.args.hard_pod_affinity_weight)
    if isinstance(plugin, PodTopologySpread):
        return PodTopologySpreadOracle(plugin)
    if isinstance(plugin, SelectorSpread):
        return SelectorSpreadOracle(plugin)
    # noderesources_scores first: its NodeResourcesFit oracle follows the plugin's args.
    for lookup in (noderesources_scores.oracle_for, basic.oracle_for, nodepool.oracle_for, oracle_for):
        found = lookup(plugin)
        if found is not None:
            return found
    return plugin


def oracle_framework(framework: Framework) -> Framework:
    """A Framework of the oracles of `framework`'s plugins, same order and score weights (the
    production plugins stay inside where an oracle reads their caches). Its random generator starts
    where `framework`'s is: taking the same decisions, the two draw the same nodes among ties."""
    weights = {p.name: w for p, w in zip(framework.scores, framework.weights, strict=True)}
    plugins = [oracle_of(p) for p in framework.plugins]
    return Framework(plugins, weights, framework.observer, copy.deepcopy(framework.rng))
