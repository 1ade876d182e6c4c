"""``koord simulate`` for kind ``Coscheduling`` (docs/simulate.md#coscheduling): replays pod and PodGroup
events and extension-point calls through the Coscheduling plugin itself, its gang cache and a simulated
framework's waiting pods (``operation: "steps"``), or runs the PodGroup status controller until the
status settles (``operation: "podGroupStatus"``). Bad input raises ValueError naming the field.
Imports: the standard library, apis (duration, objectcheck, pod, podgroup, rfc3339), scheduler.framework,
this package. Pure: no clock is read (``now`` is the scenario's).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.duration import format_go_duration
from apis.objectcheck import as_pod
from apis.pod import pod_annotations, pod_key
from apis.podgroup import BIND_ANNOTATIONS, parse_pod_group
from apis.rfc3339 import parse_rfc3339
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Code, Status
from scheduler.plugins.coscheduling.args import ArgsError, CoschedulingArgs
from scheduler.plugins.coscheduling.plugin import Coscheduling, WaitingPod
from scheduler.plugins.coscheduling.podgroup_status import settle

EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
CODES: Final = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}


class _Waiting:
    def __init__(self, pod: Mapping[str, Any], sim: SimulatedWaitingPods) -> None:
        self._pod, self._sim = pod, sim

    @property
    def pod(self) -> Mapping[str, Any]:
        return self._pod

    def allow(self, plugin: str) -> None:
        key = pod_key(self._pod)
        if self._sim.parked.pop(key, None) is not None:
            self._sim.allowed.append(key)

    def reject(self, plugin: str, message: str) -> None:
        key = pod_key(self._pod)
        if self._sim.parked.pop(key, None) is not None:
            self._sim.rejected[key] = message


class SimulatedWaitingPods:
    """The framework's waiting pods as the scenario sees them: a rejected pod leaves the list with its
    message recorded (no Unreserve runs for it), an allowed one leaves it for allowedPods."""

    def __init__(self) -> None:
        self.parked: dict[str, _Waiting] = {}
        self.allowed: list[str] = []
        self.rejected: dict[str, str] = {}

    def park(self, pod: Mapping[str, Any]) -> None:
        self.parked[pod_key(pod)] = _Waiting(pod, self)

    def waiting_pods(self) -> list[WaitingPod]:
        return list(self.parked.values())


def simulate(scenario: Mapping[str, Any]) -> dict[str, Any]:
    try:
        args = CoschedulingArgs.from_args(_mapping(scenario.get("args"), "args"))
    except ArgsError as e:
        raise ValueError(f"args: {e}") from None
    now = _time(scenario.get("now"))
    operation = scenario.get("operation", "steps")
    if operation == "steps":
        return _steps(scenario, args, now)
    if operation == "podGroupStatus":
        return _pod_group_status(scenario, args, now)
    raise ValueError(f"operation={operation!r}: expected steps or podGroupStatus")


def _status(st: Status) -> dict[str, Any]:
    return {"code": CODES[st.code], "message": st.message()}


def _steps(scenario: Mapping[str, Any], args: CoschedulingArgs, now: _dt.datetime) -> dict[str, Any]:
    steps = scenario.get("steps")
    if not isinstance(steps, list):
        raise ValueError(f"steps: expected a list of step objects, got {steps!r:.80}")
    sim = SimulatedWaitingPods()
    plugin = Coscheduling(args, sim, clock=lambda: now)
    state = CycleState(now.timestamp())
    results: dict[str, Any] = {}
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step, Mapping):
            raise ValueError(f"{where}: expected an object, got {step!r:.80}")
        op = step.get("op")
        run = _OPS.get(op) if isinstance(op, str) else None
        if run is None:
            raise ValueError(f"{where}.op={op!r}: expected one of {', '.join(sorted(_OPS))}")
        result = run(plugin, sim, state, step, where)
        step_id = step.get("id")
        if step_id is not None:
            if not isinstance(step_id, str):
                raise ValueError(f"{where}.id={step_id!r}: expected a string")
            results[step_id] = result
    return {
        "results": results,
        "gangs": plugin.cache.summaries(),
        "waitingPods": sorted(sim.parked),
        "rejectedPods": dict(sorted(sim.rejected.items())),
        "allowedPods": sorted(sim.allowed),
    }


Step = Mapping[str, Any]
_Op = Callable[[Coscheduling, SimulatedWaitingPods, CycleState, Step, str], dict[str, Any]]


def _pod(step: Step, where: str) -> Pod:
    return as_pod(step.get("pod"), f"{where}.pod")  # a copy: the plugin may keep or annotate it


def _pod_group_event(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    pg = parse_pod_group(_mapping(step.get("podGroup"), f"{where}.podGroup"), f"{where}.podGroup")
    plugin.on_pod_group(None, pg)
    return {}


def _delete_pod_group(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    namespace, name = step.get("namespace", ""), step.get("name")
    if not isinstance(namespace, str) or not isinstance(name, str) or not name:
        raise ValueError(
            f"{where}: deletePodGroup needs string namespace and name, got {namespace!r}/{name!r}"
        )
    plugin.cache.on_pod_group_delete(namespace, name)
    return {}


def _add_pod(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    plugin.on_any_pod_add(_pod(step, where))
    return {}


def _update_pod(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    pod = _pod(step, where)
    plugin.on_any_pod_update(pod, pod)
    return {}


def _delete_pod(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    plugin.on_any_pod_delete(_pod(step, where))
    return {}


def _set_once_satisfied(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    gid = step.get("gang")
    gang = plugin.cache.get(gid) if isinstance(gid, str) else None
    if gang is None:
        raise ValueError(f"{where}.gang={gid!r}: no such gang in the cache")
    gang.group_info.once_resource_satisfied = True
    return {}


def _pre_enqueue(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    return _status(plugin.pre_enqueue(_pod(step, where)))


def _before_pre_filter(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    return _status(plugin.before_pre_filter(state, _pod(step, where)))


def _next_pod(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    pod = plugin.next_pod()
    return {"pod": None if pod is None else pod_key(pod)}


def _permit(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    pod = _pod(step, where)
    st, wait_ns = plugin.permit_ns(pod)
    if st.code == Code.WAIT:
        sim.park(pod)
    return {**_status(st), "waitTime": format_go_duration(wait_ns)}


def _after_post_filter(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    fit_error = step.get("fitError", "")
    if not isinstance(fit_error, str):
        raise ValueError(f"{where}.fitError={fit_error!r}: expected a string")
    return _status(plugin.after_post_filter(state, _pod(step, where), fit_error))


def _unreserve(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    plugin.unreserve(state, _pod(step, where), "")
    return {}


def _post_bind(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    plugin.post_bind(state, _pod(step, where), "")
    return {}


def _pre_bind(
    plugin: Coscheduling, sim: SimulatedWaitingPods, state: CycleState, step: Step, where: str
) -> dict[str, Any]:
    pod = _pod(step, where)
    meta = pod.get("metadata")
    if meta is not None:  # PreBind writes into the pod: not into the step's own annotations
        meta["annotations"] = dict(meta.get("annotations") or {})
    plugin.pre_bind(state, pod, "")
    annotations = pod_annotations(pod)
    return {"annotations": {k: annotations[k] for k in BIND_ANNOTATIONS if k in annotations}}


_OPS: Final[dict[str, _Op]] = {
    "addPodGroup": _pod_group_event,
    "updatePodGroup": _pod_group_event,
    "deletePodGroup": _delete_pod_group,
    "addPod": _add_pod,
    "updatePod": _update_pod,
    "deletePod": _delete_pod,
    "setOnceResourceSatisfied": _set_once_satisfied,
    "preEnqueue": _pre_enqueue,
    "beforePreFilter": _before_pre_filter,
    "nextPod": _next_pod,
    "permit": _permit,
    "afterPostFilter": _after_post_filter,
    "unreserve": _unreserve,
    "postBind": _post_bind,
    "preBind": _pre_bind,
}


def _pod_group_status(
    scenario: Mapping[str, Any], args: CoschedulingArgs, now: _dt.datetime
) -> dict[str, Any]:
    pg = parse_pod_group(_mapping(scenario.get("podGroup"), "podGroup"), "podGroup")
    pods = scenario.get("pods")
    pods = [] if pods is None else pods
    if not isinstance(pods, list):
        raise ValueError(f"pods: expected a list of Pod objects, got {pods!r:.80}")
    plugin = Coscheduling(args, clock=lambda: now)
    plugin.on_pod_group(None, pg)
    for i, raw in enumerate(pods):
        plugin.on_any_pod_add(as_pod(raw, f"pods[{i}]"))
    st = settle(plugin.cache, pg, now).status
    return {
        "phase": st.phase,
        "occupiedBy": st.occupied_by,
        "scheduled": st.scheduled,
        "running": st.running,
        "succeeded": st.succeeded,
        "failed": st.failed,
    }


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {value!r:.80}")
    return value


def _time(value: object) -> _dt.datetime:
    if value is None:
        return EPOCH
    try:
        return parse_rfc3339(value)
    except ValueError as e:
        raise ValueError(f"now={value!r}: {e}") from None
