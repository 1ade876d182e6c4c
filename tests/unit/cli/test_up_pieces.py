"""The pure pieces of `koord up`: the simulated host (read back by the koordlet's own collectors),
simulated pod usage, the emulated kubelet's pod status, the demo workload and the status view."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent.metricsadvisor.framework import CollectContext
from agent.metricsadvisor.noderesource import NodeResourceCollector
from agent.metricsadvisor.podresource import PodResourceCollector
from agent.podmeta import pod_meta
from agent.system.cgroup import CgroupVersion
from agent.system.podcgroup import CgroupDriver
from apis.qos import compute_kube_qos_class
from koord.cli import main
from koord.localcluster.demo import (
    COLOCATION_LABEL,
    QOS_LABEL,
    batch_deployment,
    batch_pods,
    demo_namespace,
    demo_pods,
    demo_profile,
)
from koord.localcluster.emulated import EmulatedHost, PodLoad
from koord.localcluster.emunode import (
    CPU_ANNOTATION,
    SIMULATED_LABEL,
    container_id,
    node_manifest,
    pod_load,
    running_status,
)
from koord.status import NodeRow, PodRow, Snapshot, render
from tests.unit.agent.metricsadvisor.conftest import Clock, Pods


def _pod(uid: str, qos: str = "Burstable", **ann: str) -> dict[str, object]:
    res = {"requests": {"cpu": "500m", "memory": "200Mi"}} if qos == "Burstable" else {}
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "ns", "uid": uid, "annotations": ann},
        "spec": {"containers": [{"name": "a", "resources": res}, {"name": "b"}]},
        "status": {"qosClass": qos},
    }


def test_pod_load_defaults_to_half_the_requests_and_annotations_win() -> None:
    assert pod_load(_pod("u1")) == PodLoad(0.25, 100 << 20)
    batch = {
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "resources": {
                        "requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}
                    },
                }
            ]
        }
    }
    assert pod_load(batch) == PodLoad(0.5, 512 << 20)  # batch-cpu counts milli-cores
    assert pod_load(_pod("u2", **{CPU_ANNOTATION: "1500m"})).cpu_cores == 1.5
    assert pod_load(_pod("u3", **{CPU_ANNOTATION: "not-a-quantity"})).cpu_cores == 0.25


def test_node_manifest_is_labelled_simulated_with_its_capacity() -> None:
    node = node_manifest("sim-node-1", cpus=4, memory_bytes=8 << 30)
    assert node["metadata"]["labels"][SIMULATED_LABEL] == "true"
    assert node["status"]["capacity"] == {"cpu": "4", "memory": "8388608Ki", "pods": "110"}
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"


def test_running_status_gives_every_container_a_stable_id() -> None:
    pod = _pod("u1")
    status = running_status(pod, "2026-01-01T00:00:00Z")
    assert status["phase"] == "Running"
    ids = [c["containerID"] for c in status["containerStatuses"]]
    assert ids == [container_id("u1", "a"), container_id("u1", "b")] and len(set(ids)) == 2
    meta = pod_meta({**pod, "status": {**pod["status"], **status}}, CgroupDriver.CGROUPFS)  # type: ignore[dict-item]
    assert [c.name for c in meta.containers] == ["a", "b"]


@pytest.fixture()
def host(tmp_path: Path) -> EmulatedHost:
    return EmulatedHost(
        tmp_path / "h", cpus=4, memory_bytes=8 << 30, base_load=0.25, base_memory_bytes=1 << 30
    ).build()


def test_koordlet_collectors_measure_the_simulated_load(host: EmulatedHost) -> None:
    pod = _pod("u1")
    pod = {**pod, "status": {**pod["status"], **running_status(pod, "2026-01-01T00:00:00Z")}}  # type: ignore[dict-item]
    meta = host.set_pod(pod, PodLoad(1.5, 300 << 20))
    clock = Clock()
    ctx = CollectContext(
        paths=host.paths,
        cgroup_version=CgroupVersion.V1,
        cgroup_driver=CgroupDriver.CGROUPFS,
        pods=Pods([meta]),
        clock_ns=clock,
        clk_tck=100,
    )
    node_c, pod_c = NodeResourceCollector(), PodResourceCollector()
    assert node_c.collect(ctx) == [] and pod_c.collect(ctx) == []
    host.advance(2.0)
    clock.advance(2.0)
    node = {s.kind: s.value for s in node_c.collect(ctx)}
    pods = {(s.kind, tuple(s.labels.values())): s.value for s in pod_c.collect(ctx)}
    assert node["node_cpu_usage"] == pytest.approx(0.25 * 4 + 1.5, abs=0.02)
    assert node["node_memory_usage"] == pytest.approx((1 << 30) + (300 << 20), rel=1e-6)
    assert pods[("pod_cpu_usage", ("u1",))] == pytest.approx(1.5)
    assert pods[("pod_memory_usage", ("u1",))] == 300 << 20
    assert pods[("container_cpu_usage", (meta.containers[0].container_id,))] == pytest.approx(0.75)
    host.remove_pod("u1")
    assert not (host.paths.cgroup_root / "cpu,cpuacct" / meta.cgroup_dir).exists()
    assert host.used_cpu_cores() == 1.0


def test_bad_simulated_host_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"base_load=1\.5"):
        EmulatedHost(tmp_path, base_load=1.5)


def test_demo_pods() -> None:
    pods = demo_pods("real-0")
    names = [p["metadata"]["name"] for p in pods]
    assert names == ["ls-web", "be-burner"]
    assert all(p["spec"]["schedulerName"] == "koord-scheduler" for p in pods)
    assert all(p["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "real-0"} for p in pods)
    assert compute_kube_qos_class(pods[1]) == "BestEffort"
    res = pods[1]["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] and "kubernetes.io/batch-cpu" in res["requests"]
    assert compute_kube_qos_class(pods[0]) == "Burstable"
    assert not any(p["spec"].get("nodeSelector") for p in demo_pods(None))


def test_demo_batch_workload_is_plain() -> None:
    """The batch workload is what a team writes without koord: cpu/memory, no QoS label, no priority
    class, the default scheduler; only the colocation label the demo profile selects."""
    deployment = batch_deployment(4)
    assert deployment["spec"]["replicas"] == 4
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"][COLOCATION_LABEL] == "true"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    for spec in [template["spec"], *(p["spec"] for p in batch_pods(3))]:
        assert "schedulerName" not in spec and "priorityClassName" not in spec
        assert spec["containers"][0]["resources"]["requests"] == {"cpu": "200m", "memory": "64Mi"}
    assert [p["metadata"]["name"] for p in batch_pods(2)] == ["be-batch-0", "be-batch-1"]
    assert all(QOS_LABEL not in (p["metadata"].get("labels") or {}) for p in batch_pods(1))
    assert demo_namespace()["metadata"]["labels"] == {COLOCATION_LABEL: "true"}
    profile = demo_profile()["spec"]
    assert profile["namespaceSelector"] == profile["selector"] == {"matchLabels": {COLOCATION_LABEL: "true"}}


def test_render_status_view() -> None:
    snap = Snapshot(
        at=time.time(),
        nodes=[
            NodeRow("real-0", False, 2.0, 4 << 30, 0.5, 1 << 30, 3.0, 65, 700, 2 << 30, 1.25, 1),
            NodeRow("sim-node-1", True, 4.0, 8 << 30, None, None, None, None, None, None, None, None),
        ],
        pods=[
            PodRow("koord-demo", "be-0", "", "BE", "koord-batch", "Pending", "200/64Mi", "koord-demo-batch",
                   "0/2 nodes are available: 1 Insufficient kubernetes.io/batch-cpu, 1 node(s) didn't match"),
            PodRow("koord-demo", "ls-web", "real-0", "LS", "koord-prod", "Running"),
        ],
    )  # fmt: skip
    lines = render(snap).splitlines()
    real = next(line for line in lines if line.startswith("real-0"))
    assert real.split() == [
        "real-0",
        "real",
        "0.50/2",
        "25%",
        "1.0Gi/4.0Gi",
        "25%",
        "65%",
        "700m",
        "2.0Gi",
        "1.25",
        "1",
        "3s",
        "ago",
    ]
    sim = next(line for line in lines if line.startswith("sim-node-1"))
    assert sim.split()[:3] == ["sim-node-1", "simulated", "-"]
    be = next(line for line in lines if "koord-demo/be-0" in line)
    assert be.split() == ["koord-demo/be-0", "(pending)", "BE", "koord-batch", "200/64Mi", "koord-demo-batch",
                          "Pending"]  # fmt: skip
    assert next(line for line in lines if line.startswith("POD")).split()[4:6] == ["BATCH", "REQ"]
    # An unbound pod's scheduler reasons follow the table (a busy host's real node shows why it waits).
    assert lines[-1] == (
        "koord-demo/be-0 pending: 0/2 nodes are available: 1 Insufficient kubernetes.io/batch-cpu, "
        "1 node(s) didn't match"
    )


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--nodes", "-1"], "--nodes=-1"),
        (["--sim-cpus", "0"], "--sim-cpus=0"),
        (["--sim-memory-gib", "0"], "--sim-memory-gib=0"),
        (["--demo-batch-pods", "-2"], "--demo-batch-pods=-2"),
        (["--status-interval", "-1"], "--status-interval=-1.0"),
        (["--duration", "0"], "--duration=0.0"),
    ],
)
def test_up_rejects_bad_options(argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", *argv]) == 2
    assert named in capsys.readouterr().err
