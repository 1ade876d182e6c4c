"""apis/numa.py codecs (docs/rules/scheduler-nodenumaresource.md#names): Go's decoding (case-insensitive keys,
later keys win, wrong types rejected with the field named) and json.Marshal's encoding (compact, struct
order, omitempty, HTML escapes); node policies and amplification; the required-policy check."""

from __future__ import annotations

import pytest

from apis import numa
from apis.numa import CPUInfo, CPUSharedPool, KubeletCPUManagerPolicy, ResourceSpec
from scheduler.plugins.nodenumaresource.accumulator import AllocationError
from scheduler.plugins.nodenumaresource.cpuset_alloc import check_required, filter_required
from scheduler.plugins.nodenumaresource.topology import CPUTopology, options_of

SPEC = numa.ANNOTATION_RESOURCE_SPEC


def test_resource_spec_decoding() -> None:
    assert numa.parse_resource_spec({}) == ResourceSpec()
    got = numa.parse_resource_spec({SPEC: '{"REQUIREDcpuBindPolicy":"A","requiredCPUBindPolicy":"B","x":1}'})
    assert got == ResourceSpec("B")
    with pytest.raises(ValueError, match=r"resource-spec\.preferredCPUBindPolicy: expected a string"):
        numa.parse_resource_spec({SPEC: '{"preferredCPUBindPolicy": 3}'})
    with pytest.raises(ValueError, match="resource-spec: invalid JSON"):
        numa.parse_resource_spec({SPEC: "{"})
    with pytest.raises(ValueError, match="expected a JSON object"):
        numa.parse_resource_spec({SPEC: "[]"})


def test_resource_spec_encoding_keeps_struct_order_and_omits_empty() -> None:
    assert numa.format_resource_spec(ResourceSpec("", "FullPCPUs", "PCPULevel")) == (
        '{"preferredCPUBindPolicy":"FullPCPUs","preferredCPUExclusivePolicy":"PCPULevel"}'
    )
    assert numa.format_resource_spec(ResourceSpec()) == "{}"
    assert numa.go_marshal({"a": "<b>&é"}) == '{"a":"\\u003cb\\u003e\\u0026é"}'


def test_resource_status() -> None:
    text = '{"cpuset":"0-3","numaNodeResources":[{"node":1,"resources":{"cpu":"4"}}]}'
    ann = {numa.ANNOTATION_RESOURCE_STATUS: text}
    status = numa.parse_resource_status(ann)
    assert status.cpuset == "0-3" and status.numa_node_resources[0].node == 1
    assert numa.format_resource_status(status) == ann[numa.ANNOTATION_RESOURCE_STATUS]
    with pytest.raises(ValueError, match=r"numaNodeResources\[0\]\.node"):
        numa.parse_resource_status({numa.ANNOTATION_RESOURCE_STATUS: '{"numaNodeResources":[{"node":1.5}]}'})


def test_cpu_topology_and_pools() -> None:
    cpus = numa.parse_cpu_topology('{"Detail":[{"id":1,"core":0,"socket":0,"node":0}]}')
    assert cpus == [CPUInfo(1, 0, 0, 0)]
    assert numa.parse_cpu_topology(numa.format_cpu_topology(cpus)) == cpus
    with pytest.raises(ValueError, match=r"detail\[0\]\.id: expected a 32-bit integer"):
        numa.parse_cpu_topology('{"detail":[{"id":2147483648}]}')
    pools = [CPUSharedPool(0, 0, "0-3"), CPUSharedPool(1, 1)]
    text = numa.format_cpu_shared_pools(pools)
    assert text == '[{"socket":0,"node":0,"cpuset":"0-3"},{"socket":1,"node":1}]'
    assert numa.parse_cpu_shared_pools(text) == pools


def test_node_bind_policy() -> None:
    static = KubeletCPUManagerPolicy("static", {"full-pcpus-only": "true"})
    assert numa.node_cpu_bind_policy({}, static) == "FullPCPUsOnly"
    assert (
        numa.node_cpu_bind_policy({}, KubeletCPUManagerPolicy("none", {"full-pcpus-only": "true"})) == "None"
    )
    assert numa.node_cpu_bind_policy({numa.LABEL_CPU_BIND_POLICY: "SpreadByPCPUs"}, None) == "SpreadByPCPUs"
    assert numa.node_cpu_bind_policy({numa.LABEL_CPU_BIND_POLICY: "SpreadByPCPUs"}, static) == "FullPCPUsOnly"
    assert numa.node_cpu_bind_policy({numa.LABEL_CPU_BIND_POLICY: "Other"}, None) == "None"


def test_amplification() -> None:
    key = numa.ANNOTATION_RESOURCE_AMPLIFICATION_RATIO
    assert numa.amplification_ratios({}) is None
    assert numa.amplification_ratios({key: '{"cpu": 1.5, "memory": 2}'}) == {"cpu": 1.5, "memory": 2.0}
    with pytest.raises(ValueError, match="cpu: expected a number"):
        numa.amplification_ratios({key: '{"cpu": "1.5"}'})
    # Past float64 Go's decoder refuses the annotation, whichever resource it is for.
    for text in ('{"cpu": 1.5, "memory": 1e999}', '{"cpu": 1' + "0" * 400 + "}"):
        with pytest.raises(ValueError, match="out of range"):
            numa.amplification_ratios({key: text})
    assert (numa.amplify(4000, 1.5), numa.amplify(1001, 1.5), numa.amplify(7, 1.0)) == (6000, 1502, 7)


def test_reserved_cpus_from_the_kubelet_and_the_node_reservation() -> None:
    nrt = {"metadata": {"annotations": {
        numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: '{"policy":"static","reservedCPUs":"0-1"}',
        numa.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"6"}',
    }}}  # fmt: skip
    assert options_of(nrt).reserved_cpus == frozenset({0, 1, 6})
    nrt["metadata"]["annotations"][numa.ANNOTATION_NODE_RESERVATION] = '{"reservedCPUs":"x"}'
    assert options_of(nrt).reserved_cpus == frozenset({0, 1})  # an unparsable one is ignored


def _topo() -> CPUTopology:
    return CPUTopology.of(CPUInfo(c, c // 2, 0, 0) for c in range(8))  # 4 cores x 2


def test_topology_counts() -> None:
    topo = _topo()
    assert (topo.num_sockets, topo.num_nodes, topo.num_cores, topo.num_cpus) == (1, 1, 4, 8)
    assert (topo.cpus_per_core, topo.cpus_per_node, topo.cpus_per_socket, topo.valid) == (2, 8, 8, True)
    two = CPUTopology.of([CPUInfo(0, 0, 0, 0), CPUInfo(1, 0, 1, 1)])  # core 0 of two sockets: two cores
    assert (two.num_cores, two.details[1].core) == (2, 1 << 16)
    assert not CPUTopology.of([]).valid


def test_required_policy_filter_and_check() -> None:
    topo = _topo()
    available = frozenset({1, 2, 3, 4, 6, 7})
    assert filter_required("FullPCPUs", available, topo) == frozenset({2, 3, 6, 7})
    assert filter_required("SpreadByPCPUs", available, topo) == frozenset({1, 2, 4, 6})
    check_required("FullPCPUs", frozenset({2, 3}), topo)
    with pytest.raises(
        AllocationError, match="insufficient CPUs to satisfy required cpu bind policy FullPCPUs"
    ):
        check_required("FullPCPUs", frozenset({2, 3, 4}), topo)
    with pytest.raises(AllocationError, match="policy SpreadByPCPUs"):
        check_required("SpreadByPCPUs", frozenset({2, 3}), topo)
