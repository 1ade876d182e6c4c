"""Oracle for NodeNUMAResource's Filter and Score (docs/rules/scheduler-nodenumaresource.md#filter,
#score): each rule node by node, in plain Python over the row's Node object, the pod, and the plugin's
per-node topology and allocation (the trial allocation itself is the production allocator, which the
CPUSet scenarios check). Nothing is vectorised and nothing is skipped: every row runs every step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from apis.pod import pod_requests
from apis.qos import priority_class_with_default
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import Status
from scheduler.framework.units import to_values
from scheduler.plugins.nodenumaresource.accumulator import AllocationError
from scheduler.plugins.nodenumaresource.cpuset_alloc import Request, allocate_cpuset
from scheduler.plugins.nodenumaresource.plugin import NodeNUMAResource

NAME = "NodeNUMAResource"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _ann_json(pod: Mapping[str, Any], key: str) -> dict[str, Any]:
    text = _map(_map(pod.get("metadata")).get("annotations")).get(key)
    return json.loads(text) if text else {}


def _pod(plugin: NodeNUMAResource, pod: Mapping[str, Any]) -> dict[str, Any] | None:
    """PreFilter again, plainly: None when skipped; raises on a bad annotation."""
    spec = _ann_json(pod, "scheduling.koordinator.sh/resource-spec")
    numa = _ann_json(pod, "scheduling.koordinator.sh/numa-topology-spec").get("numaTopologyPolicy", "")
    requests = pod_requests(pod)
    if all(q.is_zero() for q in requests.values()):
        return None
    values = to_values(requests)
    cpu = values.get("cpu", 0)
    out: dict[str, Any] = {"requests": values, "cpu": cpu, "need": cpu // 1000, "bind": False,
                           "required": "", "preferred": "", "exclusive": "", "numa": numa}  # fmt: skip
    qos = _map(_map(pod.get("metadata")).get("labels")).get("koordinator.sh/qosClass")
    if qos in ("LSE", "LSR") and priority_class_with_default(pod).value == "koord-prod":
        bind = spec.get("preferredCPUBindPolicy", "")
        bind = plugin.default_bind_policy if bind in ("", "Default") else bind
        required = spec.get("requiredCPUBindPolicy", "")
        required = plugin.default_bind_policy if required == "Default" else required
        bind = required or bind
        if bind in ("FullPCPUs", "SpreadByPCPUs") and cpu % 1000 == 0 and cpu > 0:
            exclusive = spec.get("preferredCPUExclusivePolicy", "")
            out.update(bind=True, required=required, preferred=bind, exclusive=exclusive)
    return out


def _ratio(annotations: Mapping[str, Any]) -> float:
    text = annotations.get("node.koordinator.sh/resource-amplification-ratio")
    if text is None:
        return -1.0
    ratios = json.loads(text) or {}  # ValueError for a bad annotation
    if not isinstance(ratios, dict):
        raise ValueError(ratios)
    if any(isinstance(v, float) and not math.isfinite(v) for v in ratios.values()):
        raise ValueError(ratios)  # Go's decoder refuses a number past float64 (1e999)
    value = ratios.get("cpu", -1.0)
    if isinstance(value, bool) or not isinstance(value, int | float | None):
        raise ValueError(value)
    return float(value or 0)


def _amplify(v: int, ratio: float) -> int:
    return v if ratio <= 1 else math.ceil(v * ratio)


def oracle_filter(plugin: NodeNUMAResource, pod: Mapping[str, Any], snapshot: Snapshot, i: int) -> Status:
    p = _pod(plugin, pod)
    if p is None:
        return Status.success()
    info = snapshot.infos[i]
    meta = _map(info.node.get("metadata"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    opts = plugin.cache.options.get(info.name)
    held = plugin.cache.allocation(info.name)

    def no(code: str, reason: str) -> Status:
        return (Status.unresolvable if code == "UU" else Status.unschedulable)(reason, plugin=NAME)

    node_numa = labels.get("node.koordinator.sh/numa-topology-policy") or (opts.numa_policy if opts else "")
    if node_numa and p["numa"] and node_numa != p["numa"]:
        return no("UU", "node(s) NUMA Topology policy not match")
    numa = p["numa"] or node_numa
    kubelet = opts.kubelet if opts else None
    label = labels.get("node.koordinator.sh/cpu-bind-policy")
    full_kubelet = (
        kubelet is not None
        and kubelet.policy == "static"
        and kubelet.options.get("full-pcpus-only") == "true"
    )
    node_policy = "FullPCPUsOnly" if label == "FullPCPUsOnly" or full_kubelet else (
        "SpreadByPCPUs" if label == "SpreadByPCPUs" else "None")  # fmt: skip
    bind = p["bind"]
    if not bind and p["cpu"] and node_policy != "None":
        if p["cpu"] % 1000:
            return no("UU", "the requested CPUs must be integer")
        bind = True
    if p["cpu"]:
        try:
            ratio = _ratio(annotations)
        except ValueError:
            return no("UU", "node(s) invalid CPU amplification ratio")
        if ratio > 1:
            if opts is not None and not opts.topology.valid:
                return no("UU", "node(s) invalid CPU Topology")
            n_held = len(held.cpus) * 1000 if opts is not None else 0
            requested = info.requested.get("cpu", 0)
            if requested >= n_held > 0:
                requested = requested - n_held + _amplify(n_held, ratio)
            want = _amplify(p["cpu"], ratio) if bind else p["cpu"]
            if want > info.allocatable.get("cpu", 0) - requested:
                return no("U", "Insufficient amplified cpu")
    if not bind:
        return Status.success()
    if opts is None or not opts.topology.valid:
        return no("UU", "node(s) invalid CPU Topology")
    required = {"FullPCPUsOnly": "FullPCPUs", "SpreadByPCPUs": "SpreadByPCPUs"}.get(
        node_policy, p["required"]
    )
    if p["required"] and p["required"] != required:
        return no("UU", "node(s) cpu bind policy conflicts with pod's required cpu bind policy")
    if required == "FullPCPUs" and p["need"] % opts.topology.cpus_per_core:
        return no("UU", "node(s) requested cpus not multiple cpus per core")
    if required and not numa:
        strategy = labels.get("node.koordinator.sh/numa-allocate-strategy") or plugin.default_strategy
        try:
            allocate_cpuset(opts, held, Request(p["need"], required, True, p["exclusive"], str(strategy)))
        except AllocationError as e:
            return no("U", str(e))
    return Status.success()


def oracle_score(plugin: NodeNUMAResource, pod: Mapping[str, Any], snapshot: Snapshot, i: int) -> int:
    p = _pod(plugin, pod)
    if p is None:
        return 0
    info = snapshot.infos[i]
    meta = _map(info.node.get("metadata"))
    labels, annotations = _map(meta.get("labels")), _map(meta.get("annotations"))
    opts = plugin.cache.options.get(info.name)
    label = labels.get("node.koordinator.sh/cpu-bind-policy")
    kubelet = opts.kubelet if opts else None
    full_kubelet = (
        kubelet is not None
        and kubelet.policy == "static"
        and kubelet.options.get("full-pcpus-only") == "true"
    )
    forced = label in ("FullPCPUsOnly", "SpreadByPCPUs") or full_kubelet
    bind = p["bind"] or (bool(p["cpu"]) and forced)
    if bind and p["cpu"] % 1000:
        return 0
    if bind and (opts is None or not opts.topology.valid):
        return 0
    try:
        ratio = _ratio(annotations)
    except ValueError:
        return 0
    requests = dict(p["requests"])
    requested = dict(info.requested)
    if p["cpu"] and ratio > 1:
        if bind:
            requests["cpu"] = _amplify(requests["cpu"], ratio)
        if opts is not None and not opts.topology.valid:
            return 0
        n_held = len(plugin.cache.allocation(info.name).cpus) * 1000 if opts is not None else 0
        requested["cpu"] = requested.get("cpu", 0) - n_held + _amplify(n_held, ratio)
    total = weights = 0
    for name, weight in dict(plugin.scoring.resources).items():
        if name not in ("cpu", "memory", "ephemeral-storage"):
            scalar = "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))
            if not scalar or not requests.get(name):
                continue
        alloc = info.allocatable.get(name, 0)
        if not alloc:
            continue
        req = requested.get(name, 0) + requests.get(name, 0)
        if plugin.scoring.type == "MostAllocated":
            s = min(req, alloc) * 100 // alloc
        else:
            s = 0 if req > alloc else (alloc - req) * 100 // alloc
        total += s * weight
        weights += weight
    return total // weights if weights else 0
