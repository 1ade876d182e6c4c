"""The Coscheduling plugin's extension points, one rule per test, with upstream's exact messages
(docs/rules/scheduler-coscheduling.md#scheduling-extension-points)."""

from __future__ import annotations

import pytest

from apis.podgroup import BIND_ANNOTATIONS, parse_pod_group
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import (
    PermitPlugin,
    Pod,
    PostBindPlugin,
    PreBindPlugin,
    PreFilterPlugin,
    ReservePlugin,
)
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code
from scheduler.plugins.coscheduling.args import CoschedulingArgs
from scheduler.plugins.coscheduling.plugin import Coscheduling

from ._support import RecordingWaitingPods, gang_pod

STATE = CycleState(0.0)
GROUP = {"gang.scheduling.koordinator.sh/groups": '["default/a","default/b"]'}


def _plugin(**args: object) -> tuple[Coscheduling, RecordingWaitingPods]:
    waiting = RecordingWaitingPods()
    return Coscheduling(CoschedulingArgs.from_args(args), waiting), waiting


def _permit_and_park(plugin: Coscheduling, waiting: RecordingWaitingPods, pod: Pod) -> Code:
    st, _ = plugin.permit(STATE, pod, "n1")
    if st.code == Code.WAIT:
        waiting.park(pod)
    return st.code


def test_implements_the_framework_points() -> None:
    plugin, _ = _plugin()
    for protocol in (PreFilterPlugin, ReservePlugin, PermitPlugin, PreBindPlugin, PostBindPlugin):
        assert isinstance(plugin, protocol)
    assert plugin.events_to_register() == []
    assert plugin.reserve(STATE, gang_pod("x"), "n1").is_success()
    st = plugin.post_filter(STATE, gang_pod("x"), Snapshot(), {})
    assert st.code == Code.UNSCHEDULABLE and st.message() == ""


# --- PreEnqueue --------------------------------------------------------------------------------------
def test_pre_enqueue_gang_missing_and_not_initialised() -> None:
    plugin, _ = _plugin()
    assert plugin.pre_enqueue({"metadata": {"name": "plain"}}).is_success()
    st = plugin.pre_enqueue(gang_pod("x", "ghost", ns="ns1"))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.message() == "can't find gang, gangName: ns1/ghost, podName: ns1/x"
    assert st.plugin == "Coscheduling"
    pod = gang_pod("u", pg="late")
    plugin.on_any_pod_add(pod)
    assert (
        plugin.pre_enqueue(pod).message() == "gang has not init, gangName: default/late, podName: default/u"
    )


def test_basic_check_message_lists_whole_group_when_short() -> None:
    plugin, _ = _plugin()
    plugin.on_any_pod_add(
        gang_pod(
            "a-0",
            "a",
            "2",
            annotations={"gang.scheduling.koordinator.sh/groups": '["default/b","default/a","default/c"]'},
        )
    )
    plugin.on_any_pod_add(gang_pod("c-0", pg="c"))
    st = plugin.pre_enqueue(gang_pod("a-0", "a"))
    assert st.message() == (
        "gangGroup [default/a default/b default/c] basic check: memberGangs [default/b] doesn't exists, "
        "memberGangs [default/c] has not init, memberGangs [default/a default/b default/c] child pod not "
        "collect enough, current gang: default/a, podName: default/a-0"
    )
    assert plugin.before_pre_filter(STATE, gang_pod("a-0", "a")).message() == st.message()


def test_representative_gate() -> None:
    plugin, _ = _plugin()
    for name in ("g-0", "g-1"):
        plugin.on_any_pod_add(gang_pod(name))
    assert plugin.pre_enqueue(gang_pod("g-0")).is_success()
    assert plugin.pre_enqueue(gang_pod("g-0")).is_success()
    st = plugin.pre_enqueue(gang_pod("g-1"))
    assert st.message() == "representative pod default/g-0 of gangGroupID default/g already exists"
    assert plugin.pre_enqueue(gang_pod("g-7")).message() == "pod default/g-7 is not exists in gangCache"
    plugin.on_any_pod_delete(gang_pod("g-0"))  # the representative is deleted: cleared
    plugin.on_any_pod_add(gang_pod("g-2"))
    assert plugin.pre_enqueue(gang_pod("g-1")).is_success()


def test_representative_failing_the_basic_check_is_dropped() -> None:
    plugin, _ = _plugin()
    for name in ("g-0", "g-1"):
        plugin.on_any_pod_add(gang_pod(name))
    assert plugin.pre_enqueue(gang_pod("g-0")).is_success()
    plugin.on_any_pod_delete(gang_pod("g-1"))
    assert not plugin.pre_enqueue(gang_pod("g-0")).is_success()
    gang = plugin.cache.get("default/g")
    assert gang is not None and gang.group_info.representative == ""


def test_once_satisfied_skips_checks_but_other_policies_do_not() -> None:
    plugin, _ = _plugin()
    plugin.on_any_pod_add(gang_pod("s-0", "s", "3", node="n1"))  # bound: the group is satisfied once
    assert plugin.pre_enqueue(gang_pod("anything", "s")).is_success()
    assert plugin.before_pre_filter(STATE, gang_pod("anything", "s")).is_success()
    assert plugin.context is None  # skipped before the context is created
    ow = {"gang.scheduling.koordinator.sh/match-policy": "only-waiting"}
    plugin.on_any_pod_add(gang_pod("o-0", "o", "3", node="n1", annotations=ow))
    assert "child pod not collect enough" in plugin.pre_enqueue(gang_pod("o-0", "o")).message()


# --- gang scheduling context -------------------------------------------------------------------------
def _group(plugin: Coscheduling) -> None:
    for name, gang, minimum in (("a-0", "a", "2"), ("a-1", "a", "2"), ("b-0", "b", "1")):
        plugin.on_any_pod_add(gang_pod(name, gang, minimum, annotations=GROUP))


def test_context_gates_unattempted_pods_and_next_pod_walks_the_group() -> None:
    plugin, waiting = _plugin()
    _group(plugin)
    assert plugin.pre_enqueue(gang_pod("b-0", "b")).is_success()  # b-0 becomes the representative
    assert plugin.before_pre_filter(STATE, gang_pod("a-0", "a")).is_success()
    assert plugin.context is not None and plugin.context.group_id == "default/a,default/b"
    gang = plugin.cache.get("default/a")
    assert gang is not None and gang.group_info.representative == ""  # cleared on entering scheduling
    st = plugin.pre_enqueue(gang_pod("b-0", "b"))
    assert st.message() == "gangGroup default/a,default/b is scheduling and this pod has not been attempted"
    assert _permit_and_park(plugin, waiting, gang_pod("a-0", "a")) == Code.WAIT
    nxt = plugin.next_pod()
    assert nxt is not None and nxt["metadata"]["name"] == "a-1"
    nxt = plugin.next_pod()
    assert nxt is not None and nxt["metadata"]["name"] == "b-0"
    assert plugin.next_pod() is None and plugin.context is None
    assert waiting.rejected == {"default/a-0": "all pending pods is already been attempted"}


def test_next_pod_with_the_gang_gone() -> None:
    plugin, waiting = _plugin()
    _group(plugin)
    assert plugin.before_pre_filter(STATE, gang_pod("b-0", "b")).is_success()
    assert _permit_and_park(plugin, waiting, gang_pod("a-0", "a")) == Code.WAIT
    plugin.on_any_pod_delete(gang_pod("b-0", "b"))
    assert plugin.next_pod() is None and plugin.context is None
    assert waiting.rejected == {"default/a-0": "gang is nil, may be already deleted"}


def test_first_failure_is_recorded_and_fails_the_rest_fast() -> None:
    plugin, waiting = _plugin()
    _group(plugin)
    plugin.before_pre_filter(STATE, gang_pod("a-0", "a"))
    assert _permit_and_park(plugin, waiting, gang_pod("a-0", "a")) == Code.WAIT
    st = plugin.after_post_filter(STATE, gang_pod("a-1", "a"), 'no "room"')
    assert st.code == Code.UNSCHEDULABLE
    assert st.message() == 'Gang "default/a" gets rejected due to pod is unschedulable'
    expected = (
        'GangGroup "default/a,default/b" gets rejected due to member Pod "default/a-1" is unschedulable '
        'with reason "no \\"room\\"", alreadyWaitForBound: 1'
    )
    assert waiting.rejected == {"default/a-0": expected}
    st = plugin.before_pre_filter(STATE, gang_pod("b-0", "b"))
    assert (st.code, st.message()) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, expected)
    # the gang checks run at BeforePreFilter only: PreFilter concerns network-topology gangs
    assert plugin.pre_filter(STATE, gang_pod("b-0", "b"), Snapshot()).is_success()


# --- AfterPostFilter ---------------------------------------------------------------------------------
def test_after_post_filter_without_context() -> None:
    plugin, waiting = _plugin()
    for i in range(3):
        plugin.on_any_pod_add(gang_pod(f"g-{i}", "g", "3"))
    for i in range(2):
        assert _permit_and_park(plugin, waiting, gang_pod(f"g-{i}")) == Code.WAIT
    st = plugin.after_post_filter(STATE, gang_pod("g-2"))
    assert st.message() == 'Gang "default/g" gets rejected due to pod is unschedulable'
    message = 'gets rejected due to member pod "default/g-2" is unschedulable'
    assert waiting.rejected == {"default/g-0": message, "default/g-1": message}
    gang = plugin.cache.get("default/g")
    assert gang is not None and gang.group_info.waiting_gang_ids == set()


def test_after_post_filter_missing_gang_and_spared_gangs() -> None:
    plugin, waiting = _plugin()
    st = plugin.after_post_filter(STATE, gang_pod("x", "ghost", ns="ns1"))
    assert st.message() == 'Pod "ns1/x" cannot find Gang "ghost"'
    assert plugin.after_post_filter(STATE, {"metadata": {"name": "plain"}}).message() == ""
    plugin.on_any_pod_add(
        gang_pod("n-0", "n", "3", annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    )
    _permit_and_park(plugin, waiting, gang_pod("n-0", "n"))
    assert plugin.after_post_filter(STATE, gang_pod("n-1", "n")).message() == ""
    plugin.on_any_pod_add(gang_pod("s-0", "s", "3", node="n1"))
    assert plugin.after_post_filter(STATE, gang_pod("s-1", "s")).message() == ""
    assert waiting.rejected == {} and list(waiting.parked) == ["default/n-0"]


# --- Permit ------------------------------------------------------------------------------------------
def test_permit_waits_then_allows_the_group() -> None:
    plugin, waiting = _plugin(defaultTimeout="20s")
    _group(plugin)
    st, timeout = plugin.permit(STATE, {"metadata": {"name": "plain"}}, "n1")
    assert st.is_success() and timeout == 0.0
    st, timeout = plugin.permit(STATE, gang_pod("a-0", "a"), "n1")
    assert st.code == Code.WAIT and timeout == 20.0 and st.plugin == "Coscheduling"
    waiting.park(gang_pod("a-0", "a"))
    assert _permit_and_park(plugin, waiting, gang_pod("a-1", "a")) == Code.WAIT  # b has none waiting
    gang = plugin.cache.get("default/a")
    assert gang is not None and gang.group_info.waiting_gang_ids == {"default/a", "default/b"}
    st, timeout = plugin.permit(STATE, gang_pod("b-0", "b"), "n1")
    assert st.is_success() and timeout == 0.0
    assert sorted(waiting.allowed) == [("default/a-0", "Coscheduling"), ("default/a-1", "Coscheduling")]
    assert gang.group_info.binding_members == {"uid-a-0", "uid-a-1", "uid-b-0"}


def test_permit_gang_not_found() -> None:
    plugin, _ = _plugin()
    st, timeout = plugin.permit(STATE, gang_pod("x", "ghost"), "n1")
    assert (st.code, st.message(), timeout) == (Code.UNSCHEDULABLE, "Gang not found", 0.0)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("only-waiting", Code.WAIT),
        ("waiting-and-running", Code.SUCCESS),
        ("once-satisfied", Code.SUCCESS),
        ("odd", Code.SUCCESS),
    ],
)
def test_permit_validity_by_match_policy(policy: str, expected: Code) -> None:
    plugin, _ = _plugin()
    ann = {"gang.scheduling.koordinator.sh/match-policy": policy}
    plugin.on_any_pod_add(gang_pod("g-0", annotations=ann, node="n1"))
    plugin.on_any_pod_add(gang_pod("g-1", annotations=ann))
    assert plugin.permit(STATE, gang_pod("g-1"), "n1")[0].code == expected


def test_permit_uninitialised_gang_waits_zero() -> None:
    plugin, _ = _plugin()
    plugin.on_any_pod_add(gang_pod("p", pg="late"))
    st, timeout = plugin.permit(STATE, gang_pod("p", pg="late"), "n1")
    assert st.code == Code.WAIT and timeout == 0.0


# --- Unreserve, PreBind, PostBind --------------------------------------------------------------------
def test_unreserve_rejects_a_strict_group_and_returns_the_pod_to_pending() -> None:
    plugin, waiting = _plugin()
    for i in range(3):
        plugin.on_any_pod_add(gang_pod(f"g-{i}", "g", "3"))
    for i in range(2):
        _permit_and_park(plugin, waiting, gang_pod(f"g-{i}"))
    plugin.unreserve(STATE, gang_pod("g-2"), "n1")
    message = 'Gang "default/g" gets rejected due to Pod "g-2" in Unreserve'
    assert waiting.rejected == {"default/g-0": message, "default/g-1": message}
    plugin.unreserve(STATE, gang_pod("g-0"), "n1")
    gang = plugin.cache.get("default/g")
    assert gang is not None and sorted(gang.pending) == ["default/g-0", "default/g-2"]
    assert list(gang.waiting_for_bind) == ["default/g-1"]


def test_pre_bind_writes_and_removes_annotations() -> None:
    plugin, waiting = _plugin()
    for i in range(3):
        plugin.on_any_pod_add(gang_pod(f"g-{i}"))
    _permit_and_park(plugin, waiting, gang_pod("g-0"))
    assert plugin.permit(STATE, gang_pod("g-1"), "n1")[0].is_success()
    assert plugin.permit(STATE, gang_pod("g-2"), "n1")[0].is_success()
    pod = gang_pod("g-0")
    assert plugin.pre_bind(STATE, pod, "n1").is_success()
    assert [pod["metadata"]["annotations"][k] for k in BIND_ANNOTATIONS] == [
        "default/g",
        "2",
        "default/g",
        "2",
    ]
    late = gang_pod("g-2", annotations=dict.fromkeys(BIND_ANNOTATIONS, "stale"))
    plugin.pre_bind(STATE, late, "n1")
    assert not set(BIND_ANNOTATIONS) & set(late["metadata"]["annotations"])
    bare: dict = {"metadata": {"namespace": "default", "name": "plain"}}  # type: ignore[type-arg]
    plugin.pre_bind(STATE, bare, "n1")  # type: ignore[arg-type]
    assert "annotations" not in bare["metadata"]


def test_post_bind_marks_bound_and_satisfied() -> None:
    plugin, waiting = _plugin()
    for i in range(2):
        plugin.on_any_pod_add(gang_pod(f"g-{i}"))
    assert plugin.pre_enqueue(gang_pod("g-0")).is_success()
    _permit_and_park(plugin, waiting, gang_pod("g-0"))
    plugin.post_bind(STATE, gang_pod("g-0"), "n1")
    gang = plugin.cache.get("default/g")
    assert gang is not None and list(gang.bound) == ["default/g-0"] and not gang.waiting_for_bind
    assert gang.group_info.once_resource_satisfied and gang.group_info.representative == ""
    assert gang.group_info.waiting_gang_ids == set()


def test_pod_group_events() -> None:
    plugin, _ = _plugin()
    pg = parse_pod_group({"metadata": {"namespace": "ns", "name": "pg"}, "spec": {"minMember": 2}})
    plugin.on_pod_group(None, pg)
    assert plugin.cache.get("ns/pg") is not None
    plugin.on_pod_group(pg, None)
    assert plugin.cache.get("ns/pg") is None and plugin.cache.groups == {}


def test_a_gang_keeps_the_first_group_info_it_was_attached_to() -> None:
    """A pod with an unparsable min leaves the gang uninitialised but attached to the group info of its
    own id; the pod that initialises it later names a group whose info is created but not attached."""
    plugin, _ = _plugin()
    plugin.on_any_pod_add(gang_pod("a-0", "a", "x", annotations=GROUP))
    plugin.on_any_pod_add(gang_pod("a-1", "a", "1", annotations=GROUP))
    gang = plugin.cache.get("default/a")
    assert gang is not None and gang.has_init and gang.gang_group_id == "default/a,default/b"
    assert gang.group_info.group_id == "default/a"
    assert set(plugin.cache.groups) == {"default/a", "default/a,default/b"}
