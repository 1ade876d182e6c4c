"""The NodeResourceTopology report (docs/rules/koordlet-topology.md): annotations as upstream marshals them,
the kubelet policy, the node reservation and system-QoS copies, share pools, NUMA zones (with the NUMA
reservation), change detection and the create / merge-patch bodies. Every expected value is worked out by
hand in the comments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from agent.system.cgroup import CgroupVersion
from agent.system.nodeinfo import CpuInfo, NodeTopology, read_topology
from agent.topology.kubelet import KubeletConfig
from agent.topology.nrt import KubeletView, NRTBuildError, NRTStatus, build_status, reported_cpus
from agent.topology.nrtobject import create_body, is_changed, patch_body
from agent.topology.sharepools import share_pools
from apis.kubeobjects import Node, Pod
from tests.fixtures.hosttree import HostTree

GI = 1024**3
# 2 sockets, 1 NUMA node each; 2 cores x 2 threads per socket. Siblings: 0&4, 1&5 (socket 0), 2&6, 3&7.
CPUS = tuple(CpuInfo(cpu, cpu % 2, cpu % 4 // 2, cpu % 4 // 2) for cpu in range(8))
TOPO = NodeTopology(CPUS, (0, 1))
MEM = {0: {"MemTotal": 8 * GI}, 1: {"MemTotal": 4 * GI}}
NO_KUBELET = KubeletView(None)

CPU_TOPOLOGY = (
    '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":0,"node":0},'
    '{"id":2,"core":0,"socket":1,"node":1},{"id":3,"core":1,"socket":1,"node":1},'
    '{"id":4,"core":0,"socket":0,"node":0},{"id":5,"core":1,"socket":0,"node":0},'
    '{"id":6,"core":0,"socket":1,"node":1},{"id":7,"core":1,"socket":1,"node":1}]}'
)


def node(
    annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None, **status: Any
) -> Node:
    meta: dict[str, Any] = {"name": "n1", "uid": "node-uid", "labels": labels or {}}
    if annotations is not None:
        meta["annotations"] = annotations
    return cast(Node, {"metadata": meta, "status": status})


def pod(uid: str, qos: str, cpuset: str) -> Pod:
    return {
        "metadata": {
            "uid": uid,
            "namespace": "ns",
            "name": uid,
            "labels": {"koordinator.sh/qosClass": qos},
            "annotations": {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": cpuset})},
        }
    }


def zone(
    name: str, cpu: str, memory: str, cpu_alloc: str | None = None, mem_alloc: str | None = None
) -> dict[str, Any]:
    def info(n: str, cap: str, alloc: str | None) -> dict[str, str]:
        return {"name": n, "capacity": cap, "allocatable": alloc or cap, "available": alloc or cap}

    return {
        "name": name,
        "type": "Node",
        "resources": [
            info("cpu", cpu, cpu_alloc),
            info("hugepages-1Gi", "0", None),
            info("hugepages-2Mi", "0", None),
            info("memory", memory, mem_alloc),
        ],
    }


def build(n: Node, pods: list[Pod] | None = None, kubelet: KubeletView = NO_KUBELET) -> NRTStatus:
    return build_status(TOPO, MEM, kubelet, n, pods or [], share_pools)


def test_policy_none_with_reservation_system_qos_and_pods() -> None:
    n = node(
        {
            "node.koordinator.sh/reservation": '{"resources":{"cpu":"1500m"}}',
            "node.koordinator.sh/system-qos-resource": '{"cpuset":"1"}',
        }
    )
    s = build(n, [pod("lse", "LSE", "2,6"), pod("lsr", "LSR", "3")])
    a = s.annotations
    assert a["node.koordinator.sh/cpu-topology"] == CPU_TOPOLOGY
    assert a["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"none"}'  # no kubelet config file
    # 1500m → ceil 2 CPUs by takeByTopology: socket 0 first, its core 0 = CPUs {0, 4}.
    assert a["node.koordinator.sh/reservation"] == '{"resources":{"cpu":"1500m"},"reservedCPUs":"0,4"}'
    assert a["node.koordinator.sh/system-qos-resource"] == '{"cpuset":"1"}'
    # LS: 0-7 − {2,6} − {3} = {0,1,4,5,7}; node 0 {0,1,4,5}, node 1 {7}; − reserved {0,4} − system {1}.
    assert (
        a["node.koordinator.sh/cpu-shared-pools"]
        == '[{"socket":0,"node":0,"cpuset":"5"},{"socket":1,"node":1,"cpuset":"7"}]'
    )
    # BE: only the LSE pod's CPUs leave: {0,1,3,4,5,7}; node 0 {0,1,4,5} → "5", node 1 {3,7}.
    assert (
        a["node.koordinator.sh/be-cpu-shared-pools"]
        == '[{"socket":0,"node":0,"cpuset":"5"},{"socket":1,"node":1,"cpuset":"3,7"}]'
    )
    assert a["node.koordinator.sh/pod-cpu-allocs"] == "null"
    assert s.topology_policy == "None"
    assert s.labels == {}
    assert s.zones == [zone("node-0", "4", "8Gi"), zone("node-1", "4", "4Gi")]


def test_static_kubelet_policy_and_its_assigned_cpus() -> None:
    cfg = KubeletConfig(
        "static",
        {"full-pcpus-only": "true"},
        reserved_system_cpus="0,4",
        topology_manager_policy="single-numa-node",
        topology_manager_scope="pod",
    )
    guaranteed: Pod = {"metadata": {"uid": "uid-g", "namespace": "default", "name": "g"}}
    s = build(node({}), [guaranteed], KubeletView(cfg, {"uid-g": {"app": "2-3"}}))
    a = s.annotations
    assert (
        a["kubelet.koordinator.sh/cpu-manager-policy"]
        == '{"policy":"static","options":{"full-pcpus-only":"true"},"reservedCPUs":"0,4"}'
    )
    assert (
        a["node.koordinator.sh/pod-cpu-allocs"]
        == '[{"namespace":"default","name":"g","uid":"uid-g","cpuset":"2-3","managedByKubelet":true}]'
    )
    # The kubelet's exclusive CPUs {2,3} leave both pools; its reserved CPUs stay (burstable pods use them).
    pools = '[{"socket":0,"node":0,"cpuset":"0-1,4-5"},{"socket":1,"node":1,"cpuset":"6-7"}]'
    assert a["node.koordinator.sh/cpu-shared-pools"] == pools
    assert a["node.koordinator.sh/be-cpu-shared-pools"] == pools
    assert a["node.koordinator.sh/reservation"] == "{}"
    assert a["node.koordinator.sh/system-qos-resource"] == "{}"  # annotations present, this one absent
    assert s.topology_policy == "SingleNUMANodePodLevel"


def test_none_policy_from_a_config_ignores_the_checkpoint() -> None:
    s = build(node({}), [], KubeletView(KubeletConfig("none"), {"uid-g": {"app": "2-3"}}))
    assert s.annotations["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"none"}'
    assert s.annotations["node.koordinator.sh/pod-cpu-allocs"] == "null"
    assert '"cpuset":"0-1,4-5"' in s.annotations["node.koordinator.sh/cpu-shared-pools"]


def test_a_static_reservation_kubelet_would_refuse_is_a_warning() -> None:
    s = build(node({}), [], KubeletView(KubeletConfig("static")))
    assert s.annotations["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"static"}'
    assert any("reserved CPUs" in w for w in s.warnings)


def test_node_without_annotations_reports_null_system_qos() -> None:
    assert build(node(None)).annotations["node.koordinator.sh/system-qos-resource"] == "null"


def test_reservation_copies_and_canonicalises() -> None:
    n = node({"node.koordinator.sh/reservation": '{"reservedCPUs":"7,5-6","applyPolicy":"ReservedCPUsOnly"}'})
    s = build(n)
    assert (
        s.annotations["node.koordinator.sh/reservation"]
        == '{"reservedCPUs":"5-7","applyPolicy":"ReservedCPUsOnly"}'
    )
    bad = build(node({"node.koordinator.sh/reservation": '{"reservedCPUs":5}'}))
    assert bad.annotations["node.koordinator.sh/reservation"] == "{}"
    assert any("reservedCPUs" in w for w in bad.warnings)


def test_non_exclusive_system_qos_cpus_stay_in_the_pools() -> None:
    s = build(node({"node.koordinator.sh/system-qos-resource": '{"cpuset":"0-1","cpusetExclusive":false}'}))
    assert (
        s.annotations["node.koordinator.sh/system-qos-resource"] == '{"cpuset":"0-1","cpusetExclusive":false}'
    )
    assert '"cpuset":"0-1,4-5"' in s.annotations["node.koordinator.sh/cpu-shared-pools"]


@pytest.mark.parametrize("bad", ['{"cpuset":1}', '{"cpusetExclusive":"no"}', "{"])
def test_undecodable_system_qos_skips_the_round(bad: str) -> None:
    with pytest.raises(NRTBuildError, match="system-qos-resource"):
        build(node({"node.koordinator.sh/system-qos-resource": bad}))


def test_numa_count_mismatch_and_no_cpus_skip_the_round() -> None:
    with pytest.raises(NRTBuildError, match="cpu 2, NUMA 1"):
        build_status(TOPO, {0: MEM[0]}, NO_KUBELET, node({}), [], share_pools)
    with pytest.raises(NRTBuildError, match="not collected"):
        build_status(NodeTopology((), ()), {}, NO_KUBELET, node({}), [], share_pools)


def test_numa_reservation_label_deducts_per_zone() -> None:
    n = node(
        {},
        {"node.koordinator.sh/enable-numa-reservation": "true"},
        capacity={"cpu": "8", "memory": "12Gi"},
        allocatable={"cpu": "7", "memory": "11Gi"},
    )
    s = build(n)
    # cpu reserved 1 → ceil(1000m / 2) = 500m per zone; memory 1Gi → 512Mi per zone.
    assert s.zones == [
        zone("node-0", "4", "8Gi", "3500m", "7680Mi"),
        zone("node-1", "4", "4Gi", "3500m", "3584Mi"),
    ]
    assert s.labels == {"node.koordinator.sh/enable-numa-reservation": "true"}
    # The object carries every value as its allocatable (upstream's merge).
    body = create_body(n, s)
    assert body["zones"][0]["resources"][0] == {
        "name": "cpu",
        "capacity": "3500m",
        "allocatable": "3500m",
        "available": "3500m",
    }
    assert body["metadata"]["labels"]["node.koordinator.sh/enable-numa-reservation"] == "true"


def test_unknown_ids_read_as_lscpu_prints_them() -> None:
    topo = NodeTopology((CpuInfo(1, -1, -1, -1), CpuInfo(0, 3, 0, 0)), ())
    assert reported_cpus(topo) == [CpuInfo(0, 3, 0, 0), CpuInfo(1, 1, 0, 0)]


def test_from_a_fake_sysfs(tmp_path: Path) -> None:
    host = HostTree(tmp_path, CgroupVersion.V2)
    host.write_topology({0: [0, 1], 1: [2, 3]}, cores_per_socket=2)  # core = cpu % 2, socket = NUMA node
    s = build_status(read_topology(host.paths), {0: MEM[0], 1: MEM[1]}, NO_KUBELET, node({}), [], share_pools)
    assert s.annotations["node.koordinator.sh/cpu-topology"] == (
        '{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":0,"node":0},'
        '{"id":2,"core":0,"socket":1,"node":1},{"id":3,"core":1,"socket":1,"node":1}]}'
    )
    assert s.zones == [zone("node-0", "2", "8Gi"), zone("node-1", "2", "4Gi")]


# --- the object -----------------------------------------------------------------------------------------
def _object(s: NRTStatus) -> dict[str, Any]:
    body = create_body(node({}), s)
    body["metadata"]["resourceVersion"] = "5"
    return body


def test_create_body_is_owned_by_the_node() -> None:
    s = build(node({}))
    body = create_body(node({}), s)
    assert body["apiVersion"] == "topology.node.k8s.io/v1alpha1" and body["kind"] == "NodeResourceTopology"
    assert body["metadata"]["name"] == "n1"
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
    assert body["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "name": "n1",
            "uid": "node-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert body["topologyPolicies"] == ["None"]
    assert body["metadata"]["annotations"] == s.annotations


def test_unchanged_report_is_not_a_change_even_reformatted() -> None:
    s = build(node({}))
    current = _object(s)
    assert is_changed(s, current) == (False, "")
    # Same JSON with spaces, plus annotations and zone resources the koordlet does not own.
    ann = current["metadata"]["annotations"]
    key = "node.koordinator.sh/cpu-shared-pools"
    ann[key] = json.dumps(json.loads(ann[key]), indent=1)
    ann["other.io/x"] = "y"
    current["zones"][0]["resources"].append(
        {"name": "example.com/foo", "capacity": "1", "allocatable": "1", "available": "1"}
    )
    assert is_changed(s, current) == (False, "")


def test_changes_are_found_with_a_reason() -> None:
    s = build(node({}))
    assert is_changed(s, None) == (True, "metadata changed")
    moved = build(node({}), [pod("p", "LSR", "0")])
    assert is_changed(moved, _object(s)) == (
        True,
        "annotations changed, key node.koordinator.sh/cpu-shared-pools",
    )
    other_policy = _object(s)
    other_policy["topologyPolicies"] = ["SingleNUMANodePodLevel"]
    assert is_changed(s, other_policy)[1] == "TopologyPolicies changed"
    less_memory = _object(s)
    less_memory["zones"][1]["resources"][3]["allocatable"] = "3Gi"
    assert is_changed(s, less_memory) == (True, "Zones changed, item: resources")
    missing = _object(s)
    del missing["metadata"]["annotations"]["node.koordinator.sh/pod-cpu-allocs"]
    assert is_changed(s, missing)[1] == "annotations changed, key node.koordinator.sh/pod-cpu-allocs"


def test_patch_keeps_foreign_zone_resources_and_drops_unknown_zones() -> None:
    s = build(node({}))
    current = _object(s)
    current["zones"][0]["resources"].append(
        {"name": "example.com/foo", "capacity": "2", "allocatable": "1", "available": "1"}
    )
    current["zones"].append(zone("node-9", "1", "1Gi"))
    patch = patch_body(s, current)
    assert patch["metadata"] == {"annotations": s.annotations}
    assert patch["topologyPolicies"] == ["None"]
    assert [z["name"] for z in patch["zones"]] == ["node-0", "node-1"]
    names = [r["name"] for r in patch["zones"][0]["resources"]]
    assert names == ["cpu", "example.com/foo", "hugepages-1Gi", "hugepages-2Mi", "memory"]
    assert patch["zones"][0]["resources"][1]["capacity"] == "1"  # written as its allocatable


def test_stale_managed_keys_are_deleted_so_the_report_settles() -> None:
    n = node({}, {"node.koordinator.sh/enable-numa-reservation": "false"})
    current = _object(build(n))
    current["metadata"]["annotations"]["node.koordinator.sh/cpu-basic-info"] = '{"cpuModel":"x"}'
    current["metadata"]["annotations"]["other.io/x"] = "kept"
    s = build(node({}))  # the Node dropped its label; koord never writes cpu-basic-info
    assert is_changed(s, current)[0]
    patch = patch_body(s, current)
    assert patch["metadata"]["annotations"]["node.koordinator.sh/cpu-basic-info"] is None
    assert "other.io/x" not in patch["metadata"]["annotations"]
    assert patch["metadata"]["labels"] == {"node.koordinator.sh/enable-numa-reservation": None}
    # Applied as a merge patch (null deletes), the next round finds nothing to change.
    meta = current["metadata"]
    for key, value in patch["metadata"]["annotations"].items():
        if value is None:
            meta["annotations"].pop(key)
        else:
            meta["annotations"][key] = value
    meta["labels"].pop("node.koordinator.sh/enable-numa-reservation")
    assert is_changed(s, current) == (False, "")
