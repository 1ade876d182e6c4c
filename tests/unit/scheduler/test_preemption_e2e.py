"""DefaultPreemption end to end through `koord simulate` with the default profile
(docs/rules/scheduler-preemption.md#filters-on-one-node): preemption for a pod that InterPodAffinity or
PodTopologySpread rejects until a victim is removed, which their PreFilter extensions (`remove_pod`)
must see."""

from __future__ import annotations

from typing import Any

from scheduler.simulate import simulate


def _node(name: str, cpu: str) -> Any:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}  # fmt: skip


def _pod(name: str, cpu: str, prio: int, labels: dict[str, str], node: str = "") -> Any:
    spec: dict[str, Any] = {
        "priority": prio,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec}


def test_simulate_preempts_for_anti_affinity() -> None:
    """Both nodes have room, but high's anti-affinity rejects each node holding an app=x pod: the
    priority-0 one on a is evicted (the one on b has priority 200: no victim), then high lands on a."""
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    high = _pod("high", "100m", 100, {})
    high["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    pods = [_pod("x-a", "100m", 0, {"app": "x"}, "a"), _pod("x-b", "100m", 200, {"app": "x"}, "b")]
    scenario = {"kind": "Schedule", "nodes": [_node("a", "4"), _node("b", "4")], "pods": pods,
                "pending": [high]}  # fmt: skip
    got = simulate(scenario)["pods"]["ns/high"]
    assert got == {"node": "a", "nominatedNode": "a", "victims": ["ns/x-a"]}


def test_simulate_preempts_for_topology_spread() -> None:
    """a holds one app=y pod (priority 0), b none but is full with a priority-200 pod: high (app=y,
    maxSkew 1 by hostname) skews a to 2 and does not fit b. Removing y-a makes a's skew 1: it is the
    victim and high lands on a."""
    high = _pod("high", "1", 100, {"app": "y"})
    high["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "y"}},
    }]  # fmt: skip
    pods = [_pod("y-a", "100m", 0, {"app": "y"}, "a"), _pod("big", "4", 200, {}, "b")]
    scenario = {"kind": "Schedule", "nodes": [_node("a", "4"), _node("b", "4")], "pods": pods,
                "pending": [high]}  # fmt: skip
    got = simulate(scenario)["pods"]["ns/high"]
    assert got == {"node": "a", "nominatedNode": "a", "victims": ["ns/y-a"]}
