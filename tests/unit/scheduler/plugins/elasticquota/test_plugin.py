"""The ElasticQuota plugin over its group quota manager: informer events (quotas, pods, nodes) move the
accounting (docs/rules/scheduler-elasticquota.md#pod-accounting), PreFilter answers with upstream's exact
reasons and keeps its state for preemption, the PreFilter extensions and Reserve/Unreserve adjust used, the
status patch and the overuse revoke monitor follow the manager."""

from __future__ import annotations

from typing import Any

from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.elasticquota.admission import PostFilterState
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.plugin import STATE_KEY, ElasticQuota

from ._support import pod, quota

DEFAULT = "koordinator-default-quota"


def _node(name: str, cpu: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"allocatable": {"cpu": cpu, "pods": "110"}}}


def _plugin(**args: Any) -> ElasticQuota:
    plugin = ElasticQuota(ElasticQuotaArgs.from_args(args))
    plugin.on_node("n1", _node("n1", "4"))
    plugin.on_quota_add(quota("a", {"cpu": "10"}))
    return plugin


def _p(d: dict[str, Any]) -> Pod:
    return d  # type: ignore[return-value]


def _pre_filter(plugin: ElasticQuota, p: dict[str, Any]) -> tuple[Code, str, CycleState]:
    state = CycleState(0.0)
    st = plugin.pre_filter(state, _p(p), Snapshot())
    return st.code, st.message(), state


def test_nodes_make_the_cluster_total() -> None:
    plugin = _plugin()
    plugin.on_node("n2", _node("n2", "2"))
    assert plugin.manager.refresh_runtime("koordinator-root-quota") == {"cpu": 6000, "pods": 220}
    plugin.on_node("n2", _node("n2", "2", deleting=True))  # a node being deleted no longer counts
    assert plugin.manager.refresh_runtime("koordinator-root-quota") == {"cpu": 4000, "pods": 110}
    plugin.on_node("n1", None)
    assert plugin.manager.refresh_runtime("koordinator-root-quota") == {}


def test_prefilter_limits_by_runtime_and_saves_the_state() -> None:
    plugin = _plugin()
    plugin.on_any_pod_add(_p(pod("run", {"cpu": "3"}, "a", node="n1")))
    new = pod("new", {"cpu": "2"}, "a")
    plugin.on_any_pod_add(_p(new))
    code, message, state = _pre_filter(plugin, new)
    assert code == Code.UNSCHEDULABLE
    assert message == (
        "Insufficient quotas, quotaName: a, runtime: cpu:4, used: cpu:3, pod's request: cpu:2, "
        "exceedDimensions: [cpu]"
    )
    post = state.read(STATE_KEY)
    assert isinstance(post, PostFilterState)
    assert (post.used, post.used_limit, post.quota) == ({"cpu": 3000}, {"cpu": 4000}, "a")
    plugin.on_node("n2", _node("n2", "4"))  # more room: runtime follows the request 5 cpu
    assert _pre_filter(plugin, new)[:2] == (Code.SUCCESS, "")


def test_reserve_and_unreserve_move_used_once() -> None:
    plugin = _plugin()
    p = pod("p", {"cpu": "1"}, "a")
    plugin.on_any_pod_add(_p(p))
    state = CycleState(0.0)
    info = plugin.manager.info("a")
    assert info is not None and info.used == {}
    assert plugin.reserve(state, _p(p), "n1").is_success()
    plugin.reserve(state, _p(p), "n1")  # already assigned: no second charge
    assert plugin.manager.info("a").used == {"cpu": 1000}  # type: ignore[union-attr]
    assert plugin.manager.info("koordinator-root-quota").used == {"cpu": 1000}  # type: ignore[union-attr]
    plugin.unreserve(state, _p(p), "n1")
    plugin.unreserve(state, _p(p), "n1")
    assert plugin.manager.info("a").used == {"cpu": 0}  # type: ignore[union-attr]
    unknown = pod("ghost", {"cpu": "1"}, "a")  # not in the quota's cache: nothing happens
    assert plugin.reserve(state, _p(unknown), "n1").is_success()
    assert plugin.manager.info("a").used == {"cpu": 0}  # type: ignore[union-attr]


def test_prefilter_extensions_adjust_the_saved_used_for_cached_pods_only() -> None:
    plugin = _plugin()
    run = pod("run", {"cpu": "3"}, "a", node="n1")
    other = pod("other", {"cpu": "1"}, "b", node="n1")
    plugin.on_any_pod_add(_p(run))
    new = pod("new", {"cpu": "2"}, "a")
    plugin.on_any_pod_add(_p(new))
    _, _, state = _pre_filter(plugin, new)
    info = NodeInfo.__new__(NodeInfo)
    assert plugin.remove_pod(state, _p(new), _p(run), info).is_success()
    assert state.read(STATE_KEY).used == {"cpu": 0}  # type: ignore[attr-defined]
    plugin.remove_pod(state, _p(new), _p(other), info)  # not in a's cache
    plugin.add_pod(state, _p(new), _p(run), info)
    plugin.add_pod(state, _p(new), _p(run), info)
    assert state.read(STATE_KEY).used == {"cpu": 6000}  # type: ignore[attr-defined]
    assert state.clone().read(STATE_KEY) is not state.read(STATE_KEY)


def test_a_terminated_assigned_pod_keeps_its_used_until_deleted() -> None:
    plugin = _plugin()
    running = pod("p", {"cpu": "1"}, "a", node="n1")
    plugin.on_any_pod_add(_p(running))
    plugin.on_any_pod_update(_p(running), _p(pod("p", {"cpu": "1"}, "a", node="n1", phase="Succeeded")))
    info = plugin.manager.info("a")
    assert info is not None and info.used == {"cpu": 1000} and info.request == {"cpu": 1000}
    plugin.on_any_pod_delete(_p(running))
    assert plugin.manager.info("a").used == {"cpu": 0}  # type: ignore[union-attr]
    assert plugin.manager.info("a").request == {"cpu": 0}  # type: ignore[union-attr]


def test_a_pending_pod_becomes_used_when_bound_and_moves_with_its_label() -> None:
    plugin = _plugin()
    plugin.on_quota_add(quota("b", {"cpu": "10"}))
    pending = pod("p", {"cpu": "2"}, "a")
    plugin.on_any_pod_add(_p(pending))
    bound = pod("p", {"cpu": "2"}, "a", node="n1")
    plugin.on_any_pod_update(_p(pending), _p(bound))
    assert plugin.manager.info("a").used == {"cpu": 2000}  # type: ignore[union-attr]
    moved = pod("p", {"cpu": "2"}, "b", node="n1")
    plugin.on_any_pod_update(_p(bound), _p(moved))
    assert plugin.manager.info("a").used == {"cpu": 0}  # type: ignore[union-attr]
    assert plugin.manager.info("b").used == {"cpu": 2000}  # type: ignore[union-attr]


def test_quota_events_rehome_pods() -> None:
    plugin = _plugin()
    p = pod("p", {"cpu": "2"}, "late", node="n1")
    plugin.on_any_pod_add(_p(p))  # its quota does not exist yet: the default quota takes it
    assert plugin.manager.info(DEFAULT).used == {"cpu": 2000}  # type: ignore[union-attr]
    plugin.on_quota_add(quota("late", {"cpu": "1"}))
    assert plugin.manager.info(DEFAULT).used == {"cpu": 0}  # type: ignore[union-attr]
    assert plugin.manager.info("late").used == {"cpu": 2000}  # type: ignore[union-attr]
    plugin.on_quota_update(quota("late", {"cpu": "1"}), quota("late", {"cpu": "5", "memory": "1Gi"}))
    assert plugin.manager.info("late").max == {"cpu": 5000, "memory": 1073741824}  # type: ignore[union-attr]
    assert plugin.manager.info("late").used == {"cpu": 2000}  # type: ignore[union-attr]
    plugin.on_quota_delete(quota("late", {"cpu": "5"}))
    assert plugin.manager.info("late") is None
    assert plugin.manager.info(DEFAULT).used == {"cpu": 2000}  # type: ignore[union-attr]


def test_default_and_system_quotas_cannot_be_deleted_and_take_their_used_off_the_root() -> None:
    plugin = _plugin()
    plugin.on_quota_delete(quota(DEFAULT, {}))
    plugin.on_any_pod_add(_p(pod("d", {"cpu": "1"}, node="n1")))
    assert plugin.manager.refresh_runtime("koordinator-root-quota") == {"cpu": 3000, "pods": 110}
    assert plugin.manager.refresh_runtime(DEFAULT) == {
        "cpu": 1844674407370955161000,
        "memory": 1844674407370955161,
    }


def test_non_preemptible_reason() -> None:
    plugin = _plugin()
    plugin.on_quota_add(quota("m", {"cpu": "10"}, {"cpu": "1"}))
    np = {"quota.scheduling.koordinator.sh/preemptible": "false"}
    new = pod("np", {"cpu": "1500m"}, "m", labels=np)
    plugin.on_any_pod_add(_p(new))
    assert _pre_filter(plugin, new)[:2] == (
        Code.UNSCHEDULABLE,
        "Insufficient non-preemptible quotas, quotaName: m, min: cpu:1, nonPreemptibleUsed: <empty>, "
        "pod's request: cpu:1500m, exceedDimensions: [cpu]",
    )


def test_unknown_tree_and_missing_ancestor_errors() -> None:
    plugin = _plugin()
    plugin.quota_tree["a"] = "other-tree"
    p = pod("p", {"cpu": "1"}, "a")
    assert _pre_filter(plugin, p)[:2] == (
        Code.ERROR,
        "Could not find the specified ElasticQuotaManager for quota: a, tree: other-tree",
    )
    st = plugin.reserve(CycleState(0.0), _p(p), "n1")
    assert (st.code, st.message()) == (Code.ERROR, "quota manager not found, quota: a, tree: other-tree")
    plugin = _plugin(enableCheckParentQuota=True)
    plugin.on_quota_add(quota("orphan", {"cpu": "10"}, parent="missing"))
    assert _pre_filter(plugin, pod("o", {"cpu": "1"}, "orphan"))[:2] == (
        Code.ERROR,
        "Could not find the elasticQuota missing, quotaNameTopo: [missing orphan]",
    )


def test_status_patch_only_when_changed() -> None:
    plugin = _plugin()
    plugin.on_any_pod_add(_p(pod("p", {"cpu": "1"}, "a", node="n1")))
    obj = quota("a", {"cpu": "10"})
    patch = plugin.status_patch(obj)
    assert patch is not None
    ann = patch["metadata"]["annotations"]
    assert ann["quota.scheduling.koordinator.sh/runtime"] == '{"cpu":"1"}'
    assert ann["quota.scheduling.koordinator.sh/request"] == '{"cpu":"1"}'
    assert ann["quota.scheduling.koordinator.sh/non-preemptible-used"] == "{}"
    assert patch["status"] == {"used": {"cpu": "1"}}
    obj["metadata"]["annotations"] = dict(ann)
    obj["status"] = {"used": {"cpu": "1000m", "memory": "0"}}  # equal amounts, zeros ignored
    assert plugin.status_patch(obj) is None
    assert plugin.status_patch({"metadata": {"name": "unknown"}}) is None


def test_revoke_waits_for_the_delay_then_evicts() -> None:
    plugin = _plugin(monitorAllQuotas=True, delayEvictTime="10s")
    for i, prio in enumerate((1, 2)):
        plugin.on_any_pod_add(_p(pod(f"p{i}", {"cpu": "3"}, "a", node="n1", priority=prio)))
    # used 6 cpu, runtime 4 (the cluster): over from t=0
    assert plugin.revoke(0) == {}
    assert plugin.revoke(10 * 10**9) == {}
    due = plugin.revoke(11 * 10**9)
    assert [p["metadata"]["name"] for p in due["a"]] == ["p0"]
    plugin.on_node("n2", _node("n2", "4"))  # fits again: the clock restarts
    assert plugin.revoke(12 * 10**9) == {}
    assert ElasticQuota(ElasticQuotaArgs()).revoke(10**12) == {}  # monitorAllQuotas off


def test_preemption_hooks() -> None:
    plugin = _plugin()
    pre = pod("pre", {"cpu": "2"}, "a", priority=10)
    victim = pod("v", {"cpu": "1"}, "a", node="n1", priority=1)
    plugin.on_any_pod_add(_p(victim))
    plugin.on_any_pod_add(_p(pre))
    assert plugin.can_preempt(pre, victim)
    assert plugin.eligible_to_preempt(pre, None, {"n1": [victim]}) == (True, "")
    _, _, state = _pre_filter(plugin, pre)
    victims, violating, st = plugin.select_victims_on_node(
        state, pre, "n1", [victim], lambda pods: st_ok(), lambda p: True
    )
    assert st.is_success() and victims == [] and violating == 0  # 1 used + 2 fits the runtime 3
    victims, _, st = plugin.select_victims_on_node(CycleState(0.0), pre, "n1", [victim], lambda pods: st_ok())
    assert st.code == Code.ERROR and victims == []
    assert plugin.post_filter_message("x") == "preemption: x" and plugin.post_filter_message("") == ""


def st_ok() -> Status:
    return Status.success()


def test_a_quota_whose_parent_is_missing_still_counts_its_own_pods() -> None:
    plugin = _plugin()
    plugin.on_quota_add(quota("orphan", {"cpu": "10"}, parent="missing"))
    plugin.on_quota_add(quota("child", {"cpu": "10"}, parent="orphan"))
    plugin.on_any_pod_add(_p(pod("p", {"cpu": "1"}, "child", node="n1")))
    assert plugin.manager.info("child").used == {"cpu": 1000}  # type: ignore[union-attr]
    assert plugin.manager.info("orphan").used == {"cpu": 1000}  # type: ignore[union-attr]
    assert plugin.manager.info("koordinator-root-quota").used == {}  # type: ignore[union-attr]
    assert plugin.manager.refresh_runtime("orphan") == {}  # no runtime for an orphan subtree
