"""The koordlet's NodeResourceTopology reporter against the real API server (docs/rules/koordlet-topology.md
#reporting): through the real gateway it creates the node's NRT (owned by the Node, the CRD's schema
accepting it), writes nothing on an unchanged round, merge-patches the share pools when a pod's cpuset
appears, and re-creates the object after someone deletes it; and the whole koordlet reports its fake
host's CPUs with a static kubelet's files, a new pod's cpuset reaching the NRT through the pod-event kick
with the interval set to an hour (~10 s)."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agent.daemon import Koordlet
from agent.gateway import KubeGateway
from agent.options import parse
from agent.system.cgroup import CgroupVersion
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver
from agent.topology.reporter import TopologyReporter
from agent.topology.sharepools import share_pools
from apis.kubeobjects import Node, Pod
from koord.localcluster.controlplane import ControlPlane
from kube.rest import KubeRest
from tests.fixtures.hosttree import HostTree
from tests.integration.podhelpers import wait_for

GROUP, VERSION, PLURAL = "topology.node.k8s.io", "v1alpha1", "noderesourcetopologies"
POOLS = "node.koordinator.sh/cpu-shared-pools"
CPUS = tuple(CpuInfo(cpu, cpu % 2, 0, 0) for cpu in range(4))


@pytest.fixture()
def node_name(kube: Any) -> Iterator[str]:
    core: Any = client.CoreV1Api(kube)
    name = f"nrt-{uuid.uuid4().hex[:6]}"
    core.create_node({"metadata": {"name": name, "annotations": {"x": "y"}}})
    yield name
    core.delete_node(name)
    with contextlib.suppress(client.exceptions.ApiException):
        client.CustomObjectsApi(kube).delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)


def test_reporter_creates_patches_and_recreates(
    rest: KubeRest, kube: Any, node_name: str, tmp_path: Path
) -> None:
    core: Any = client.CoreV1Api(kube)
    custom: Any = client.CustomObjectsApi(kube)
    node: Node = json.loads(json.dumps(kube.sanitize_for_serialization(core.read_node(node_name))))
    gateway = KubeGateway(rest, node_name)
    pods: list[Pod] = []
    results: list[str] = []
    stop = threading.Event()
    informer = gateway.nrt_informer()
    informer.start(stop)
    reporter = TopologyReporter(
        writer=gateway,
        observed=lambda: informer.get(node_name),
        node=lambda: node,
        pods=lambda: pods,
        topology=lambda: NodeTopology(CPUS, (0,)),
        numa_meminfo=lambda: {0: {"MemTotal": 2 * 1024**3}},
        share_pools=share_pools,
        kubelet_config_file=tmp_path / "config.yaml",
        kubelet_root_dir=tmp_path,
        on_result=results.append,
    )
    try:
        assert informer.has_synced.wait(20)
        assert reporter.tick() == "created"
        nrt = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node_name)
        ann = nrt["metadata"]["annotations"]
        assert ann[POOLS] == '[{"socket":0,"node":0,"cpuset":"0-3"}]'
        assert ann["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"none"}'
        assert nrt["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
        assert nrt["topologyPolicies"] == ["None"]
        assert [r["name"] for r in nrt["zones"][0]["resources"]] == [
            "cpu",
            "hugepages-1Gi",
            "hugepages-2Mi",
            "memory",
        ]
        assert nrt["zones"][0]["resources"][3]["capacity"] == "2Gi"

        assert wait_for(lambda: informer.get(node_name) is not None, 10)
        assert reporter.tick() == "unchanged"

        pods.append({
            "metadata": {
                "uid": "p1", "labels": {"koordinator.sh/qosClass": "LSE"},
                "annotations": {"scheduling.koordinator.sh/resource-status": '{"cpuset":"2-3"}'},
            }
        })  # fmt: skip
        assert reporter.tick() == "updated"
        nrt = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node_name)
        assert nrt["metadata"]["annotations"][POOLS] == '[{"socket":0,"node":0,"cpuset":"0-1"}]'
        assert nrt["metadata"]["annotations"]["node.koordinator.sh/be-cpu-shared-pools"] == (
            '[{"socket":0,"node":0,"cpuset":"0-1"}]'
        )

        custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, node_name)
        assert wait_for(lambda: informer.get(node_name) is None, 10)
        assert reporter.tick() == "created"
        assert results == ["succeeded", "succeeded", "succeeded"]
    finally:
        stop.set()


def test_koordlet_reports_its_node_and_a_new_cpuset_at_once(
    kube: Any, namespace: str, node_name: str, tmp_path: Path, control_plane: ControlPlane
) -> None:
    core: Any = client.CoreV1Api(kube)
    custom: Any = client.CustomObjectsApi(kube)
    host = HostTree(tmp_path / "host", CgroupVersion.V2, CgroupDriver.CGROUPFS).one_numa_node(
        4, 16 * 1024 * 1024, 12 * 1024 * 1024
    )
    kubelet = tmp_path / "kubelet"
    kubelet.mkdir()
    (kubelet / "config.yaml").write_text("cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n")
    (kubelet / "cpu_manager_state").write_text('{"policyName":"static","entries":{"guar-uid":{"c":"3"}}}')
    opts, _ = parse(
        [
            f"--node-name={node_name}",
            f"--cgroup-root-dir={host.paths.cgroup_root}",
            f"--proc-root-dir={host.paths.proc}",
            f"--sys-root-dir={host.paths.sys}",
            "--addr=127.0.0.1:0",
            "--no-enable-qos",
            "--no-enable-node-metric-report",
            "--metric-cache-path=",
            "--audit-log=",
            "--feature-gates=NetworkCollector=false",
            "--node-topology-sync-interval=1h",
            f"--kubelet-config-file={kubelet / 'config.yaml'}",
            f"--kubelet-root-dir={kubelet}",
        ],
        {},
    )
    agent = Koordlet(opts, rest=KubeRest.from_kubeconfig(str(control_plane.kubeconfig_path)))

    def annotations() -> dict[str, str]:
        try:
            nrt = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, node_name)
        except client.exceptions.ApiException:
            return {}
        return dict(nrt["metadata"].get("annotations") or {})

    agent.start()
    try:
        # CPUs 0-3 on NUMA node 0; the static kubelet holds CPU 3 for pod guar-uid and reserves CPU 0.
        assert wait_for(lambda: annotations().get(POOLS) == '[{"socket":0,"node":0,"cpuset":"0-2"}]', 30)
        ann = annotations()
        assert ann["kubelet.koordinator.sh/cpu-manager-policy"] == '{"policy":"static","reservedCPUs":"0"}'
        assert ann["node.koordinator.sh/pod-cpu-allocs"] == (
            '[{"uid":"guar-uid","cpuset":"3","managedByKubelet":true}]'
        )
        core.create_namespaced_pod(namespace, {
            "metadata": {
                "name": "lsr", "labels": {"koordinator.sh/qosClass": "LSR"},
                "annotations": {"scheduling.koordinator.sh/resource-status": '{"cpuset":"1"}'},
            },
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]},
        })  # fmt: skip
        # The next interval is an hour away: only the pod event's kick can bring this.
        assert wait_for(lambda: annotations().get(POOLS) == '[{"socket":0,"node":0,"cpuset":"0,2"}]', 20)
        assert (
            annotations()["node.koordinator.sh/be-cpu-shared-pools"]
            == '[{"socket":0,"node":0,"cpuset":"0-2"}]'
        )
    finally:
        agent.shutdown()
        with contextlib.suppress(client.exceptions.ApiException):
            core.delete_namespaced_pod("lsr", namespace, grace_period_seconds=0)
