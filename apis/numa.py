"""CPU binding names and annotation codecs (docs/rules/scheduler-nodenumaresource.md#names): the pod's
``resource-spec`` request and ``resource-status`` result, the NUMA topology spec, the NodeResourceTopology
annotations (``cpu-topology``, ``cpu-shared-pools``, the kubelet CPU manager policy, the node
reservation's ``reservedCPUs``), the node labels of the bind policy / NUMA strategy / NUMA policy, and
the node's resource amplification ratios. Decoding follows Go's ``encoding/json`` (keys matched exactly,
then case-insensitively; later keys win; a wrong type is an error); encoding follows ``json.Marshal``
(compact, keys in struct order, ``omitempty``). The scheduler and the koordlet both use these.
Pure. Imports: the standard library, apis (constants, cpuset, quantity).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis import constants as c
from apis.cpuset import CPUSetError, parse_cpuset
from apis.quantity import Quantity, QuantityError

# --- names -------------------------------------------------------------------------------------------
PLUGIN_NAME: Final = "NodeNUMAResource"
ANNOTATION_RESOURCE_SPEC: Final = f"{c.SCHEDULING_DOMAIN_PREFIX}/resource-spec"
ANNOTATION_RESOURCE_STATUS: Final = c.ANNOTATION_RESOURCE_STATUS
ANNOTATION_NUMA_TOPOLOGY_SPEC: Final = f"{c.SCHEDULING_DOMAIN_PREFIX}/numa-topology-spec"
ANNOTATION_CPU_TOPOLOGY: Final = f"{c.NODE_DOMAIN_PREFIX}/cpu-topology"
ANNOTATION_CPU_SHARED_POOLS: Final = f"{c.NODE_DOMAIN_PREFIX}/cpu-shared-pools"
ANNOTATION_BE_CPU_SHARED_POOLS: Final = f"{c.NODE_DOMAIN_PREFIX}/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY: Final = c.ANNOTATION_KUBELET_CPU_MANAGER_POLICY
ANNOTATION_NODE_RESERVATION: Final = c.ANNOTATION_NODE_RESERVATION
ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: Final = c.ANNOTATION_RESOURCE_AMPLIFICATION_RATIO
LABEL_CPU_BIND_POLICY: Final = f"{c.NODE_DOMAIN_PREFIX}/cpu-bind-policy"
LABEL_NUMA_ALLOCATE_STRATEGY: Final = f"{c.NODE_DOMAIN_PREFIX}/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY: Final = f"{c.NODE_DOMAIN_PREFIX}/numa-topology-policy"

# pod-side CPUBindPolicy values
BIND_DEFAULT: Final = "Default"
BIND_FULL_PCPUS: Final = "FullPCPUs"
BIND_SPREAD_BY_PCPUS: Final = "SpreadByPCPUs"
BIND_CONSTRAINED_BURST: Final = "ConstrainedBurst"
# CPUExclusivePolicy values
EXCLUSIVE_NONE: Final = "None"
EXCLUSIVE_PCPU_LEVEL: Final = "PCPULevel"
EXCLUSIVE_NUMA_NODE_LEVEL: Final = "NUMANodeLevel"
# node-side NodeCPUBindPolicy values (the label)
NODE_BIND_NONE: Final = "None"
NODE_BIND_FULL_PCPUS_ONLY: Final = "FullPCPUsOnly"
NODE_BIND_SPREAD_BY_PCPUS: Final = "SpreadByPCPUs"
# NUMAAllocateStrategy values
NUMA_MOST_ALLOCATED: Final = "MostAllocated"
NUMA_LEAST_ALLOCATED: Final = "LeastAllocated"
# NUMATopologyPolicy values ("" = none)
NUMA_POLICY_NONE: Final = ""
NUMA_POLICY_BEST_EFFORT: Final = "BestEffort"
NUMA_POLICY_RESTRICTED: Final = "Restricted"
NUMA_POLICY_SINGLE_NUMA_NODE: Final = "SingleNUMANode"
# kubelet CPU manager policy
KUBELET_POLICY_STATIC: Final = "static"
KUBELET_POLICY_NONE: Final = "none"
KUBELET_OPTION_FULL_PCPUS_ONLY: Final = "full-pcpus-only"

_INT32: Final = 2**31


# --- Go JSON helpers ---------------------------------------------------------------------------------
def go_fields(obj: object, names: tuple[str, ...], where: str) -> dict[str, Any]:
    """Go's struct decoding of a JSON object: each key goes to the field of that exact name, else to
    one whose name matches case-insensitively; later keys win; unknown keys are ignored."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    folded = {n.lower(): n for n in names}
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = key if key in names else folded.get(str(key).lower())
        if name is not None:
            out[name] = value
    return out


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {json.dumps(value)}")
    return value


def _int32(value: Any, where: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not -_INT32 <= value < _INT32:
        raise ValueError(f"{where}: expected a 32-bit integer, got {json.dumps(value)}")
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")  # Go's decoder refuses NaN and Infinity


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON: {e.msg}") from None
    except RecursionError:
        raise ValueError(f"{where}: invalid JSON: nested too deep") from None
    except ValueError as e:
        raise ValueError(f"{where}: invalid JSON: {e}") from None


def go_marshal(value: Any) -> str:
    """``json.Marshal`` of plain JSON data: compact, non-ASCII kept, ``<``, ``>``, ``&``, U+2028 and
    U+2029 escaped as Go does."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                    ("\u2029", "\\u2029")):  # fmt: skip
        text = text.replace(ch, esc)
    return text


# --- pod annotations ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""


_SPEC_FIELDS: Final = ("requiredCPUBindPolicy", "preferredCPUBindPolicy", "preferredCPUExclusivePolicy")


def parse_resource_spec(annotations: Mapping[str, Any]) -> ResourceSpec:
    """The pod's resource spec (absent → empty); ValueError naming the annotation when it does not decode."""
    text = annotations.get(ANNOTATION_RESOURCE_SPEC)
    if text is None:
        return ResourceSpec()
    where = ANNOTATION_RESOURCE_SPEC
    f = go_fields(_json(str(text), where), _SPEC_FIELDS, where)
    return ResourceSpec(*(_string(f.get(n), f"{where}.{n}") for n in _SPEC_FIELDS))


def format_resource_spec(spec: ResourceSpec) -> str:
    values = (
        spec.required_cpu_bind_policy,
        spec.preferred_cpu_bind_policy,
        spec.preferred_cpu_exclusive_policy,
    )
    return go_marshal({n: v for n, v in zip(_SPEC_FIELDS, values, strict=True) if v})


@dataclass(frozen=True, slots=True)
class NUMATopologySpec:
    """``scheduling.koordinator.sh/numa-topology-spec``."""

    numa_topology_policy: str = ""
    single_numa_node_exclusive: str = ""


def parse_numa_topology_spec(annotations: Mapping[str, Any]) -> NUMATopologySpec:
    text = annotations.get(ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if text is None:
        return NUMATopologySpec()
    where = ANNOTATION_NUMA_TOPOLOGY_SPEC
    names = ("numaTopologyPolicy", "singleNUMANodeExclusive")
    f = go_fields(_json(str(text), where), names, where)
    return NUMATopologySpec(*(_string(f.get(n), f"{where}.{n}") for n in names))


@dataclass(frozen=True, slots=True)
class NUMANodeResource:
    node: int
    resources: dict[str, Quantity] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the cpuset (cpulist text) and NUMA node shares."""

    cpuset: str = ""
    numa_node_resources: tuple[NUMANodeResource, ...] = ()


def parse_resource_status(annotations: Mapping[str, Any] | None) -> ResourceStatus:
    """The pod's resource status as Go's ``json.Unmarshal`` reads it (the scheduler's and the koordlet's
    one reader): ``null`` (the whole value or an entry) leaves fields unset, field names match
    case-insensitively, a type mismatch, a bad quantity or bad JSON is a ValueError naming the part."""
    text = (annotations or {}).get(ANNOTATION_RESOURCE_STATUS)
    if text is None:
        return ResourceStatus()
    where = ANNOTATION_RESOURCE_STATUS
    doc = _json(str(text), where)
    if doc is None:
        return ResourceStatus()
    f = go_fields(doc, ("cpuset", "numaNodeResources"), where)
    raw = f.get("numaNodeResources")
    if raw is not None and not isinstance(raw, list):
        raise ValueError(f"{where}.numaNodeResources: expected a list")
    numa: list[NUMANodeResource] = []
    for i, item in enumerate(raw or []):
        w = f"{where}.numaNodeResources[{i}]"
        if item is None:
            numa.append(NUMANodeResource(0))
            continue
        g = go_fields(item, ("node", "resources"), w)
        res = g.get("resources")
        res = {} if res is None else res
        if not isinstance(res, Mapping):
            raise ValueError(f"{w}.resources: expected an object")
        parsed: dict[str, Quantity] = {}
        for k, v in res.items():
            try:
                parsed[str(k)] = Quantity.from_json(v)
            except (QuantityError, ValueError, TypeError) as e:
                raise ValueError(f"{w}.resources[{str(k)!r}]: {e}") from None
        numa.append(NUMANodeResource(_int32(g.get("node"), f"{w}.node"), parsed))
    return ResourceStatus(_string(f.get("cpuset"), f"{where}.cpuset"), tuple(numa))


def resource_status_cpus(annotations: Mapping[str, Any] | None) -> frozenset[int]:
    """The CPUs of the ``resource-status`` cpuset; an annotation or cpuset that does not decode holds none
    (the readers that skip such a pod: the share pools, CPU suppress, the kubelet checkpoint filter)."""
    try:
        return parse_cpuset(parse_resource_status(annotations).cpuset)
    except ValueError:  # CPUSetError is one
        return frozenset()


def format_resource_status(status: ResourceStatus) -> str:
    """Go's ``json.Marshal`` of ResourceStatus: ``cpuset`` then ``numaNodeResources``, both omitempty;
    resource names sorted (a Go map)."""
    out: dict[str, Any] = {}
    if status.cpuset:
        out["cpuset"] = status.cpuset
    if status.numa_node_resources:
        out["numaNodeResources"] = [
            {"node": r.node, **({"resources": {k: str(r.resources[k]) for k in sorted(r.resources)}}
                                if r.resources else {})}
            for r in status.numa_node_resources
        ]  # fmt: skip
    return go_marshal(out)


# --- NodeResourceTopology annotations ----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CPUInfo:
    """One logical CPU of ``node.koordinator.sh/cpu-topology`` (the core id is per socket)."""

    id: int
    core: int
    socket: int
    node: int


def parse_cpu_topology(value: object, where: str = ANNOTATION_CPU_TOPOLOGY) -> list[CPUInfo]:
    """``{"detail": [{"id", "core", "socket", "node"}]}`` (text or decoded) as CPUInfos in order."""
    obj = _json(value, where) if isinstance(value, str) else value
    f = go_fields(obj, ("detail",), where)
    detail = f.get("detail")
    if detail is None:
        return []
    if not isinstance(detail, list):
        raise ValueError(f"{where}.detail: expected a list")
    out: list[CPUInfo] = []
    for i, item in enumerate(detail):
        w = f"{where}.detail[{i}]"
        g = go_fields(item, ("id", "core", "socket", "node"), w)
        out.append(CPUInfo(*(_int32(g.get(n), f"{w}.{n}") for n in ("id", "core", "socket", "node"))))
    return out


def format_cpu_topology(cpus: list[CPUInfo]) -> str:
    detail = [{"id": x.id, "core": x.core, "socket": x.socket, "node": x.node} for x in cpus]
    return go_marshal({"detail": detail} if detail else {})


@dataclass(frozen=True, slots=True)
class CPUSharedPool:
    socket: int
    node: int
    cpuset: str = ""


def parse_cpu_shared_pools(value: object, where: str = ANNOTATION_CPU_SHARED_POOLS) -> list[CPUSharedPool]:
    obj = _json(value, where) if isinstance(value, str) else value
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ValueError(f"{where}: expected a list")
    out: list[CPUSharedPool] = []
    for i, item in enumerate(obj):
        w = f"{where}[{i}]"
        g = go_fields(item, ("socket", "node", "cpuset"), w)
        out.append(CPUSharedPool(_int32(g.get("socket"), f"{w}.socket"), _int32(g.get("node"), f"{w}.node"),
                                 _string(g.get("cpuset"), f"{w}.cpuset")))  # fmt: skip
    return out


def format_cpu_shared_pools(pools: list[CPUSharedPool]) -> str:
    return go_marshal(
        [{"socket": p.socket, "node": p.node, **({"cpuset": p.cpuset} if p.cpuset else {})} for p in pools]
    )


@dataclass(frozen=True, slots=True)
class KubeletCPUManagerPolicy:
    """``kubelet.koordinator.sh/cpu-manager-policy``."""

    policy: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: str = ""


def parse_kubelet_cpu_manager_policy(
    value: object, where: str = ANNOTATION_KUBELET_CPU_MANAGER_POLICY
) -> KubeletCPUManagerPolicy:
    obj = _json(value, where) if isinstance(value, str) else value
    f = go_fields(obj, ("policy", "options", "reservedCPUs"), where)
    options = f.get("options") or {}
    if not isinstance(options, Mapping):
        raise ValueError(f"{where}.options: expected an object")
    opts = {str(k): _string(v, f"{where}.options.{k}") for k, v in options.items()}
    return KubeletCPUManagerPolicy(
        _string(f.get("policy"), f"{where}.policy"),
        opts,
        _string(f.get("reservedCPUs"), f"{where}.reservedCPUs"),
    )


def node_reservation_reserved_cpus(annotations: Mapping[str, Any]) -> frozenset[int]:
    """The ``reservedCPUs`` of ``node.koordinator.sh/reservation``; absent, undecodable or unparsable → ∅
    (docs/rules/scheduler-nodenumaresource.md#topology)."""
    text = annotations.get(ANNOTATION_NODE_RESERVATION)
    if not text:
        return frozenset()
    try:
        where = ANNOTATION_NODE_RESERVATION
        f = go_fields(_json(str(text), where), ("reservedCPUs",), where)
        return parse_cpuset(_string(f.get("reservedCPUs"), "reservedCPUs"))
    except (ValueError, CPUSetError):
        return frozenset()


# --- node labels and annotations ---------------------------------------------------------------------
def node_cpu_bind_policy(labels: Mapping[str, Any], kubelet: KubeletCPUManagerPolicy | None) -> str:
    """``FullPCPUsOnly`` (the label, or a static kubelet policy with ``full-pcpus-only: "true"``),
    ``SpreadByPCPUs`` (the label), else ``None`` (docs/rules/scheduler-nodenumaresource.md#filter)."""
    label = labels.get(LABEL_CPU_BIND_POLICY)
    if label == NODE_BIND_FULL_PCPUS_ONLY or (
        kubelet is not None
        and kubelet.policy == KUBELET_POLICY_STATIC
        and kubelet.options.get(KUBELET_OPTION_FULL_PCPUS_ONLY) == "true"
    ):
        return NODE_BIND_FULL_PCPUS_ONLY
    if label == NODE_BIND_SPREAD_BY_PCPUS:
        return NODE_BIND_SPREAD_BY_PCPUS
    return NODE_BIND_NONE


def amplification_ratios(annotations: Mapping[str, Any]) -> dict[str, float] | None:
    """``node.koordinator.sh/resource-amplification-ratio`` (``{"cpu": 1.5}``); None when absent;
    ValueError when it does not decode (a ratio must be a JSON number)."""
    text = annotations.get(ANNOTATION_RESOURCE_AMPLIFICATION_RATIO)
    if text is None:
        return None
    obj = _json(str(text), ANNOTATION_RESOURCE_AMPLIFICATION_RATIO)
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ValueError(f"{ANNOTATION_RESOURCE_AMPLIFICATION_RATIO}: expected an object")
    out: dict[str, float] = {}
    for k, v in obj.items():
        if v is None:
            out[str(k)] = 0.0
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{ANNOTATION_RESOURCE_AMPLIFICATION_RATIO}.{k}: expected a number")
        try:
            ratio = float(v)
        except OverflowError:  # an integer literal past float64, which Go's decoder refuses too
            ratio = math.inf
        if not math.isfinite(ratio):  # Go's decoder refuses 1e999; Python's reads infinity
            raise ValueError(f"{ANNOTATION_RESOURCE_AMPLIFICATION_RATIO}.{k}={v!r}: out of range")
        out[str(k)] = ratio
    return out


def amplify(origin: int, ratio: float) -> int:
    """``ceil(origin * ratio)`` in float64 when the ratio is above 1, else ``origin`` (upstream Amplify)."""
    if ratio <= 1:
        return origin
    return math.ceil(float(origin) * ratio)
