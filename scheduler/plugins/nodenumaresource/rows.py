"""What NodeNUMAResource's vectorised Filter and Score read of every row, as numpy columns: from the
Node objects (cached snapshot columns, rebuilt only for the rows whose Node object changed: the cpu
amplification ratio, a forcing bind-policy label, a NUMA policy label) and from the plugin's NUMACache
(valid topologies, kubelets that force full cores, the CPUs each node's pods hold)
(docs/rules/scheduler-nodenumaresource.md#filter, #score).
Imports: the standard library, numpy, apis.numa, scheduler.framework.snapshot, this package.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from apis.numa import (
    LABEL_CPU_BIND_POLICY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    NODE_BIND_FULL_PCPUS_ONLY,
    NODE_BIND_SPREAD_BY_PCPUS,
    PLUGIN_NAME,
)
from scheduler.framework.snapshot import Snapshot
from scheduler.plugins.nodenumaresource.cache import NUMACache
from scheduler.plugins.nodenumaresource.filtering import cpu_ratio
from scheduler.plugins.nodenumaresource.prefilter import PodState
from scheduler.plugins.nodenumaresource.scoring import F64, I64, Bools, ScoreRows


def _meta(node: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return (node.get("metadata") or {}).get(key) or {}


def node_cpu_ratio(node: Mapping[str, Any]) -> float:
    """The Node object's cpu amplification ratio: -1 unset, NaN when the annotation does not decode."""
    try:
        return cpu_ratio(_meta(node, "annotations"))
    except ValueError:
        return math.nan


def _label_forces(node: Mapping[str, Any]) -> bool:
    """A ``cpu-bind-policy`` label that forces binding (the kubelet's part is NUMACache.forcing)."""
    return _meta(node, "labels").get(LABEL_CPU_BIND_POLICY) in (
        NODE_BIND_FULL_PCPUS_ONLY,
        NODE_BIND_SPREAD_BY_PCPUS,
    )


def _numa_label(node: Mapping[str, Any]) -> bool:
    """A NUMA topology policy label: matters to Filter for a binding pod or a pod with its own policy."""
    return bool(_meta(node, "labels").get(LABEL_NUMA_TOPOLOGY_POLICY))


def ratios(snapshot: Snapshot) -> F64:
    return snapshot.column((PLUGIN_NAME, "cpu-ratio"), node_cpu_ratio, np.float64)


def _named(snapshot: Snapshot, names: Iterable[str]) -> Bools:
    out = np.zeros(snapshot.n, np.bool_)
    index = snapshot.index
    out[[i for name in names if (i := index.get(name)) is not None]] = True
    return out


def forced_rows(snapshot: Snapshot, cache: NUMACache) -> Bools:
    """Nodes whose bind policy is not None: they make a pod that requests cpu bind."""
    label = snapshot.column((PLUGIN_NAME, "bind-label"), _label_forces, np.bool_)
    return label | _named(snapshot, cache.forcing) if cache.forcing else label.copy()


def valid_rows(snapshot: Snapshot, cache: NUMACache) -> Bools:
    """Nodes with a valid CPU topology."""
    return _named(snapshot, cache.valid)


def acting_rows(snapshot: Snapshot, cache: NUMACache, numa: bool) -> list[int]:
    """Rows where Filter can differ from the plain case, ascending: nodes that force binding or whose
    amplification annotation is bad or amplifies cpu (a ratio not ≤ 1), and with ``numa`` those with
    a NUMA topology policy."""
    column = forced_rows(snapshot, cache) | ~(ratios(snapshot) <= 1)
    if numa:
        column |= snapshot.column((PLUGIN_NAME, "numa"), _numa_label, np.bool_) | _named(snapshot, cache.numa)
    return np.flatnonzero(column).tolist()


def _held(cache: NUMACache, name: str) -> int:
    """CPUs the node's pods hold: 0 without a NodeResourceTopology, -1 when its topology is invalid."""
    opts = cache.options.get(name)
    if opts is None:
        return 0
    if not opts.topology.valid:
        return -1
    found = cache.allocations.get(name)
    return 0 if found is None else len(found.cpus)


def score_rows_of(snapshot: Snapshot, cache: NUMACache, state: PodState) -> ScoreRows:
    """Score's per-row inputs for this pod; the CPUs held are looked up only on the rows whose cpu is
    amplified, where they count (docs/rules/scheduler-nodenumaresource.md#score)."""
    n = snapshot.n
    ratio = ratios(snapshot)
    none = np.zeros(n, np.bool_)
    bind, refused = none, none
    if state.request_cpu_bind:
        bind = np.ones(n, np.bool_)
    elif state.cpu_milli:
        forced = forced_rows(snapshot, cache)
        if state.cpu_milli % 1000:
            refused = forced
        else:
            bind = forced
    valid = valid_rows(snapshot, cache) if bind.any() else np.ones(n, np.bool_)
    held: I64 = np.zeros(n, np.int64)
    if state.cpu_milli:
        amplified = np.flatnonzero(ratio > 1)
        names = snapshot.names
        held[amplified] = np.fromiter((_held(cache, names[i]) for i in amplified), np.int64, len(amplified))
    return ScoreRows(ratio, bind, refused, valid, held)
