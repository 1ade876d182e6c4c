"""Snapshot-owned row data: a view is built on first use and kept aligned; a view that reads only Node
objects is refreshed for the rows whose Node object was replaced (in the cache's copies or in place),
one that reads pods for every re-copied row; a new layout rebuilds every view."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

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
    info.add_pod(PodInfo.of(pod), 1)
    snap.refresh([info])  # pods only
    assert nodes_only.calls[-1] == ("rebuild", [0, 1, 2]) and with_pods.calls[-1] == ("refresh", [1])
    info.set_node(node("b", unschedulable=True), 2)  # in place, as tests and the cache's copies do
    snap.refresh([info, snap.infos[2]])
    assert nodes_only.calls[-1] == ("refresh", [1]) and with_pods.calls[-1] == ("refresh", [1, 2])


def test_column_is_rederived_for_replaced_nodes_and_rebuilt_with_the_layout() -> None:
    snap = Snapshot.build([node("a"), node("b")])
    flag = lambda n: bool(n["spec"].get("unschedulable"))  # noqa: E731
    assert snap.column("u", flag, np.bool_).tolist() == [False, False]
    info = snap.infos[0]
    info.set_node(node("a", unschedulable=True), 1)
    snap.refresh([info])
    assert snap.column("u", flag, np.bool_).tolist() == [True, False]
    snap.rebuild([*snap.infos, Snapshot.build([node("c", unschedulable=True)]).infos[0]])
    assert snap.column("u", flag, np.bool_).tolist() == [True, False, True]
