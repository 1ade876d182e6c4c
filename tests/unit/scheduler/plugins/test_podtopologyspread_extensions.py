"""PodTopologySpread's PreFilter extensions
(docs/rules/scheduler-spread.md#podtopologyspread-prefilter-extensions): kube-scheduler 1.20.2's
criticalPaths.update and updateWithPod, case by case."""

from __future__ import annotations

from typing import Any, cast

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import filters_on_node
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.podtopologyspread import PodTopologySpread
from scheduler.plugins.podtopologyspread.filtering import PRE_FILTER_STATE_KEY, FilterState, update_paths
from tests.unit.scheduler.plugins._support import make_node

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
REASON = "node(s) didn't match pod topology spread constraints"


def pod(name: str, node: str | None = None, ns: str = "ns", app: str = "web", **meta: Any) -> Pod:
    spec: Obj = {"containers": []}
    if node is not None:
        spec["nodeName"] = node
    return cast(
        Pod, {"metadata": {"name": name, "namespace": ns, "labels": {"app": app}, **meta}, "spec": spec}
    )


def incoming(*keys: str, skew: int = 1) -> Pod:
    p = pod("in")
    p["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": skew,
            "topologyKey": k,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
        for k in keys
    ]
    return p


def test_critical_paths_update_as_kube() -> None:
    start = (("", 2**31 - 1), ("", 2**31 - 1))
    p = update_paths(start, "a", 1)
    assert p == (("a", 1), ("", 2**31 - 1))
    p = update_paths(p, "b", 2)
    assert p == (("a", 1), ("b", 2))
    assert update_paths(p, "c", 3) == p  # not below either path
    assert update_paths(p, "c", 0) == (("c", 0), ("a", 1))  # a new minimum pushes the old one down
    assert update_paths(p, "c", 1) == (("a", 1), ("c", 1))  # below paths[1] only
    assert update_paths(p, "a", 3) == (("b", 2), ("a", 3))  # the minimum grows past paths[1]: swapped
    assert update_paths(p, "a", 2) == (("a", 2), ("b", 2))  # equal: no swap
    # Several values changed: the paths forget the third domain, as kube's two paths do
    # (a=1, b=2, c=3 → a=4 and b=4 leave min at 4 though c has 3).
    p = (("a", 1), ("b", 2))
    for value, num in (("a", 2), ("a", 3), ("b", 3), ("b", 4), ("a", 4)):
        p = update_paths(p, value, num)
    assert p[0][1] == 4


def cluster() -> tuple[Snapshot, list[Obj]]:
    nodes = [
        make_node("n1", labels={ZONE: "z1", HOST: "n1"}),
        make_node("n2", labels={ZONE: "z1", HOST: "n2"}),
        make_node("n3", labels={ZONE: "z2", HOST: "n3"}),
        make_node("n4", labels={ZONE: "z2"}),  # no hostname
    ]
    pods = [pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("d", "n4")]
    return Snapshot.build(nodes, pods), nodes


def state_for(snap: Snapshot, p: Pod) -> tuple[PodTopologySpread, CycleState, FilterState]:
    plugin = PodTopologySpread()
    state = CycleState(0.0)
    assert plugin.pre_filter(state, p, snap).is_success()
    found = state.read(PRE_FILTER_STATE_KEY)
    assert isinstance(found, FilterState)
    return plugin, state, found


def counts(s: FilterState, key: str) -> dict[str, int]:
    assert s.pair_counts is not None and s.index is not None and s.exists is not None
    return {v: int(s.pair_counts[key][c]) for v, c in s.index[key].items() if s.exists[key][c]}


def test_remove_and_add_change_counts_and_min_on_a_clone_only() -> None:
    snap, _ = cluster()
    p = incoming(ZONE)
    plugin, state, original = state_for(snap, p)
    assert counts(original, ZONE) == {"z1": 3, "z2": 1}  # n4 (no hostname) counts: one key only here
    assert original.min_match == {ZONE: 1}
    clone = state.clone()
    n1 = snap.infos[0].copy()
    for name in ("a", "b"):
        assert plugin.remove_pod(clone, p, pod(name, "n1"), n1).is_success()
    s = clone.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, FilterState)
    assert counts(s, ZONE) == {"z1": 1, "z2": 1}
    assert s.min_match == {ZONE: 1} and s.paths is not None and s.paths[ZONE][0][1] == 1
    assert plugin.add_pod(clone, p, pod("x", "n3"), snap.infos[2].copy()).is_success()
    assert plugin.add_pod(clone, p, pod("y", "n3"), snap.infos[2].copy()).is_success()
    assert counts(s, ZONE) == {"z1": 1, "z2": 3} and s.min_match == {ZONE: 1}
    # the original is untouched
    assert counts(original, ZONE) == {"z1": 3, "z2": 1} and original.min_match == {ZONE: 1}
    assert state.read(PRE_FILTER_STATE_KEY) is original


def test_pods_that_do_not_change_counts() -> None:
    """Other namespace, unmatched labels, a node lacking a constraint's key: nothing changes (the last
    one although PreFilter counted n4's pod in zone z2, as v1.20.2)."""
    snap, _ = cluster()
    p = incoming(ZONE, HOST)
    plugin, state, original = state_for(snap, p)
    before = (counts(original, ZONE), counts(original, HOST), dict(original.min_match or {}))
    assert counts(original, ZONE) == {"z1": 3, "z2": 1}  # (d on n4, which has no hostname)
    clone = state.clone()
    n1, n4 = snap.infos[0].copy(), snap.infos[3].copy()
    assert plugin.add_pod(clone, p, pod("x", "n1", ns="other"), n1).is_success()
    assert plugin.add_pod(clone, p, pod("y", "n1", app="db"), n1).is_success()
    assert plugin.remove_pod(clone, p, pod("d", "n4"), n4).is_success()
    s = clone.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, FilterState)
    assert (counts(s, ZONE), counts(s, HOST), s.min_match) == before


def test_a_terminating_pod_is_counted_by_the_change() -> None:
    """v1.20.2's updateWithPod checks no deletionTimestamp (PreFilter skips such pods)."""
    snap, _ = cluster()
    p = incoming(ZONE)
    plugin, state, _ = state_for(snap, p)
    clone = state.clone()
    gone = pod("t", "n3", deletionTimestamp="2020-01-01T00:00:00Z")
    assert plugin.add_pod(clone, p, gone, snap.infos[2].copy()).is_success()
    s = clone.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, FilterState)
    assert counts(s, ZONE) == {"z1": 3, "z2": 2}


def test_a_domain_no_eligible_node_has_is_left_alone() -> None:
    snap, _ = cluster()
    p = incoming(ZONE)
    p["spec"]["nodeSelector"] = {ZONE: "z1"}  # z2 is no domain
    plugin, state, original = state_for(snap, p)
    assert counts(original, ZONE) == {"z1": 3}
    clone = state.clone()
    assert plugin.add_pod(clone, p, pod("x", "n3"), snap.infos[2].copy()).is_success()
    s = clone.read(PRE_FILTER_STATE_KEY)
    assert isinstance(s, FilterState)
    assert counts(s, ZONE) == {"z1": 3} and s.min_match == {ZONE: 3}


def test_filter_on_one_node_after_removing_victims() -> None:
    """n1 holds 2 matching pods, n3 none: 2+1-0 > maxSkew 2 rejects n1 until one pod leaves it."""
    nodes = [make_node(n, labels={HOST: n}) for n in ("n1", "n3")]
    snap = Snapshot.build(nodes, [pod("a", "n1"), pod("b", "n1")])
    p = incoming(HOST, skew=2)
    framework = Framework([PodTopologySpread()])
    state = CycleState(0.0)
    assert framework.pre_filters[0].pre_filter(state, p, snap).is_success()
    info = snap.infos[0].copy()
    st = filters_on_node(framework, state, p, info, snap.resources)
    assert st.code == Code.UNSCHEDULABLE and st.reasons == (REASON,)
    clone = state.clone()
    victim = info.pods["ns/a"]
    info.remove_pod(victim.key, 1)
    assert PodTopologySpread().remove_pod(clone, p, victim.pod, info).is_success()
    assert filters_on_node(framework, clone, p, info, snap.resources).is_success()
    assert not filters_on_node(framework, state, p, snap.infos[0].copy(), snap.resources).is_success()


def test_without_pre_filter_state_is_an_error() -> None:
    info = NodeInfo.of(cast(Any, make_node("n1")))
    st = PodTopologySpread().add_pod(CycleState(0.0), incoming(HOST), pod("x", "n1"), info)
    assert st.code == Code.ERROR
    assert st.reasons == ('reading "PreFilterPodTopologySpread" from cycleState: not found',)
