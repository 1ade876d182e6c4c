"""Hypothesis strategies for the Kubernetes objects the daemons read: pods of every QoS and priority class
(raw QoS labels including near-misses such as ``be`` or ``BE ``), with container requests and limits and
every pod annotation the koordlet and the scheduler parse; nodes with capacity, allocatable, the ratio
labels and every node annotation the koordlet, koord-manager and the scheduler parse. Each annotation
value is shaped for its key most of the time (reservation, resource-status, cpuBurst, memoryQOS, ...)
and otherwise any JSON text, broken JSON or deeply nested JSON (`strategies.json_text`).
Imports: hypothesis, the standard library, apis (test code), tests.reliability.fuzz.strategies.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import strategies as st

from apis import constants as c
from apis import device, numa
from apis.kubeobjects import Node, Pod
from apis.nodeslo import CPUBurstStrategy, MemoryQOSCfg
from apis.sloconfig_types import ColocationStrategy
from tests.reliability.fuzz.strategies import (
    Strategy,
    canonical_quantities,
    gojson_doc,
    ints,
    json_text,
    json_values,
    quantity_json,
    quantity_texts,
    short_text,
)

QOS_LABELS = ("BE", "LS", "LSR", "LSE", "SYSTEM", "NONE", "", "be", "Be", "BE ", " BE", "B E", "BE\n")
PRIORITY_CLASSES = ("koord-prod", "koord-mid", "koord-batch", "koord-free", "", "bogus", "KOORD-BATCH")
PRIORITIES = (0, 2999, 3000, 3999, 5000, 5500, 5999, 6000, 7000, 7999, 9000, 9999, 10000, -1, 2**31 - 1)
PHASES = ("Running", "Pending", "Succeeded", "Failed", "Unknown", "")
GATES = ("BEMemoryEvict", "MemoryEvict", "MemoryAllocatableEvict", "BECPUEvict", "CPUEvict", "x")
RESOURCES = ("cpu", "memory", c.BATCH_CPU, c.BATCH_MEMORY, c.MID_CPU, c.MID_MEMORY)


@st.composite
def cpuset_text(draw: st.DrawFn) -> str:
    """Go cpuset strings: ``0-3,5``, reversed and huge ranges, negatives, stray separators, Arabic digits."""
    number = st.integers(0, 9) | st.sampled_from((4095, 4096, 10**12, -1)).map(str) | st.just("\u0661")
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        a = draw(number)
        parts.append(f"{a}-{draw(number)}" if draw(st.booleans()) else str(a))
    sep = draw(st.sampled_from((",", ",", ", ", ",,", "-")))
    return sep.join(parts)


cpusets: Strategy = cpuset_text() | short_text
resource_list: Strategy = st.dictionaries(st.sampled_from(RESOURCES) | short_text, quantity_json, max_size=4)
"""A resource list inside an annotation: anything may stand where a quantity belongs."""
api_resources: Strategy = st.dictionaries(st.sampled_from(RESOURCES), canonical_quantities, max_size=4)
"""A pod's requests or a node's capacity: the API server validated each quantity."""
int_texts: Strategy = ints.map(str) | short_text
float_texts: Strategy = st.floats(allow_nan=True).map(repr) | st.sampled_from(
    ("1.5", "0.29", "-1", "0x1p3", "1e400")
)


def _obj(**fields: Strategy) -> Strategy:
    return st.fixed_dictionaries({}, optional=fields)


RESERVATION = _obj(resources=resource_list, reservedCPUs=cpusets, applyPolicy=short_text)
POD_ANNOTATIONS: dict[str, Strategy] = {
    c.ANNOTATION_EVICTION_POLICY: json_text(st.lists(st.sampled_from(GATES), max_size=3)),
    c.ANNOTATION_EVICTION_PRIORITY: int_texts,
    c.ANNOTATION_POD_CPU_BURST: json_text(gojson_doc(CPUBurstStrategy)),
    c.ANNOTATION_POD_MEMORY_QOS: json_text(
        gojson_doc(MemoryQOSCfg).flatmap(
            lambda d: st.sampled_from(("", "auto", "none", 1)).map(lambda p: {**d, "policy": p})
        )
    ),
    c.ANNOTATION_RESOURCE_STATUS: json_text(
        _obj(cpuset=cpusets, numaNodeResources=json_values(max_leaves=4))
    ),
    c.ANNOTATION_EXTENDED_RESOURCE_SPEC: json_text(
        _obj(containers=st.dictionaries(short_text, _obj(requests=resource_list, limits=resource_list)))
    ),
    c.ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS: json_text(st.dictionaries(st.sampled_from(RESOURCES), ints)),
    c.ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_POD_SCHEDULED: int_texts,
    c.ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED: int_texts,
    c.ANNOTATION_RESERVE_POD: st.sampled_from(("true", "false", "")),
    "node.koordinator.sh/resctrl": short_text,
    # NodeNUMAResource's and DeviceShare's (docs/rules/scheduler-nodenumaresource.md#names,
    # docs/rules/scheduler-deviceshare.md#prebind)
    numa.ANNOTATION_RESOURCE_SPEC: json_text(
        _obj(
            requiredCPUBindPolicy=st.sampled_from(("", "Default", "FullPCPUs", "SpreadByPCPUs")) | short_text,
            preferredCPUBindPolicy=st.sampled_from(("", "Default", "FullPCPUs", "ConstrainedBurst")) | ints,
            preferredCPUExclusivePolicy=st.sampled_from(("None", "PCPULevel", "NUMANodeLevel")) | st.none(),
        )
    ),
    numa.ANNOTATION_NUMA_TOPOLOGY_SPEC: json_text(
        _obj(numaTopologyPolicy=st.sampled_from(("", "BestEffort", "Restricted", "SingleNUMANode")) | ints)
    ),
    device.ANNOTATION_DEVICE_ALLOCATED: json_text(
        st.dictionaries(
            st.sampled_from(("gpu", "rdma", "fpga")) | short_text,
            st.lists(
                _obj(minor=ints | short_text, resources=resource_list | json_values(), id=short_text),
                max_size=3,
            )
            | json_values(),
            max_size=2,
        )
    ),
}
THRESHOLDS = st.dictionaries(st.sampled_from(RESOURCES), ints | quantity_json, max_size=3)
NODE_ANNOTATIONS: dict[str, Strategy] = {
    c.ANNOTATION_NODE_RESERVATION: json_text(RESERVATION),
    c.ANNOTATION_NODE_SYSTEM_QOS_RESOURCE: json_text(
        _obj(cpuset=cpusets, cpusetExclusive=st.booleans() | st.none() | short_text)
    ),
    c.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json_text(_obj(policy=st.sampled_from(("static", "none", "")))),
    c.ANNOTATION_CPU_NORMALIZATION_RATIO: float_texts,
    c.ANNOTATION_THIRD_PARTY_ALLOCATIONS: json_text(
        _obj(
            allocations=st.lists(
                _obj(priority=st.sampled_from(PRIORITY_CLASSES), resources=resource_list | json_values()),
                max_size=3,
            )
        )
    ),
    c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE: json_text(_obj(resources=resource_list)),
    c.ANNOTATION_NODE_COLOCATION_STRATEGY: json_text(gojson_doc(ColocationStrategy)),
    c.ANNOTATION_NETWORK_BANDWIDTH: quantity_texts,
    numa.ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: json_text(
        st.dictionaries(
            st.sampled_from(RESOURCES), st.floats(allow_nan=False) | ints | short_text, max_size=2
        )
    ),
    c.ANNOTATION_USAGE_THRESHOLDS: json_text(
        _obj(
            usageThresholds=THRESHOLDS,
            prodUsageThresholds=THRESHOLDS,
            aggregatedUsage=_obj(
                usageThresholds=THRESHOLDS,
                usageAggregationType=st.sampled_from(("avg", "p99", "", "bogus")),
                usageAggregatedDuration=st.sampled_from(("5m", "bad", "")) | ints,
            ),
        )
    ),
    c.ANNOTATION_NODE_RAW_ALLOCATABLE: json_text(resource_list),
}
NODE_LABELS: dict[str, Strategy] = {
    c.LABEL_CPU_RECLAIM_RATIO: float_texts,
    c.LABEL_MEMORY_RECLAIM_RATIO: float_texts,
    c.LABEL_MID_STATIC_CPU_RESERVED_RATIO: float_texts,
    c.LABEL_MID_STATIC_MEMORY_RESERVED_RATIO: float_texts,
    "pool": st.sampled_from(("a", "b")),
}


# Built once: a strategy made inside a composite is re-analysed on every draw.
CONTAINER_RESOURCES = _obj(requests=api_resources, limits=api_resources)
ANY_QOS_LABEL = st.sampled_from(QOS_LABELS) | st.none()
POD_LABELS = _obj(
    **{
        c.LABEL_POD_PRIORITY_CLASS: st.sampled_from(PRIORITY_CLASSES),
        c.LABEL_POD_PRIORITY: int_texts,
        c.LABEL_POD_EVICTION_ENABLED: st.sampled_from(("true", "false", "True")),
    }
)
POD_ANNOTATION_MAP = _obj(**POD_ANNOTATIONS)
POD_PRIORITY = st.none() | st.sampled_from(PRIORITIES) | st.integers(-(2**31), 2**31 - 1)
NODE_LABEL_MAP = _obj(**NODE_LABELS)
NODE_ANNOTATION_MAP = _obj(**NODE_ANNOTATIONS)


@st.composite
def containers(draw: st.DrawFn) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "resources": draw(CONTAINER_RESOURCES)} for i in range(draw(st.integers(0, 2)))]


@st.composite
def pods(draw: st.DrawFn, uid: str = "u", qos: Strategy | None = None) -> Pod:
    """A pod named and UID-ed after ``uid``; ``qos``: its raw QoS label (None: absent)."""
    labels: dict[str, str] = {}
    label = draw(ANY_QOS_LABEL if qos is None else qos)
    if label is not None:
        labels[c.LABEL_POD_QOS] = label
    labels.update(draw(POD_LABELS))
    annotations = draw(POD_ANNOTATION_MAP)
    spec: dict[str, Any] = {"containers": draw(containers())}
    priority = draw(POD_PRIORITY)
    if priority is not None:
        spec["priority"] = priority
    pod: dict[str, Any] = {
        "metadata": {"name": f"pod-{uid}", "namespace": "ns", "uid": uid, "labels": labels},
        "spec": spec,
        "status": {"phase": draw(st.sampled_from(PHASES))},
    }
    if annotations:
        pod["metadata"]["annotations"] = annotations
    return cast(Pod, pod)


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    capacity = draw(api_resources)
    return {
        "metadata": {
            "name": "node-1",
            "labels": draw(NODE_LABEL_MAP),
            "annotations": draw(NODE_ANNOTATION_MAP),
        },
        "status": {"capacity": capacity, "allocatable": draw(st.just(capacity).map(dict) | api_resources)},
    }
