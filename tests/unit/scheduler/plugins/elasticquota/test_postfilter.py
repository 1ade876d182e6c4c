"""ElasticQuota's PostFilter in a Framework with NodeResourcesFit
(docs/rules/scheduler-elasticquota.md#preemption): only pods of the preemptor's quota with a lower priority
are victims; a pod is a victim when the node needs its room or when the quota's limit does (PreFilter
refused the pod for its quota: the state it saved is used); the decision is DefaultPreemption's
PreemptionResult, so the gateway carries it out unchanged."""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.defaultpreemption.plugin import PreemptionResult
from scheduler.plugins.elasticquota.plugin import ElasticQuota
from scheduler.plugins.noderesources import NodeResourcesFit

from ._support import pod, quota


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {}, "status": {"allocatable": {"cpu": cpu, "pods": "32"}}}


def _run(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    preemptor: dict[str, Any],
    quotas: list[dict[str, Any]],
) -> tuple[Status, Status, PreemptionResult | None]:
    eq = ElasticQuota.from_args({})
    fw = Framework([NodeResourcesFit(), eq])
    eq.attach(fw)
    for n in nodes:
        eq.on_node(n["metadata"]["name"], n)
    for q in quotas:
        eq.on_quota_add(q)
    for p in [*pods, preemptor]:
        eq.on_any_pod_add(p)  # type: ignore[arg-type]
    snap = Snapshot.build(nodes, pods)
    state = CycleState(1000.0)
    pre = eq.pre_filter(state, preemptor, snap)  # type: ignore[arg-type]
    statuses = {
        n["metadata"]["name"]: pre if not pre.is_success() else Status.unschedulable("Insufficient cpu")
        for n in nodes
    }
    st = eq.post_filter(state, preemptor, snap, statuses)  # type: ignore[arg-type]
    return pre, st, PreemptionResult.of(state)


def _names(result: PreemptionResult | None) -> list[str]:
    assert result is not None
    return [v["metadata"]["name"] for v in result.victims]


def test_the_node_needs_the_room_of_a_same_quota_pod() -> None:
    pods = [
        pod("a-low", {"cpu": "3"}, "a", node="n1", priority=1),
        pod("b-low", {"cpu": "1"}, "b", node="n1", priority=1),
    ]
    quotas = [quota("a", {"cpu": "10"}), quota("b", {"cpu": "10"})]
    pre, st, result = _run([_node("n1", "4")], pods, pod("p", {"cpu": "2"}, "a", priority=10), quotas)
    # a requests 5 cpu, b 1 of the 4 in the cluster: a's runtime is 3 cpu, used 3 + 2 does not fit
    assert pre.code == Code.UNSCHEDULABLE and pre.message().startswith(
        "Insufficient quotas, quotaName: a, runtime: cpu:3"
    )
    assert st == Status(Code.SUCCESS, ("n1",), "ElasticQuota")
    assert (
        result is not None and result.node == "n1" and _names(result) == ["a-low"]
    )  # b-low is another quota's


def test_the_quota_limit_makes_a_victim_on_a_roomy_node() -> None:
    pods = [
        pod("hi", {"cpu": "1"}, "a", node="n1", priority=5, start="2026-01-01T00:00:00Z"),
        pod("lo", {"cpu": "2"}, "a", node="n1", priority=1, start="2026-01-01T00:00:00Z"),
    ]
    # max 4 cpu: runtime 4, used 3 + 2 > 4; the node (16 cpu) has room for everyone
    pre, st, result = _run(
        [_node("n1", "16")], pods, pod("p", {"cpu": "2"}, "a", priority=10), [quota("a", {"cpu": "4"})]
    )
    assert pre.code == Code.UNSCHEDULABLE
    assert st.is_success() and _names(result) == ["lo"]  # hi back: 1 + 2 fits 4; lo back: 3 + 2 does not


def test_no_candidate_when_only_other_quotas_or_higher_priorities_run() -> None:
    pods = [
        pod("b", {"cpu": "4"}, "b", node="n1", priority=1),
        pod("a-hi", {"cpu": "1"}, "a", node="n1", priority=50),
    ]
    _, st, result = _run(
        [_node("n1", "4")],
        pods,
        pod("p", {"cpu": "2"}, "a", priority=10),
        [quota("a", {"cpu": "10"}), quota("b", {"cpu": "10"})],
    )
    assert st.code == Code.UNSCHEDULABLE and result is None


def test_not_eligible_and_not_attached() -> None:
    pods = [pod("t", {"cpu": "4"}, "a", node="n1", priority=1)]
    pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    preemptor = pod("p", {"cpu": "2"}, "a", priority=10)
    preemptor["status"]["nominatedNodeName"] = "n1"
    _, st, result = _run([_node("n1", "4")], pods, preemptor, [quota("a", {"cpu": "10"})])
    assert (st.code, st.message()) == (
        Code.UNSCHEDULABLE,
        "preemption: not eligible due to a terminating pod on the nominated node.",
    )
    assert result is None
    lone = ElasticQuota()
    st = lone.post_filter(CycleState(0.0), preemptor, Snapshot(), {})  # type: ignore[arg-type]
    assert st.code == Code.ERROR
