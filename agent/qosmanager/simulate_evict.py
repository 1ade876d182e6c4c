"""``koord simulate`` kinds ``MemoryEvict`` and ``CPUEvict`` (docs/simulate.md): scenario JSON in, result
JSON out, evaluated with the very functions the memory/CPU evict strategies run (``build_tasks``,
``candidates``, the release helpers and ``evictplan.plan_evictions``). Bad input raises ``ValueError``
naming the field.

Imports: standard library, apis.{kubeobjects,nodeslo,objectcheck}, agent.podmeta, agent.system.podcgroup,
agent.qosmanager.{evictplan,memoryevict,cpuevict}. Errors name the field and its value
(docs/simulate.md#input-errors).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager import cpuevict, memoryevict
from agent.qosmanager.evictplan import node_quantity, plan_evictions
from agent.system.podcgroup import CgroupDriver
from apis import constants as c
from apis.kubeobjects import Node
from apis.nodeslo import ResourceThresholdStrategy
from apis.objectcheck import as_node, as_pods, finite_number, show

__all__ = ["simulate_cpu", "simulate_memory"]


def _strategy(sc: Mapping[str, Any]) -> ResourceThresholdStrategy | None:
    raw = sc.get("resourceUsedThresholdWithBE")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"resourceUsedThresholdWithBE: expected an object, got {raw!r}")
    try:
        return ResourceThresholdStrategy.from_dict(raw, "resourceUsedThresholdWithBE")
    except (TypeError, ValueError) as e:
        raise ValueError(f"resourceUsedThresholdWithBE: {e}") from None


def _pods(sc: Mapping[str, Any]) -> list[PodMeta]:
    out = []
    for i, pod in enumerate(as_pods(sc.get("pods"), "pods")):  # scenario JSON: the boundary
        try:
            out.append(pod_meta(pod, CgroupDriver.CGROUPFS))
        except ValueError as e:  # the only one: no usable UID
            raise ValueError(f"pods[{i}].metadata.uid: {e}") from None
    return out


def _number(sc: Mapping[str, Any], key: str, *, optional: bool = False) -> float | None:
    v = sc.get(key)
    if v is None and optional:
        return None
    return finite_number(v, key)


def _usage(sc: Mapping[str, Any], key: str) -> dict[str, float]:
    raw = sc.get(key) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{key}: expected an object {{pod uid: number}}, got {show(raw)}")
    return {str(uid): finite_number(v, f"{key}.{uid}") for uid, v in raw.items()}


def _node(sc: Mapping[str, Any]) -> Node:
    return as_node(sc.get("node"), "node")


def _features(sc: Mapping[str, Any]) -> list[str]:
    f = sc.get("features") or []
    if not isinstance(f, list) or not all(isinstance(x, str) for x in f):
        raise ValueError(f"features: expected a list of gate names, got {show(f)}")
    return f


def _op(sc: Mapping[str, Any], default: str | None) -> str:
    op = sc.get("operation", default)
    if not isinstance(op, str):
        raise ValueError("operation: required")
    return op


def _evicted(tasks: Any) -> dict[str, Any]:
    return {"evictedPods": [p.pod.name for p in plan_evictions(tasks, frozenset()) if not p.pending]}


def _pod_release(pods: list[PodMeta], amount: Callable[[PodMeta], Mapping[str, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pods:
        a = dict(amount(p))
        out[p.name] = a or None
    return out


def _enabled(s: ResourceThresholdStrategy | None) -> bool:
    return s is not None and bool(s.enable)


def simulate_memory(sc: dict[str, Any]) -> dict[str, Any]:
    op = _op(sc, "evict")
    s = _strategy(sc)
    if op == "evict":
        pods, usage = _pods(sc), _usage(sc, "podMemoryUsage")
        if not _enabled(s):
            return {"evictedPods": []}
        used = _number(sc, "nodeMemoryUsage", optional=True)
        return _evicted(memoryevict.build_tasks(_features(sc), _node(sc), used, pods, usage, s))
    if op == "evictOrder":
        feature = sc.get("feature")
        if feature not in memoryevict.GATES:
            raise ValueError(f"feature: unknown gate {feature!r}")
        order = memoryevict.candidates(str(feature), _pods(sc), _usage(sc, "podMemoryUsage"), s)
        return {"evictOrder": [p.name for p in order]}
    if op == "usedRelease":
        node = _node(sc)
        capacity = node_quantity(node, "capacity", c.RESOURCE_MEMORY) or 0
        used = _number(sc, "nodeMemoryUsage") or 0.0
        return {"releaseBytes": memoryevict.used_release(capacity, int(used), s)}
    if op == "allocatableRelease":
        pods = _pods(sc)
        release = memoryevict.allocatable_release(_node(sc), pods, s)
        return {
            "release": {name: release.get(name, 0) for name in memoryevict.TIER_NAMES},
            "podRelease": _pod_release(pods, memoryevict.allocatable_amount(release)),
        }
    if op == "configCheck":
        return {"valid": memoryevict.config_valid(str(sc.get("feature")), s)}
    raise ValueError(f"operation={op!r}: unknown MemoryEvict operation")


def _be_metrics(sc: Mapping[str, Any], key: str) -> cpuevict.BECPUMetrics | None:
    raw = sc.get(key)
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(f"{key}: expected an object or null")
    keys = ("count", "usageMilliCPU", "requestMilliCPU", "realLimitMilliCPU")
    vals = {k: finite_number(raw.get(k), f"{key}.{k}") for k in keys}
    return cpuevict.BECPUMetrics(
        int(vals["count"] or 0),
        vals["usageMilliCPU"] or 0.0,
        vals["requestMilliCPU"] or 0.0,
        vals["realLimitMilliCPU"] or 0.0,
    )


def _collect(sc: Mapping[str, Any]) -> float:
    v = _number(sc, "metricCollectIntervalSeconds", optional=True)
    return 1.0 if v is None else v


def simulate_cpu(sc: dict[str, Any]) -> dict[str, Any]:
    op = _op(sc, None)
    s = _strategy(sc)
    if op == "satisfactionRelease":
        avg, last = _be_metrics(sc, "beCPUMetricsAvg"), _be_metrics(sc, "beCPUMetricsLast")
        release = cpuevict.satisfaction_release(_node(sc), _collect(sc), s, avg, last)
        return {"releaseMilliCPU": release}
    if op == "evict":
        pods, usage = _pods(sc), _usage(sc, "podCPUUsage")
        if not _enabled(s):
            return {"evictedPods": []}
        tasks = cpuevict.build_tasks(
            _features(sc),
            _node(sc),
            _number(sc, "nodeCPUUsage", optional=True),
            pods,
            usage,
            s,
            _collect(sc),
            _be_metrics(sc, "beCPUMetricsAvg"),
            _be_metrics(sc, "beCPUMetricsLast"),
        )
        return _evicted(tasks)
    if op == "evictOrder":
        feature = sc.get("feature")
        if feature not in cpuevict.GATES:
            raise ValueError(f"feature: unknown gate {feature!r}")
        order = cpuevict.candidates(str(feature), _pods(sc), _usage(sc, "podCPUUsage"), s)
        return {"evictOrder": [p.name for p in order]}
    if op == "usedRelease":
        return {"releaseMilliCPU": cpuevict.used_release(_node(sc), _number(sc, "nodeCPUUsage"), s)}
    if op == "allocatableRelease":
        pods = _pods(sc)
        cpu_release = cpuevict.allocatable_release(_node(sc), pods, s)
        return {
            "release": {name: cpu_release.get(name, 0) for name in (c.RESOURCE_CPU, c.BATCH_CPU, c.MID_CPU)},
            "podRelease": _pod_release(pods, cpuevict.allocatable_amount(cpu_release)),
        }
    if op == "configCheck":
        return {"valid": cpuevict.config_valid(str(sc.get("feature")), s)}
    raise ValueError(f"operation={op!r}: unknown CPUEvict operation")
