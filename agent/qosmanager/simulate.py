"""``koord simulate`` adapters for the koordlet QoS-manager kinds (docs/simulate.md): each kind maps its
``operation`` to a function ``(scenario) -> result dict`` that decodes the inputs and calls the same pure
code the strategies run. To add a kind, write its operation table and a ``simulate_<kind>`` entry and
register it in ``koord/simulate.py`` KINDS.

Imports: standard library, apis.*, agent.system.nodeinfo, agent.qosmanager.{cpusuppress,cpuset_policy,
cpuburst,cpuburst_limiter}. Pure apart from its input dict. Bad input raises ``ValueError`` naming the field
and its value (docs/simulate.md#input-errors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.qosmanager import cpuburst, cpuburst_limiter
from agent.qosmanager.cpuset_policy import select_be_cpuset
from agent.qosmanager.cpusuppress import adjust_cfs_quota, be_suppress_milli
from agent.system.nodeinfo import CpuInfo
from apis.gojson import decode_into
from apis.kubeobjects import Node, Pod
from apis.nodeslo import CPUBurstStrategy, HostApplicationSpec, ResourceThresholdStrategy
from apis.nodeslo_defaults import default_cpu_burst_strategy, default_resource_threshold_strategy
from apis.objectcheck import as_node, as_pod, as_pods, bounded_int, finite_number, object_list
from apis.quantity import Quantity

__all__ = ["OPERATIONS", "simulate_cpu_burst", "simulate_cpu_suppress"]

Operation = Callable[[Mapping[str, Any]], dict[str, Any]]


# --- input decoding ---------------------------------------------------------------------------------
def _obj(s: Mapping[str, Any], key: str, *, optional: bool = False) -> dict[str, Any]:
    v = s.get(key)
    if v is None and optional:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{key}: expected an object, got {v!r:.80}")
    return v


# The scenario's Kubernetes objects: its JSON is their boundary, as the informers are the cluster's.
def _pod(s: Mapping[str, Any]) -> Pod:
    return as_pod(s.get("pod"), "pod")


def _pods(s: Mapping[str, Any]) -> list[Pod]:
    return as_pods(s.get("pods"), "pods")


def _node(s: Mapping[str, Any]) -> Node:
    return as_node(s.get("node"), "node")


def _num(s: Mapping[str, Any], key: str, *, optional: bool = False) -> float | None:
    v = s.get(key)
    if v is None and optional:
        return None
    return finite_number(v, key)


def _int(s: Mapping[str, Any], key: str) -> int:
    return bounded_int(s.get(key), key)


def _usage_map(s: Mapping[str, Any], key: str) -> dict[str, float]:
    raw = _obj(s, key, optional=True)
    out: dict[str, float] = {}
    for k, v in raw.items():
        out[str(k)] = finite_number(v, f"{key}.{k}")
    return out


def _processors(s: Mapping[str, Any], key: str) -> list[CpuInfo] | None:
    raw = s.get(key)
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ValueError(f"{key}: expected a list of processors, got {raw!r:.80}")
    out: list[CpuInfo] = []
    for i, p in enumerate(raw):
        try:
            out.append(CpuInfo(int(p["cpu"]), int(p["core"]), int(p["socket"]), int(p["node"])))
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{key}[{i}]: expected {{cpu, core, socket, node}} integers, got {p!r:.80}"
            ) from None
    return out


def _decode(default: Any, raw: Any, path: str) -> Any:
    if raw is None:
        return default
    decoded, errs = decode_into(default, raw, path)
    bad = [e for e in errs if e.fatal]
    if bad:
        raise ValueError("; ".join(str(e) for e in bad))
    return decoded


def _burst_cfg(raw: Any, path: str) -> CPUBurstStrategy:
    cfg: CPUBurstStrategy = _decode(default_cpu_burst_strategy(), raw, path)
    return cfg


# --- CPUSuppress ------------------------------------------------------------------------------------
def _suppress_quantity(s: Mapping[str, Any]) -> dict[str, Any]:
    threshold: ResourceThresholdStrategy = _decode(
        default_resource_threshold_strategy(),
        s.get("resourceUsedThresholdWithBE"),
        "resourceUsedThresholdWithBE",
    )
    apps = [
        HostApplicationSpec.from_dict(a, f"hostApplications[{i}]")
        for i, a in enumerate(object_list(s, "hostApplications"))
    ]
    node_used = _num(s, "nodeCPUUsage")
    assert node_used is not None
    milli, ls_used = be_suppress_milli(
        _node(s),
        node_used,
        _pods(s),
        _usage_map(s, "podCPUUsage"),
        apps,
        _usage_map(s, "hostApplicationCPUUsage"),
        threshold,
    )
    return {"beSuppressMilliCPU": milli, "lsUsedCPUCores": ls_used}


def _cpuset_selection(s: Mapping[str, Any]) -> dict[str, Any]:
    return {"cpuset": select_be_cpuset(_int(s, "cpus"), _processors(s, "processors") or [])}


def _cfs_quota_adjust(s: Mapping[str, Any]) -> dict[str, Any]:
    node = _node(s)
    cap = ((node.get("status") or {}).get("capacity") or {}).get("cpu")
    cores = Quantity.from_json(cap).value() if cap is not None else 0
    cur = _int(s, "currentBECFSQuota")
    new = adjust_cfs_quota(cores, _int(s, "beSuppressMilliCPU"), cur)
    return {"beCFSQuota": cur if new is None else new, "written": new is not None}


# --- CPUBurst ---------------------------------------------------------------------------------------
def _static_burst(s: Mapping[str, Any]) -> dict[str, Any]:
    pod = _pod(s)
    cfg = cpuburst.pod_burst_config(pod, _burst_cfg(s.get("cpuBurstConfig"), "cpuBurstConfig"))
    per_container, total = cpuburst.static_burst(pod, cfg)
    return {"containerCPUBurst": per_container, "podCPUBurst": total}


def _node_state(s: Mapping[str, Any]) -> dict[str, Any]:
    pct = s.get("sharePoolThresholdPercent")
    threshold = 50 if pct is None else _int(s, "sharePoolThresholdPercent")
    processors = _processors(s, "processors")
    state = cpuburst.share_pool_state(
        threshold,
        _num(s, "nodeCPUUsage", optional=True),
        len(processors) if processors else None,
        _pods(s),
        _usage_map(s, "podCPUUsage"),
    )
    return {"nodeState": state.value}


def _limiter_allow(s: Mapping[str, Any]) -> dict[str, Any]:
    period = _int(s, "cfsQuotaBurstPeriodSeconds")
    tokens = _int(s, "currentToken")
    if period < 0:
        return {"allow": True, "currentToken": tokens}
    pct = s.get("cfsQuotaBurstPercent")
    if pct is None or _int(s, "cfsQuotaBurstPercent") < 100:
        return {"allow": False, "currentToken": tokens}
    capacity = period * (_int(s, "cfsQuotaBurstPercent") - 100)
    seconds = int(_num(s, "secondsSinceLastUpdate") or 0)
    allowed, tokens = cpuburst_limiter.limiter_allow(
        tokens, capacity, seconds, _int(s, "currentUsageScalePercent")
    )
    return {"allow": allowed, "currentToken": tokens}


def _pod_burst_config(s: Mapping[str, Any]) -> dict[str, Any]:
    raw = s.get("nodeCPUBurstConfig")
    node_cfg = None if raw is None else _decode(CPUBurstStrategy(), raw, "nodeCPUBurstConfig")
    return {"cpuBurstConfig": cpuburst.pod_burst_config(_pod(s), node_cfg).to_dict()}


OPERATIONS: dict[str, dict[str, Operation]] = {
    "CPUSuppress": {
        "suppressQuantity": _suppress_quantity,
        "cpusetSelection": _cpuset_selection,
        "cfsQuotaAdjust": _cfs_quota_adjust,
    },
    "CPUBurst": {
        "staticBurst": _static_burst,
        "nodeState": _node_state,
        "limiterAllow": _limiter_allow,
        "podBurstConfig": _pod_burst_config,
    },
}


def _dispatch(kind: str, scenario: Mapping[str, Any], default: str | None = None) -> dict[str, Any]:
    op = scenario.get("operation", default)
    table = OPERATIONS[kind]
    if not isinstance(op, str) or op not in table:
        raise ValueError(f"operation={op!r}: unknown for kind {kind} (known: {', '.join(sorted(table))})")
    return table[op](scenario)


def simulate_cpu_suppress(scenario: dict[str, Any]) -> dict[str, Any]:
    return _dispatch("CPUSuppress", scenario)


def simulate_cpu_burst(scenario: dict[str, Any]) -> dict[str, Any]:
    return _dispatch("CPUBurst", scenario)
