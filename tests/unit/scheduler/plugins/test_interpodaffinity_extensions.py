"""InterPodAffinity's PreFilter extensions (docs/rules/scheduler-interpodaffinity.md#prefilter-extensions):
kube-scheduler 1.20.2's updateWithPod case by case, Filter on a one-row snapshot, and CycleState.clone's
hook (a value's own clone())."""

from __future__ import annotations

from typing import Any, cast

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import filters_on_node
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.interpodaffinity import InterPodAffinity
from scheduler.plugins.interpodaffinity.plugin import PRE_FILTER_KEY
from scheduler.plugins.interpodaffinity.prefilter import FilterState
from tests.unit.scheduler.plugins._support import make_node
from tests.unit.scheduler.plugins.test_interpodaffinity import pod

Obj = dict[str, Any]
GENERAL = "node(s) didn't match pod affinity/anti-affinity"


def term(app: str, key: str = "zone") -> Obj:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def required(kind: str, *terms: Obj) -> Obj:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def as_pod(obj: Obj) -> Pod:
    return cast(Pod, obj)


def setup(incoming: Obj, pods: list[Obj]) -> tuple[Framework, CycleState, Snapshot]:
    nodes = [
        make_node("n1", labels={"zone": "a"}),
        make_node("n2", labels={"zone": "a"}),
        make_node("n3", labels={"zone": "b"}),
    ]
    snap = Snapshot.build(nodes, pods)
    framework = Framework([InterPodAffinity()])
    state = CycleState(0.0)
    assert framework.pre_filters[0].pre_filter(state, as_pod(incoming), snap).is_success()
    return framework, state, snap


def test_removing_the_only_anti_affinity_pod_frees_its_zone() -> None:
    incoming = pod("in", labels={"app": "web"}, affinity=required("podAntiAffinity", term("web")))
    web = pod("w", node="n2", labels={"app": "web"})
    framework, state, snap = setup(incoming, [web])
    info = snap.infos[0].copy()  # n1, same zone as the web pod
    st = filters_on_node(framework, state, as_pod(incoming), info, snap.resources)
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == (GENERAL, "node(s) didn't match pod anti-affinity rules")
    clone = state.clone()
    plugin = InterPodAffinity()
    assert plugin.remove_pod(clone, as_pod(incoming), as_pod(web), snap.infos[1].copy()).is_success()
    assert filters_on_node(framework, clone, as_pod(incoming), info, snap.resources).is_success()
    # the original state still rejects, and adding the pod back restores it on the clone
    assert not filters_on_node(framework, state, as_pod(incoming), info, snap.resources).is_success()
    assert plugin.add_pod(clone, as_pod(incoming), as_pod(web), snap.infos[1].copy()).is_success()
    assert filters_on_node(framework, clone, as_pod(incoming), info, snap.resources) == st


def test_an_added_pod_with_anti_affinity_to_the_incoming_pod() -> None:
    incoming = pod("in", labels={"app": "web"})
    framework, state, snap = setup(incoming, [])
    clone = state.clone()
    other = pod("o", node="n3", labels={"app": "db"}, affinity=required("podAntiAffinity", term("web")))
    info = snap.infos[2].copy()
    info.add_pod(PodInfo.of(as_pod(other)), 1)
    assert InterPodAffinity().add_pod(clone, as_pod(incoming), as_pod(other), info).is_success()
    st = filters_on_node(framework, clone, as_pod(incoming), info, snap.resources)
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == (GENERAL, "node(s) didn't satisfy existing pods anti-affinity rules")
    assert filters_on_node(
        framework, state, as_pod(incoming), snap.infos[2].copy(), snap.resources
    ).is_success()


def test_affinity_count_down_to_zero_brings_back_the_first_pod_rule() -> None:
    """With its only match removed the affinity map is empty again, so a pod matching its own terms
    passes anywhere with the key (kube deletes the entry at 0)."""
    incoming = pod("in", labels={"app": "web"}, affinity=required("podAffinity", term("web")))
    web = pod("w", node="n1", labels={"app": "web"})
    framework, state, snap = setup(incoming, [web])
    n3 = snap.infos[2].copy()
    st = filters_on_node(framework, state, as_pod(incoming), n3, snap.resources)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == (GENERAL, "node(s) didn't match pod affinity rules")
    clone = state.clone()
    assert (
        InterPodAffinity().remove_pod(clone, as_pod(incoming), as_pod(web), snap.infos[0].copy()).is_success()
    )
    s = clone.read(PRE_FILTER_KEY)
    assert isinstance(s, FilterState)
    assert all(not c.any() for c in s.affinity.values())
    assert filters_on_node(framework, clone, as_pod(incoming), n3, snap.resources).is_success()


def test_a_value_the_prefilter_snapshot_never_saw() -> None:
    """A node whose zone no node of the snapshot had: the counts get a private value index."""
    incoming = pod("in", labels={"app": "web"}, affinity=required("podAntiAffinity", term("web")))
    framework, state, snap = setup(incoming, [])
    clone = state.clone()
    info = NodeInfo.of(cast(Any, make_node("new", labels={"zone": "c"})))
    web = pod("w", node="new", labels={"app": "web"})
    info.add_pod(PodInfo.of(as_pod(web)), 1)
    assert InterPodAffinity().add_pod(clone, as_pod(incoming), as_pod(web), info).is_success()
    st = filters_on_node(framework, clone, as_pod(incoming), info, snap.resources)
    assert st.reasons == (GENERAL, "node(s) didn't match pod anti-affinity rules")
    # the whole cluster on the clone: zone c is no node's there, every node passes
    feasible, _ = framework.filter_all(clone.clone(), as_pod(incoming), snap)
    assert feasible.tolist() == [0, 1, 2]


def test_without_pre_filter_state_is_an_error() -> None:
    info = NodeInfo.of(cast(Any, make_node("n1")))
    st = InterPodAffinity().remove_pod(CycleState(0.0), as_pod(pod("in")), as_pod(pod("x", node="n1")), info)
    assert st.code == Code.ERROR
    assert st.reasons == ('error reading "PreFilterInterPodAffinity" from cycleState: not found',)


class _Counter:
    def __init__(self) -> None:
        self.clones = 0

    def clone(self) -> _Counter:
        self.clones += 1
        return _Counter()


def test_cycle_state_clone_uses_a_values_clone() -> None:
    state = CycleState(3.0)
    own, plain = _Counter(), {"k": [1]}
    state.write("own", own)
    state.write("plain", plain)
    c = state.clone()
    assert own.clones == 1 and c.read("own") is not own and isinstance(c.read("own"), _Counter)
    assert c.read("plain") == plain and c.read("plain") is not plain  # copy.copy: shallow
    assert c.now == 3.0
