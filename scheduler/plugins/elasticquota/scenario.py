"""``koord simulate`` for kind ``ElasticQuota``
(docs/rules/scheduler-elasticquota.md#koord-simulate-kind-elasticquota): ``operation`` selects one rule:
``redistribute`` (one calculator, one resource), ``runtime`` (the whole tree's steady state), ``admit``
(PreFilter), ``canPreempt``, ``eligibleToPreempt``, ``selectVictims`` and ``revokeList``. Results are
integers in the core's units (cpu milli-cores, other resources whole units). Bad input raises ValueError
naming the field.
Imports: the standard library, apis (elasticquota, objectcheck, pod, quantity), scheduler.framework and
this package. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from apis.elasticquota import DEFAULT_QUOTA, ROOT_QUOTA, SYSTEM_QUOTA, ElasticQuota, parse_elastic_quota
from apis.objectcheck import as_pod, as_pods, bounded_int
from apis.pod import metadata
from apis.quantity import QuantityError, parse_resource_list
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.admission import PostFilterState
from scheduler.plugins.elasticquota.args import ArgsError, ElasticQuotaArgs
from scheduler.plugins.elasticquota.calculator import Share, redistribute
from scheduler.plugins.elasticquota.plugin import ElasticQuota as Plugin
from scheduler.plugins.elasticquota.preemption import select_victims_on_node
from scheduler.plugins.elasticquota.quotainfo import SPECIAL_CHILDREN
from scheduler.plugins.elasticquota.resources import Res
from scheduler.plugins.elasticquota.revoke import revoke_list

CODES: Final = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
}
NODE_STATUSES: Final = {
    "Unschedulable": Code.UNSCHEDULABLE,
    "UnschedulableAndUnresolvable": Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
}
Scenario = Mapping[str, Any]


def simulate(scenario: Scenario) -> dict[str, Any]:
    operation = scenario.get("operation")
    run = _OPERATIONS.get(operation) if isinstance(operation, str) else None
    if run is None:
        raise ValueError(f"operation={operation!r:.80}: expected one of {', '.join(_OPERATIONS)}")
    return run(scenario)


# --- input helpers ---------------------------------------------------------------------------------------
def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: expected an object, got {value!r:.80}")
    return value


def _args(scenario: Scenario) -> ElasticQuotaArgs:
    try:
        return ElasticQuotaArgs.from_args(_mapping(scenario.get("args"), "args"))
    except ArgsError as e:
        raise ValueError(f"args: {e}") from None


def _res(value: object, where: str) -> Res:
    """A ResourceList of quantities in the core's units."""
    try:
        return r.of_quantities(parse_resource_list(_mapping(value, where)))
    except QuantityError as e:
        raise ValueError(f"{where}: {e}") from None


def _res_map(value: object, where: str) -> dict[str, Res]:
    return {str(k): _res(v, f"{where}.{k}") for k, v in _mapping(value, where).items()}


def _quotas(scenario: Scenario) -> list[ElasticQuota]:
    value = scenario.get("quotas")
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"quotas: expected a list of ElasticQuota objects, got {value!r:.80}")
    return [parse_elastic_quota(q, f"quotas[{i}]") for i, q in enumerate(value)]


def _names(scenario: Scenario) -> list[str]:
    value = scenario.get("quotaNames")
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise ValueError(f"quotaNames: expected a list of non-empty strings, got {value!r:.80}")
    return list(value)


def _plugin(scenario: Scenario, names: bool = False) -> Plugin:
    plugin = Plugin(_args(scenario))
    plugin.manager.set_cluster_total(_res(scenario.get("clusterTotal"), "clusterTotal"))
    for quota in _quotas(scenario):
        plugin.upsert_quota(quota)
    if names:
        for name in _names(scenario):  # known by name only: no namespace, so it matches any
            if name not in (ROOT_QUOTA, *SPECIAL_CHILDREN):
                plugin.upsert_quota(ElasticQuota(name))
    return plugin


def _bool(value: object, where: str, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"{where}={value!r:.80}: expected a boolean")
    return value


def _name(pod: Mapping[str, Any]) -> str:
    name = metadata(pod).get("name")
    return name if isinstance(name, str) else ""


# --- operations ------------------------------------------------------------------------------------------
def _redistribute(scenario: Scenario) -> dict[str, Any]:
    total = bounded_int(scenario.get("totalResource"), "totalResource")
    items = scenario.get("quotas")
    if not isinstance(items, list):
        raise ValueError(
            f"quotas: expected a list of {{name, sharedWeight, request, min}}, got {items!r:.80}"
        )
    shares: list[Share] = []
    for i, item in enumerate(items):
        where = f"quotas[{i}]"
        q = _mapping(item, where)
        name = q.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name={name!r:.80}: expected a non-empty string")
        if any(s.name == name for s in shares):
            raise ValueError(f"{where}.name={name!r:.80}: listed twice")
        ints = {
            key: bounded_int(q.get(key, 0), f"{where}.{key}")
            for key in ("sharedWeight", "request", "min", "guarantee")
        }
        lend = _bool(q.get("allowLentResource"), f"{where}.allowLentResource", True)
        shares.append(
            Share(name, ints["sharedWeight"], ints["request"], ints["min"], ints["guarantee"], lend)
        )
    return {"runtime": redistribute(total, shares)}


def _runtime(scenario: Scenario) -> dict[str, Any]:
    plugin = _plugin(scenario)
    mgr = plugin.manager
    for field, attr in (("requests", "self_request"), ("used", "self_used")):
        for name, res in _res_map(scenario.get(field), field).items():
            info = mgr.quotas.get(name)
            if info is None or name == ROOT_QUOTA:
                raise ValueError(f"{field}.{name}: not a quota of the scenario")
            setattr(info, attr, r.mask(res, info.max))
    mgr.invalidate()  # the own sums were set directly
    mgr.refresh()
    runtime: dict[str, Res] = {}
    for name in sorted(mgr.quotas):
        value = mgr.refresh_runtime(name)
        runtime[name] = {} if value is None else value
    return {
        "runtime": runtime,
        "request": {n: dict(q.request) for n, q in sorted(mgr.quotas.items())},
        "childRequest": {n: dict(q.child_request) for n, q in sorted(mgr.quotas.items())},
        "autoScaleMin": {
            n: dict(q.auto_scale_min)
            for n, q in sorted(mgr.quotas.items())
            if n not in (ROOT_QUOTA, SYSTEM_QUOTA, DEFAULT_QUOTA)
        },
    }


def _admit(scenario: Scenario) -> dict[str, Any]:
    plugin = _plugin(scenario)
    for pod in as_pods(scenario.get("pods"), "pods"):
        plugin.on_any_pod_add(pod)
    pod = as_pod(scenario.get("pod"), "pod")
    plugin.on_any_pod_add(pod)
    mgr = plugin.manager
    mgr.refresh()
    for name, res in _res_map(scenario.get("runtimeOverride"), "runtimeOverride").items():
        info = mgr.quotas.get(name)
        if info is None:
            raise ValueError(f"runtimeOverride.{name}: not a quota of the scenario")
        info.runtime = res
    st = plugin.pre_filter(CycleState(0.0), pod, Snapshot())
    return {"code": CODES[st.code], "reason": st.message()}


def _can_preempt(scenario: Scenario) -> dict[str, Any]:
    plugin = _plugin(scenario, names=True)
    pod, victim = as_pod(scenario.get("pod"), "pod"), as_pod(scenario.get("victim"), "victim")
    return {"canPreempt": plugin.can_preempt(pod, victim)}


def _eligible(scenario: Scenario) -> dict[str, Any]:
    plugin = _plugin(scenario, names=True)
    pod = as_pod(scenario.get("pod"), "pod")
    raw_status = scenario.get("nominatedNodeStatus", "Unschedulable")
    if not isinstance(raw_status, str) or raw_status not in NODE_STATUSES:
        raise ValueError(
            f"nominatedNodeStatus={raw_status!r:.80}: expected Unschedulable or UnschedulableAndUnresolvable"
        )
    nodes = scenario.get("nodes")
    if nodes is None:
        nodes = []
    if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
        raise ValueError(f"nodes: expected a list of node names, got {nodes!r:.80}")
    node_pods: dict[str, list[Mapping[str, Any]]] = {n: [] for n in nodes}
    for p in as_pods(scenario.get("nodePods"), "nodePods"):
        node = p.get("spec", {}).get("nodeName")
        if isinstance(node, str) and node in node_pods:
            node_pods[node].append(p)
    eligible, message = plugin.eligible_to_preempt(pod, NODE_STATUSES[raw_status], node_pods)
    return {"eligible": eligible, "message": message}


def _select_victims(scenario: Scenario) -> dict[str, Any]:
    plugin = _plugin(scenario, names=True)
    node = scenario.get("nodeName")
    if not isinstance(node, str) or not node:
        raise ValueError(f"nodeName={node!r:.80}: expected a non-empty string")
    pod = as_pod(scenario.get("pod"), "pod")
    node_pods = as_pods(scenario.get("nodePods"), "nodePods")
    raw = _mapping(scenario.get("postFilterState"), "postFilterState")
    cache = raw.get("quotaPodCache")
    if cache is None:
        cache = []
    if not isinstance(cache, list) or not all(isinstance(n, str) for n in cache):
        raise ValueError(f"postFilterState.quotaPodCache: expected a list of pod names, got {cache!r:.80}")
    quota_max = raw.get("quotaMax")
    state = PostFilterState(
        plugin.resolve(pod),
        _res(raw.get("used"), "postFilterState.used"),
        {},
        _res(raw.get("usedLimit"), "postFilterState.usedLimit"),
        frozenset(cache),
        None if quota_max is None else frozenset(_res(quota_max, "postFilterState.quotaMax")),
    )
    victims, violating, st = select_victims_on_node(
        pod,
        node,
        node_pods,
        state,
        lambda v: plugin.can_preempt(pod, v),
        lambda _pods: Status.success(),
        key=_name,
    )
    out: dict[str, Any] = {
        "code": CODES[st.code],
        "victims": [_name(v) for v in victims],
        "numViolatingVictim": violating,
    }
    if not st.is_success():
        out["message"] = st.message()
    return out


def _revoke_list(scenario: Scenario) -> dict[str, Any]:
    used = _res(scenario.get("used"), "used")
    runtime = _res(scenario.get("runtime"), "runtime")
    pods = as_pods(scenario.get("pods"), "pods")
    return {"revokedPods": [_name(p) for p in revoke_list(used, runtime, pods)]}


_OPERATIONS: Final[dict[str, Callable[[Scenario], dict[str, Any]]]] = {
    "redistribute": _redistribute,
    "runtime": _runtime,
    "admit": _admit,
    "canPreempt": _can_preempt,
    "eligibleToPreempt": _eligible,
    "selectVictims": _select_victims,
    "revokeList": _revoke_list,
}
