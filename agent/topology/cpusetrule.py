"""The container cpuset rule of the koordlet's ``CPUSetAllocator``
(docs/rules/koordlet-cpuset.md#container-cpuset) and when CFS quota is lifted
(docs/rules/koordlet-cpuset.md#cfs-quota); plus ``simulate_container_cpuset``, the ``containerCPUSet``
operation of the ``koord simulate`` kind ``CPUSet`` (docs/rules/koordlet-cpuset.md#simulate). Pure.

Imports: standard library, apis.*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from apis.cpuset import CPUSetError, format_cpuset, parse_cpuset
from apis.numa import ResourceStatus, parse_resource_status
from apis.qos import QoSClass, qos_class_by_name

__all__ = [
    "CPUSetRule",
    "ContainerCPUSetInputError",
    "cfs_quota_unset",
    "container_cpuset",
    "cpuset_cpus",
    "is_numa_aware",
    "simulate_container_cpuset",
]

GATE_BE_CPU_MANAGER: Final = "BECPUManager"
KUBELET_POLICY_STATIC: Final = "static"
BATCH_CPU: Final = "kubernetes.io/batch-cpu"


@dataclass(frozen=True)
class CPUSetRule:
    """What the rule reads from the NodeResourceTopology (or computes the same way): the LS and BE share
    pools (``{"socket", "node", "cpuset"}`` each, in pool order), the kubelet CPU manager policy name and
    the SYSTEM-QoS cpuset (``""`` = none configured)."""

    share_pools: tuple[Mapping[str, Any], ...] = ()
    be_share_pools: tuple[Mapping[str, Any], ...] = ()
    kubelet_policy: str = ""
    system_qos_cpuset: str = ""


def _qos(labels: Mapping[str, Any] | None) -> QoSClass:
    return qos_class_by_name((labels or {}).get(c.LABEL_POD_QOS))


def is_numa_aware(status: ResourceStatus) -> bool:
    """Some NUMA entry allocates CPU: non-zero ``cpu`` or ``kubernetes.io/batch-cpu`` whose integer value
    (rounded up) is > 0."""
    for entry in status.numa_node_resources:
        if not entry.resources:
            continue
        cpu = entry.resources.get("cpu")
        batch = entry.resources.get(BATCH_CPU)
        if (cpu is not None and not cpu.is_zero()) or (batch is not None and batch.value() > 0):
            return True
    return False


def _join_nodes(pools: Sequence[Mapping[str, Any]], status: ResourceStatus) -> str:
    """For every NUMA entry in order, every pool of that node id (the socket is not compared), joined."""
    parts = [
        str(pool.get("cpuset") or "")
        for entry in status.numa_node_resources
        for pool in pools
        if pool.get("node") == entry.node
    ]
    return ",".join(parts)


def container_cpuset(
    labels: Mapping[str, Any] | None,
    annotations: Mapping[str, Any] | None,
    cgroup_parent: str,
    rule: CPUSetRule | None,
    *,
    be_cpu_manager: bool,
) -> str | None:
    """The cpuset for one container, as the rule builds it (pool cpusets joined as written): None = leave
    the cpuset unchanged, ``""`` = explicitly empty (inherit). ``ValueError`` when the pod's
    resource status does not decode. Steps as docs/rules/koordlet-cpuset.md#container-cpuset lists them."""
    status = parse_resource_status(annotations)
    if status.cpuset != "":
        return status.cpuset
    if rule is None:  # no topology yet: nothing but the pod's own cpuset is known
        return None
    qos = _qos(labels)
    if is_numa_aware(status):
        if qos is QoSClass.BE and be_cpu_manager:
            return _join_nodes(rule.be_share_pools, status)
        if qos is not QoSClass.BE:
            return _join_nodes(rule.share_pools, status)
    if qos is QoSClass.SYSTEM and rule.system_qos_cpuset != "":
        return rule.system_qos_cpuset
    all_ls = ",".join(str(p.get("cpuset") or "") for p in rule.share_pools)
    if qos is QoSClass.LS:
        return all_ls
    if "besteffort" in cgroup_parent:
        return ""
    if rule.kubelet_policy == KUBELET_POLICY_STATIC:
        return None
    return all_ls


def cpuset_cpus(value: str) -> frozenset[int]:
    """The CPUs of a rule result: pool cpusets joined as written may hold empty elements (an emptied pool),
    which name no CPU; anything else must be a cpulist (``CPUSetError``)."""
    return parse_cpuset(",".join(part for part in value.split(",") if part != ""))


def cfs_quota_unset(labels: Mapping[str, Any] | None, annotations: Mapping[str, Any] | None) -> bool:
    """The reconciler lifts CFS quota (−1) of a pod and its containers when the pod has its own cpuset and
    its raw QoS is LSE or LSR — or none, which counts as LSR when the pod has a cpuset. A status that does
    not decode lifts nothing."""
    try:
        status = parse_resource_status(annotations)
    except ValueError:
        return False
    return status.cpuset != "" and _qos(labels) in (QoSClass.LSE, QoSClass.LSR, QoSClass.NONE)


# --- koord simulate: kind CPUSet, operation containerCPUSet -------------------------------------------
class ContainerCPUSetInputError(ValueError):
    """A scenario input that is missing or malformed; the message names the field and the value."""


_RULE_KEYS: Final = ("sharePools", "beSharePools", "kubeletCPUManagerPolicy", "systemQOSCPUSet")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ContainerCPUSetInputError(f"{where}={value!r}: expected an object")
    return value


def _strings(value: Any, where: str) -> dict[str, str]:
    obj = _object({} if value is None else value, where)
    for k, v in obj.items():
        if not isinstance(v, str):
            raise ContainerCPUSetInputError(f"{where}[{k!r}]={v!r}: expected a string")
    return obj


def _cpulist(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ContainerCPUSetInputError(f"{where}={value!r}: expected a cpulist string")
    try:
        parse_cpuset(value)
    except CPUSetError as exc:
        raise ContainerCPUSetInputError(f"{where}={value!r}: {exc}") from exc
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ContainerCPUSetInputError(f"{where}={value!r}: expected an integer")
    return value


def _pools(value: Any, where: str) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ContainerCPUSetInputError(f"{where}={value!r}: expected an array of pools")
    out = []
    for i, raw in enumerate(value):
        pool = _object(raw, f"{where}[{i}]")
        out.append(
            {
                "socket": _int(pool.get("socket", 0), f"{where}[{i}].socket"),
                "node": _int(pool.get("node", 0), f"{where}[{i}].node"),
                "cpuset": _cpulist(pool.get("cpuset", ""), f"{where}[{i}].cpuset"),
            }
        )
    return tuple(out)


def _rule(value: Any) -> CPUSetRule | None:
    if value is None:
        return None
    raw = _object(value, "rule")
    unknown = sorted(set(raw) - set(_RULE_KEYS))
    if unknown:
        raise ContainerCPUSetInputError(f"rule.{unknown[0]}: unknown field (known: {', '.join(_RULE_KEYS)})")
    policy_obj = _object(raw.get("kubeletCPUManagerPolicy") or {}, "rule.kubeletCPUManagerPolicy")
    policy = policy_obj.get("policy", "")
    if not isinstance(policy, str):
        raise ContainerCPUSetInputError(f"rule.kubeletCPUManagerPolicy.policy={policy!r}: expected a string")
    return CPUSetRule(
        _pools(raw.get("sharePools"), "rule.sharePools"),
        _pools(raw.get("beSharePools"), "rule.beSharePools"),
        policy,
        _cpulist(raw.get("systemQOSCPUSet", ""), "rule.systemQOSCPUSet"),
    )


def simulate_container_cpuset(scenario: dict[str, Any]) -> dict[str, Any]:
    """``{"cpuset": <canonical cpulist> | "" | None, "error": bool}`` for one container
    (docs/rules/koordlet-cpuset.md#simulate). Bad input raises ``ContainerCPUSetInputError``."""
    rule = _rule(scenario.get("rule"))
    features = _object(scenario.get("features") or {}, "features")
    gate = features.get(GATE_BE_CPU_MANAGER, False)
    if not isinstance(gate, bool):
        raise ContainerCPUSetInputError(f"features.{GATE_BE_CPU_MANAGER}={gate!r}: expected true or false")
    labels = _strings(scenario.get("podLabels"), "podLabels")
    annotations = _strings(scenario.get("podAnnotations"), "podAnnotations")
    parent = scenario.get("cgroupParent", "")
    if not isinstance(parent, str):
        raise ContainerCPUSetInputError(f"cgroupParent={parent!r}: expected a string")
    try:
        value = container_cpuset(labels, annotations, parent, rule, be_cpu_manager=gate)
        cpuset = None if value is None else format_cpuset(cpuset_cpus(value))
    except ValueError:  # an undecodable resource-status or cpuset (CPUSetError is one)
        return {"cpuset": None, "error": True}
    return {"cpuset": cpuset, "error": False}
