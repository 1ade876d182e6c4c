"""Row changes for view tests, simulated independently of the production node list: nodes removed by
swap-with-last, nodes added by an append then a swap with a uniformly drawn row (whose node goes
last), and the resulting `RowChange` (its docstring's semantics). `move` drives the snapshot's
in-place path (`Snapshot.apply_nodes`, which resizes every registered view) and checks its rows and
change against `simulate`, so a test can compare the resized views with views rebuilt on the same
rows."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from apis.kubeobjects import Node, Pod
from scheduler.framework.rows import RowChange
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot


def simulate(
    infos: Sequence[NodeInfo], removed: Iterable[str], added: Sequence[NodeInfo], rng: random.Random
) -> tuple[list[NodeInfo], RowChange]:
    """The rows after removing the nodes named `removed`, then adding `added` (in order), and the
    change from `infos`' rows to those."""
    rows: list[tuple[int, NodeInfo]] = list(enumerate(infos))  # (old row or -1, node)
    for name in removed:
        at = next(k for k, (_, info) in enumerate(rows) if info.name == name)
        rows[at] = rows[-1]
        rows.pop()
    for info in added:
        rows.append((-1, info))
        j = rng.randint(0, len(rows) - 1)
        rows[j], rows[-1] = rows[-1], rows[j]
    take = np.array([old for old, _ in rows], np.int64)
    kept = {old for old, _ in rows}
    change = RowChange(
        take,
        tuple(r for r in range(len(infos)) if r not in kept),
        tuple((old, new) for new, (old, _) in enumerate(rows) if old >= 0 and old != new),
        tuple(new for new, (old, _) in enumerate(rows) if old < 0),
        len(infos),
        len(rows),
    )
    return [info for _, info in rows], change


def move(snapshot: Snapshot, added: Sequence[NodeInfo], rng: random.Random, removals: int) -> RowChange:
    """`removals` random nodes of `snapshot` leave and `added` join, in place (`Snapshot.apply_nodes`:
    every registered view is resized, then refreshed for the new rows). The rows and the change must
    be what `simulate` predicts with the snapshot's own rng (the same draws). The new nodes' resources
    must already have columns (else the snapshot rebuilds, which these tests are not about)."""
    assert all(r in snapshot.col for info in added for r in (*info.allocatable, *info.requested))
    gone = rng.sample(snapshot.names, min(removals, snapshot.n))
    model = random.Random()
    model.setstate(snapshot.rng.getstate())
    infos, want = simulate(snapshot.infos, gone, added, model)
    change = snapshot.apply_nodes(added, gone)
    assert snapshot.infos == infos and snapshot.names == [info.name for info in infos]
    assert change.take.tolist() == want.take.tolist()
    assert (change.removed, change.added) == (want.removed, want.added)
    assert sorted(change.moves) == sorted(want.moves)
    assert (change.old_n, change.n) == (want.old_n, want.n)
    return change


def new_node(
    node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]] = (), generation: int = 1
) -> NodeInfo:
    """A NodeInfo of `node` holding `pods`."""
    info = NodeInfo.of(cast(Node, node), generation)
    for p in pods:
        info.add_pod(PodInfo.of(cast(Pod, p)), generation)
    return info
