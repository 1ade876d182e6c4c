"""Snapshot-owned row data: a view is built on first use and kept aligned; a view that reads only Node
objects is refreshed for the rows whose Node object was replaced (in the cache's copies or in place),
one that reads pods for every re-copied row; a new layout rebuilds every view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from apis.kubeobjects import Node, Pod
from scheduler.framework.snapshot import PodInfo, Snapshot


def node(name: str, unschedulable: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


class Recorder:
    def __init__(self, reads_pods: bool) -> None:
        self.reads_pods = reads_pods
        self.calls: list[tuple[str, list[int]]] = []

    def rebuild(self, snapshot: Snapshot) -> None:
        self.calls.append(("rebuild", list(range(snapshot.n))))

    def refresh(self, snapshot: Snapshot, rows: Sequence[int]) -> None:
        self.calls.append(("refresh", list(rows)))


def test_views_follow_node_and_pod_changes() -> None:
    snap = Snapshot.build([node("a"), node("b"), node("c")])
    nodes_only = snap.view("n", lambda: Recorder(False))
    with_pods = snap.view("p", lambda: Recorder(True))
    assert snap.view("n", lambda: Recorder(False)) is nodes_only  # made once
    assert nodes_only.calls == with_pods.calls == [("rebuild", [0, 1, 2])]
    pod = {"metadata": {"name": "x", "namespace": "ns"}, "spec": {"nodeName": "b", "containers": []}}
    info = snap.infos[1]
    info.add_pod(PodInfo.of(cast(Pod, pod)), 1)
    snap.refresh([info])  # pods only
    assert nodes_only.calls[-1] == ("rebuild", [0, 1, 2]) and with_pods.calls[-1] == ("refresh", [1])
    info.set_node(cast(Node, node("b", unschedulable=True)), 2)  # in place, as tests and cache copies do
    snap.refresh([info, snap.infos[2]])
    assert nodes_only.calls[-1] == ("refresh", [1]) and with_pods.calls[-1] == ("refresh", [1, 2])


def test_column_is_rederived_for_replaced_nodes_and_rebuilt_with_the_layout() -> None:
    snap = Snapshot.build([node("a"), node("b")])
    flag = lambda n: bool(n["spec"].get("unschedulable"))  # noqa: E731
    assert snap.column("u", flag, np.bool_).tolist() == [False, False]
    info = snap.infos[0]
    info.set_node(cast(Node, node("a", unschedulable=True)), 1)
    snap.refresh([info])
    assert snap.column("u", flag, np.bool_).tolist() == [True, False]
    snap.rebuild([*snap.infos, Snapshot.build([node("c", unschedulable=True)]).infos[0]])
    assert snap.column("u", flag, np.bool_).tolist() == [True, False, True]


# --- the pod views follow the cache's pod changes (Snapshot.pod_changes) ---------------------------------
def _pod(name: str, node: str, app: str, anti: bool, ns: str = "ns") -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": []}
    if anti:
        term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {"metadata": {"name": name, "namespace": ns, "uid": name, "labels": {"app": app}}, "spec": spec}


def _affinity_state(v: Any) -> Any:
    rows = sorted((i, k, id(e.pod), e.row) for i, row in enumerate(v.rows) for k, e in row.items())
    indexes = [{k: sorted(d) for k, d in index.items()} for index in (v.by_ns, v.by_key, v.by_label)]
    groups = {repr(g): sorted((k, pos, e.row) for (k, pos), e in m.items()) for g, m in v.groups.items()}
    return rows, indexes, groups, sorted(map(repr, v.anti_groups)), sorted(map(repr, v.score_groups))


def _spread_state(v: Any) -> Any:
    rows = sorted((i, k, id(obj), int(v.slot_row[s]) if s >= 0 else -1)
                  for i, row in enumerate(v.rows) for k, (s, obj) in row.items())  # fmt: skip
    indexes = [{k: sorted(int(v.slot_row[s]) for s in d) for k, d in index.items()}
               for index in (v.by_ns, v.by_key, v.by_label)]  # fmt: skip
    return rows, indexes


OPS, APPS = st.sampled_from(["add", "delete", "sync", "leave", "join"]), st.sampled_from(["a", "b"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(OPS, st.integers(0, 5), st.integers(0, 3), APPS, st.booleans()), max_size=40))
@example([("add", 1, 0, "a", True), ("sync", 0, 0, "a", False), ("add", 1, 0, "b", True)])  # replaced
def test_pod_views_follow_cache_changes_like_a_rebuild(ops: list[tuple[str, int, int, str, bool]]) -> None:
    """Each sync re-copies the changed rows; the two pod views (InterPodAffinity's, PodTopologySpread's)
    then hold what views built from scratch over the same snapshot hold: pods added, deleted, replaced
    (a new object under the key: relabelled, or moved to another node) on rows changed several times,
    and with nodes leaving and joining in the same update (Snapshot.apply_nodes)."""
    from scheduler.cache import SchedulerCache
    from scheduler.plugins.interpodaffinity.podindex import PodIndex as AffinityIndex
    from scheduler.plugins.podtopologyspread.podindex import PodIndex as SpreadIndex

    cache = SchedulerCache()
    for n in range(4):
        cache.add_node(cast(Node, node(f"n{n}")))
    snap = Snapshot()
    cache.update_snapshot(snap)
    affinity, spread = snap.view("a", AffinityIndex), snap.view("s", SpreadIndex)
    for op, k, n, app, anti in [*ops, ("sync", 0, 0, "a", False)]:
        if op == "add":  # a new pod, or a new object for one already there (moved or relabelled)
            cache.add_pod(cast(Pod, _pod(f"p{k}", f"n{n}", app, anti, "ns" if k % 3 else "other")))
        elif op == "delete":
            cache.remove_pod(f"{'ns' if k % 3 else 'other'}/p{k}")
        elif op == "leave":  # its pods stay in the cache, on no row
            cache.remove_node(f"n{n}")
        elif op == "join":
            cache.add_node(cast(Node, node(f"n{n}")))
        else:
            cache.update_snapshot(snap)
            fresh_affinity, fresh_spread = AffinityIndex(), SpreadIndex()
            fresh_affinity.rebuild(snap)
            fresh_spread.rebuild(snap)
            assert _affinity_state(affinity) == _affinity_state(fresh_affinity)
            assert _spread_state(spread) == _spread_state(fresh_spread)
