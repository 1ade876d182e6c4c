"""The kubelet's CPU manager as the koordlet sees it (docs/rules/koordlet-topology.md#kubelet-cpu-manager):
the KubeletConfiguration file (``cpuManagerPolicy``, ``cpuManagerPolicyOptions``, ``reservedSystemCPUs``,
``kubeReserved``/``systemReserved``, the topology manager policy and scope), the ``cpu_manager_state``
checkpoint (which CPUs the static policy gave to which pod's containers), the static policy's reserved CPUs
and kubelet's ``takeByTopology`` that picks them.

Pure parsers and computations plus two thin file readers. Imports: standard library, yaml, apis.{cpuset,
quantity,qos,constants,kubeobjects}, agent.system.nodeinfo.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.system.nodeinfo import CpuInfo
from apis.cpuset import CPUSetError, format_cpuset, parse_cpuset
from apis.kubeobjects import Pod
from apis.numa import resource_status_cpus
from apis.qos import QoSClass, qos_class_raw
from apis.quantity import Quantity, QuantityError

__all__ = [
    "CPU_MANAGER_STATE_FILE",
    "KubeletConfig",
    "KubeletConfigError",
    "PodCPUAlloc",
    "kubelet_allocated",
    "parse_cpu_manager_state",
    "parse_kubelet_config",
    "read_cpu_manager_state",
    "read_kubelet_config",
    "static_reserved_cpus",
    "take_by_topology",
    "topology_policy",
]

CPU_MANAGER_STATE_FILE = "cpu_manager_state"
POLICY_STATIC = "static"
POLICY_NONE = "none"


class KubeletConfigError(ValueError):
    """A KubeletConfiguration or CPU manager checkpoint that does not decode; the message names the file
    and the field."""


@dataclass(frozen=True)
class KubeletConfig:
    """The KubeletConfiguration fields the topology report uses, kubelet's v1beta1 defaults filled."""

    cpu_manager_policy: str = POLICY_NONE
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_system_cpus: str = ""
    kube_reserved: Mapping[str, str] = field(default_factory=dict)
    system_reserved: Mapping[str, str] = field(default_factory=dict)
    topology_manager_policy: str = POLICY_NONE
    topology_manager_scope: str = "container"


def _str_map(doc: Mapping[str, Any], key: str, name: str) -> dict[str, str]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise KubeletConfigError(f"{name}: {key}: {value!r} is not a map of strings")
    return {str(k): str(v) for k, v in value.items()}


def _str(doc: Mapping[str, Any], key: str, default: str, name: str) -> str:
    value = doc.get(key)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise KubeletConfigError(f"{name}: {key}: {value!r} is not a string")
    return value


def parse_kubelet_config(text: str, name: str) -> KubeletConfig:
    """Decode a KubeletConfiguration (YAML or JSON); missing fields take kubelet's defaults."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KubeletConfigError(f"{name}: not YAML: {e}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, Mapping):
        raise KubeletConfigError(f"{name}: not a KubeletConfiguration object")
    return KubeletConfig(
        cpu_manager_policy=_str(doc, "cpuManagerPolicy", POLICY_NONE, name),
        cpu_manager_policy_options=_str_map(doc, "cpuManagerPolicyOptions", name),
        reserved_system_cpus=_str(doc, "reservedSystemCPUs", "", name),
        kube_reserved=_str_map(doc, "kubeReserved", name),
        system_reserved=_str_map(doc, "systemReserved", name),
        topology_manager_policy=_str(doc, "topologyManagerPolicy", POLICY_NONE, name),
        topology_manager_scope=_str(doc, "topologyManagerScope", "container", name),
    )


def read_kubelet_config(path: Path) -> KubeletConfig | None:
    """The file's configuration; None when it does not exist. ``KubeletConfigError`` when it does not
    decode, ``OSError`` when it cannot be read."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return parse_kubelet_config(text, str(path))


def parse_cpu_manager_state(text: str, name: str) -> dict[str, dict[str, str]]:
    """``entries`` of a CPU manager checkpoint: pod UID → container → cpuset string."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise KubeletConfigError(f"{name}: not JSON: {e}") from None
    if not isinstance(doc, Mapping):
        raise KubeletConfigError(f"{name}: not a CPU manager checkpoint object")
    entries = doc.get("entries")
    if entries is None:
        return {}
    if not isinstance(entries, Mapping):
        raise KubeletConfigError(f"{name}: entries: not a map")
    out: dict[str, dict[str, str]] = {}
    for uid, containers in entries.items():
        if not isinstance(containers, Mapping) or not all(isinstance(v, str) for v in containers.values()):
            raise KubeletConfigError(f"{name}: entries.{uid}: not a map of container → cpuset")
        out[str(uid)] = {str(k): str(v) for k, v in containers.items()}
    return out


def read_cpu_manager_state(root_dir: Path) -> dict[str, dict[str, str]] | None:
    """``<root_dir>/cpu_manager_state``'s entries; None when missing or empty (upstream only warns)."""
    path = root_dir / CPU_MANAGER_STATE_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    if not text:
        return None
    return parse_cpu_manager_state(text, str(path))


# -- topology manager policy (docs/rules/koordlet-topology.md#reporting) ---------------------------------
_LEVELS = {"single-numa-node": "SingleNUMANode", "restricted": "Restricted", "best-effort": "BestEffort"}


def topology_policy(policy: str, scope: str) -> str:
    """The NRT ``topologyPolicies`` entry for kubelet's topology manager policy and scope
    (``single-numa-node`` + ``pod`` → ``SingleNUMANodePodLevel``); anything else → ``None``."""
    level = {"container": "ContainerLevel", "pod": "PodLevel"}.get(scope)
    name = _LEVELS.get(policy)
    return f"{name}{level}" if level is not None and name is not None else "None"


# -- kubelet's takeByTopology (docs/rules/koordlet-topology.md#kubelet-cpu-manager) --------------------
def _core_key(cpu: CpuInfo) -> int:
    # A core id is per socket in sysfs; the shift keeps two sockets' core 0 apart.
    return cpu.socket << 16 | cpu.core


def _socket(cpu: CpuInfo) -> int:
    return cpu.socket


def _numa(cpu: CpuInfo) -> int:
    return cpu.numa_node


class _Accumulator:
    """Kubelet's ``cpuAccumulator`` with sockets above NUMA nodes (the order upstream koordlet fixes)."""

    def __init__(self, cpus: Sequence[CpuInfo], available: frozenset[int], need: int) -> None:
        self.all = {ci.cpu: ci for ci in cpus}
        self.free = {k: v for k, v in self.all.items() if k in available}
        self.need = need
        self.result: set[int] = set()
        n_cpus = len(self.all)
        n_sockets = len({ci.socket for ci in cpus})
        n_cores = len({_core_key(ci) for ci in cpus})
        self.cpus_per_socket = n_cpus // n_sockets if n_sockets else 0
        self.cpus_per_core = n_cpus // n_cores if n_cores else 0

    def _sorted(self, ids: Iterable[int], key: Callable[[CpuInfo], int]) -> list[int]:
        """Fewest free CPUs first, then ascending id (kubelet's ``sort``)."""
        free = [key(ci) for ci in self.free.values()]
        return sorted(set(ids), key=lambda i: (free.count(i), i))

    def sockets(self) -> list[int]:
        return self._sorted((ci.socket for ci in self.free.values()), _socket)

    def numa_nodes(self) -> list[int]:
        out: list[int] = []
        for s in self.sockets():
            out += self._sorted((ci.numa_node for ci in self.free.values() if ci.socket == s), _numa)
        return out

    def cores(self) -> list[int]:
        out: list[int] = []
        for n in self.numa_nodes():
            out += self._sorted((_core_key(ci) for ci in self.free.values() if ci.numa_node == n), _core_key)
        return out

    def take(self, cpus: Iterable[int]) -> None:
        taken = set(cpus)
        self.result |= taken
        for cpu in taken:
            self.free.pop(cpu, None)
        self.need -= len(taken)

    def take_full(self, groups: list[int], key: Any, free_size: Any) -> None:
        for g in groups:
            all_in = {ci.cpu for ci in self.all.values() if key(ci) == g}
            free_in = sum(1 for ci in self.free.values() if key(ci) == g)
            if free_in != free_size(all_in) or self.need < len(all_in):
                continue
            self.take(all_in)

    def run(self) -> frozenset[int] | None:
        if self.need < 1:
            return frozenset()
        if self.need > len(self.free):
            return None
        steps = (
            (self.sockets, lambda ci: ci.socket, lambda _all: self.cpus_per_socket),
            (self.numa_nodes, lambda ci: ci.numa_node, len),
            (self.cores, _core_key, lambda _all: self.cpus_per_core),
        )
        for groups, key, size in steps:
            self.take_full(groups(), key, size)
            if self.need < 1:
                return frozenset(self.result)
        for k in self.cores():
            for cpu in sorted(ci.cpu for ci in self.free.values() if _core_key(ci) == k):
                self.take((cpu,))
                if self.need < 1:
                    return frozenset(self.result)
        return None


def take_by_topology(cpus: Sequence[CpuInfo], available: frozenset[int], need: int) -> frozenset[int] | None:
    """Kubelet's ``takeByTopology``: whole free sockets, then whole free NUMA nodes, then whole free
    cores, then single CPUs core by core, each level ordered by fewest free CPUs then lowest id; None when
    ``need`` CPUs cannot be taken. With every CPU free, 2 CPUs on a 2-thread machine are core 0's
    siblings."""
    return _Accumulator(cpus, available, need).run()


_RESERVABLE = ("cpu", "memory", "ephemeral-storage", "pid")


def _cpu_milli(m: Mapping[str, str], name: str) -> int | None:
    """The map's ``cpu`` in milli-cores (None when absent); as kubelet, every entry must be a reservable
    resource with a non-negative quantity."""
    milli = None
    for key, text in m.items():
        if key not in _RESERVABLE:
            raise KubeletConfigError(f"{name}: cannot reserve {key!r} resource")
        try:
            q = Quantity.parse(text)
        except (QuantityError, ValueError):
            raise KubeletConfigError(f"{name}.{key}: {text!r} is not a quantity") from None
        if q.sign() < 0:
            raise KubeletConfigError(f"{name}.{key}: {text!r} cannot be negative")
        if key == "cpu":
            milli = q.milli_value()
    return milli


def static_reserved_cpus(cfg: KubeletConfig, cpus: Sequence[CpuInfo]) -> frozenset[int]:
    """The CPUs kubelet's static policy keeps for the system: ``reservedSystemCPUs`` when set (it must
    be a subset of the node's CPUs), else ``ceil(kubeReserved.cpu + systemReserved.cpu)`` CPUs by
    ``take_by_topology``. ``KubeletConfigError`` when kubelet itself would refuse: nothing reserved, or not
    that many CPUs."""
    every = frozenset(ci.cpu for ci in cpus)
    explicit: frozenset[int] = frozenset()
    if cfg.reserved_system_cpus:
        try:
            explicit = parse_cpuset(cfg.reserved_system_cpus)
        except CPUSetError as e:
            raise KubeletConfigError(f"reservedSystemCPUs: {e}") from None
        if not explicit <= every:
            raise KubeletConfigError(
                f"reservedSystemCPUs: {cfg.reserved_system_cpus} is not a subset of online-cpus: "
                f"{format_cpuset(every)}"
            )
    # reservedSystemCPUs overrides both maps' cpu (kubelet drops kubeReserved.cpu, sets systemReserved.cpu).
    kube_map = {k: v for k, v in cfg.kube_reserved.items() if not (explicit and k == "cpu")}
    system_map = {**cfg.system_reserved, **({"cpu": str(len(explicit))} if explicit else {})}
    kube = _cpu_milli(kube_map, "kubeReserved")
    system = _cpu_milli(system_map, "systemReserved")
    if kube is None and system is None:
        raise KubeletConfigError("the static policy cannot determine reserved CPU resources")
    total = (kube or 0) + (system or 0)
    if total == 0:
        raise KubeletConfigError("the static policy requires systemReserved.cpu + kubeReserved.cpu > 0")
    need = math.ceil(total / 1000)
    reserved = explicit if explicit else take_by_topology(cpus, every, need)
    if reserved is None or len(reserved) != need:
        got = format_cpuset(reserved or ())
        raise KubeletConfigError(f"unable to reserve the required amount of CPUs (size of {got} != {need})")
    return reserved


# -- CPUs the static policy assigned (docs/rules/koordlet-topology.md#kubelet-cpu-manager) -------------------
@dataclass(frozen=True)
class PodCPUAlloc:
    uid: str
    cpuset: str
    namespace: str = ""
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        """Upstream's ``PodCPUAlloc`` (``omitempty`` fields, ``managedByKubelet`` always true here)."""
        out: dict[str, Any] = {}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.name:
            out["name"] = self.name
        out["uid"] = self.uid
        out["cpuset"] = self.cpuset
        out["managedByKubelet"] = True
        return out


def _koord_managed(pod: Pod) -> bool:
    """A pod whose CPUs koord places: raw QoS LS or BE, or a non-empty ``resource-status`` cpuset."""
    if qos_class_raw(pod) in (QoSClass.LS, QoSClass.BE):
        return True
    return bool(resource_status_cpus((pod.get("metadata") or {}).get("annotations")))


def kubelet_allocated(
    entries: Mapping[str, Mapping[str, str]], pods: Sequence[Pod]
) -> tuple[list[PodCPUAlloc], frozenset[int]]:
    """The checkpoint's pods that koord does not manage, each with the union of its containers' cpusets
    (an unparsable one skipped), sorted by UID; and all their CPUs (taken out of the share pools)."""
    by_uid = {str((p.get("metadata") or {}).get("uid") or ""): p for p in pods}
    allocs: list[PodCPUAlloc] = []
    cpus: set[int] = set()
    for uid, containers in entries.items():
        pod = by_uid.get(uid)
        if pod is not None and _koord_managed(pod):
            continue
        union: set[int] = set()
        for text in containers.values():
            try:
                union |= parse_cpuset(text)
            except CPUSetError:
                continue
        if not union:
            continue
        meta = (pod or {}).get("metadata") or {}
        allocs.append(
            PodCPUAlloc(
                uid, format_cpuset(union), str(meta.get("namespace") or ""), str(meta.get("name") or "")
            )
        )
        cpus |= union
    allocs.sort(key=lambda a: a.uid)
    return allocs, frozenset(cpus)
