"""The ``CPUSetAllocator`` reconcile strategy (upstream runtime-hook plugin ``CPUSetAllocator``, gate
``CPUSetAllocator``, on by default; every 10 s as the runtime-hooks reconciler): each tick it computes the
share pools from the snapshot's CPU topology and pods (docs/rules/koordlet-cpuset.md#share-pools), applies
the container cpuset rule (docs/rules/koordlet-cpuset.md#container-cpuset) to every container and lifts
CFS quota of pods with their own cpuset (docs/rules/koordlet-cpuset.md#cfs-quota). The result is one
leveled batch (pods, then containers) so that a cgroup v1 pod dir is widened before a container below it
gets CPUs outside it (docs/rules/koordlet-cpuset.md#reconcile). The besteffort pods CPU suppress governs
are left to it (docs/rules/koordlet-cpuset.md#with-cpu-suppress). ``decide`` is pure.

Imports: standard library, apis.*, agent.{podmeta,system.*,resourceexecutor.actions,topology.*},
agent.qosmanager.{framework,cpuset_policy}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agent.podmeta import PodMeta
from agent.qosmanager.cpuset_policy import (
    annotation_json,
    cpu_manager_policy,
    pod_has_cpu_allocation,
    reserved_cpus,
    system_exclusive_cpus,
)
from agent.qosmanager.framework import Decision, Snapshot
from agent.resourceexecutor.actions import CgroupWrite
from agent.system.cgroup import CPU_QUOTA, CPUSET_CPUS, CgroupFile, CgroupVersion
from agent.system.podcgroup import KubeQOS, qos_cgroup_dir
from agent.topology.cpusetrule import CPUSetRule, cfs_quota_unset, container_cpuset, cpuset_cpus
from agent.topology.sharepools import share_pools
from apis import constants as c
from apis.cpuset import CPUSetError, parse_cpuset
from apis.kubeobjects import KubeObject
from apis.pod import pod_annotations, pod_labels, spec

__all__ = ["CPUSetAllocatorConfig", "CPUSetAllocatorStrategy", "build_rule", "decide_cpuset", "suppress_owns"]

NAME: Final = "CPUSetAllocator"
ANNOTATION_POD_CPU_ALLOCS: Final = "node.koordinator.sh/pod-cpu-allocs"
GATE_BE_CPU_SUPPRESS: Final = "BECPUSuppress"
GATE_BE_CPU_MANAGER: Final = "BECPUManager"
RUNTIME_CLASS_KATA: Final = "kata"


@dataclass(frozen=True)
class CPUSetAllocatorConfig:
    """``nrt_annotations``: the NodeResourceTopology annotations (reservation, system-qos-resource,
    cpu-manager-policy, pod-cpu-allocs), None → the node's; ``kubelet_static_assigned``: more CPUs the
    kubelet static CPU manager assigned exclusively, besides the NRT's ``pod-cpu-allocs`` (both only read
    when the policy is ``static``); ``unset_cfs_quota``: False is upstream's
    ``DisableUnsetCPUQuotaForCPUSetPod``."""

    nrt_annotations: Mapping[str, str] | None = None
    kubelet_static_assigned: frozenset[int] = field(default_factory=frozenset)
    unset_cfs_quota: bool = True


def _annotated(snapshot: Snapshot, config: CPUSetAllocatorConfig) -> KubeObject | None:
    if config.nrt_annotations is not None:
        return {"metadata": {"annotations": dict(config.nrt_annotations)}}
    return snapshot.node


def _system_qos_cpuset(annotated: KubeObject | None) -> str:
    """The SYSTEM-QoS ``cpuset`` whether exclusive or not; absent, undecodable or not a cpulist → ``""``."""
    res = annotation_json(annotated, c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE)
    text = None if res is None else next((v for k, v in res.items() if k.lower() == "cpuset"), None)
    if not isinstance(text, str):
        return ""
    try:
        parse_cpuset(text)
    except CPUSetError:
        return ""
    return text


def _kubelet_allocs(annotated: KubeObject | None) -> frozenset[int]:
    """CPUs of the ``node.koordinator.sh/pod-cpu-allocs`` entries ``managedByKubelet`` (the NRT reports the
    pods the kubelet static CPU manager placed there); malformed entries name no CPU."""
    meta = (annotated or {}).get("metadata")
    ann = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = ann.get(ANNOTATION_POD_CPU_ALLOCS) if isinstance(ann, Mapping) else None
    try:
        allocs = json.loads(text) if isinstance(text, str) else None
    except (ValueError, RecursionError):
        return frozenset()
    out: set[int] = set()
    for entry in allocs if isinstance(allocs, list) else ():
        if isinstance(entry, dict) and entry.get("managedByKubelet") is True:
            try:
                out |= parse_cpuset(str(entry.get("cpuset") or ""))
            except CPUSetError:
                continue
    return frozenset(out)


def build_rule(snapshot: Snapshot, config: CPUSetAllocatorConfig) -> CPUSetRule | None:
    """The rule of this tick: share pools over the snapshot's topology and pods, the kubelet policy and the
    SYSTEM-QoS cpuset from the annotations; None without a CPU topology."""
    if snapshot.topology is None:
        return None
    annotated = _annotated(snapshot, config)
    policy = cpu_manager_policy(annotated)
    static: frozenset[int] = frozenset()
    if policy == "static":
        static = config.kubelet_static_assigned | _kubelet_allocs(annotated)
    ls, be = share_pools(
        snapshot.topology.cpus,
        [p.pod for p in snapshot.pods],
        reserved=reserved_cpus(annotated),
        system_exclusive=system_exclusive_cpus(annotated),
        kubelet_static_assigned=static,
    )
    return CPUSetRule(tuple(ls), tuple(be), policy, _system_qos_cpuset(annotated))


def suppress_owns(pod: PodMeta, snapshot: Snapshot) -> bool:
    """CPU suppress writes this pod's cpusets: it sits below the besteffort QoS dir, CPU suppress runs
    (gate ``BECPUSuppress``), and it is not a pod CPU suppress leaves alone under ``BECPUManager`` (one
    with a CPU allocation)."""
    be_dir = qos_cgroup_dir(snapshot.cgroup_driver, KubeQOS.BESTEFFORT)
    if not pod.cgroup_dir.startswith(be_dir) or not snapshot.gates.get(GATE_BE_CPU_SUPPRESS, False):
        return False
    return not (snapshot.gates.get(GATE_BE_CPU_MANAGER, False) and pod_has_cpu_allocation(pod.pod))


def _is_kata(pod: PodMeta) -> bool:
    return spec(pod.pod).get("runtimeClassName") == RUNTIME_CLASS_KATA


def _container_cpus(
    pod: PodMeta, cgroup_dir: str, rule: CPUSetRule | None, be_manager: bool
) -> frozenset[int]:
    """The CPUs to write for one container; empty = no write (leave unchanged, explicit empty, or a rule
    error, which upstream logs and skips)."""
    labels, annotations = pod_labels(pod.pod), pod_annotations(pod.pod)
    try:
        value = container_cpuset(labels, annotations, cgroup_dir, rule, be_cpu_manager=be_manager)
        return frozenset() if not value else cpuset_cpus(value)
    except ValueError:  # an undecodable resource-status or cpuset (CPUSetError is one)
        return frozenset()


def _write(
    file: CgroupFile[Any], cgroup_dir: str, value: Any, pod: PodMeta, container_id: str | None, level: int
) -> CgroupWrite:
    return CgroupWrite(NAME, file, cgroup_dir, value, pod, container_id, True, level)


def decide_cpuset(snapshot: Snapshot, config: CPUSetAllocatorConfig) -> Decision[None]:
    rule = build_rule(snapshot, config)
    be_manager = snapshot.gates.get(GATE_BE_CPU_MANAGER, False)
    pods: list[CgroupWrite] = []
    ctrs: list[CgroupWrite] = []
    for pod in snapshot.pods:
        unset = config.unset_cfs_quota and cfs_quota_unset(pod_labels(pod.pod), pod_annotations(pod.pod))
        targets: set[int] = set()
        if not suppress_owns(pod, snapshot) and not _is_kata(pod):  # kata: no container cgroups here
            for ctr in pod.containers:
                cpus = _container_cpus(pod, ctr.cgroup_dir, rule, be_manager)
                if cpus:
                    targets |= cpus
                    ctrs.append(_write(CPUSET_CPUS, ctr.cgroup_dir, sorted(cpus), pod, ctr.container_id, 1))
        if targets and snapshot.cgroup_version is CgroupVersion.V1:
            # docs/rules/koordlet-cpuset.md#reconcile: v1 refuses a child CPU outside its parent's set.
            current = snapshot.cgroups.read(CPUSET_CPUS, pod.cgroup_dir)
            if current is not None and not targets <= set(current):
                widened = sorted(targets | set(current))
                pods.append(_write(CPUSET_CPUS, pod.cgroup_dir, widened, pod, None, 0))
        if unset:
            pods.append(_write(CPU_QUOTA, pod.cgroup_dir, -1, pod, None, 0))
            if not _is_kata(pod):
                ctrs += [_write(CPU_QUOTA, x.cgroup_dir, -1, pod, x.container_id, 1) for x in pod.containers]
    if not pods and not ctrs:
        return Decision()
    return Decision(leveled_writes=(tuple(pods), tuple(ctrs)))


class CPUSetAllocatorStrategy:
    """The cpuset reconciler (registered with gate ``CPUSetAllocator``, default on), every 10 s."""

    name: str = NAME
    interval_seconds: float = 10.0

    def decide(self, snapshot: Snapshot, config: CPUSetAllocatorConfig, state: None) -> Decision[None]:
        return decide_cpuset(snapshot, config)
