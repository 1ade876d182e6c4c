"""The real one-node cluster itself: the node becomes Ready, pods of the three QoS classes run in the
cgroups kubelet's cgroupfs naming predicts, the API server reaches the kubelet, an eviction stops a
pod, kube-controller-manager computes PDB status and collects garbage, and stop() leaves nothing on
the host (checked independently of LocalNode's own bookkeeping), after which the node restarts.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from agent.system.cgroup import CPU_QUOTA, MEMORY_LIMIT, CgroupVersion, detect_cgroup_version, read_cgroup
from agent.system.podcgroup import CgroupDriver, KubeQOS, container_cgroup_dir, pod_cgroup_dir
from koord.localcluster.hoststate import SYSCTLS
from tests.e2e.conftest import RealNode, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.apiserver]


def _running(core: Any, namespace: str, names: list[str], timeout: float = 60.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        pods = {p.metadata.name: p for p in core.list_namespaced_pod(namespace).items}
        ok = all(n in pods and pods[n].status.phase == "Running" for n in names)
        return {n: pods[n] for n in names} if ok else None

    result: dict[str, Any] = wait_for(f"pods {names} Running", probe, timeout)
    return result


def _gone(core: Any, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except ApiException as e:
        return bool(e.status == 404)
    return False


def _evict(core: Any, namespace: str, name: str) -> int:
    """POST pods/<name>/eviction as policy/v1beta1 (a 1.20 server has no policy/v1 Eviction)."""
    body = {
        "apiVersion": "policy/v1beta1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    try:
        resp = core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False)
    except ApiException as e:
        return int(e.status)
    return int(resp.status)


def _container_dir(pod: Any) -> str:
    qos = KubeQOS(pod.status.qos_class)
    pod_dir = pod_cgroup_dir(CgroupDriver.CGROUPFS, qos, pod.metadata.uid)
    return container_cgroup_dir(CgroupDriver.CGROUPFS, pod_dir, pod.status.container_statuses[0].container_id)


def test_node_is_ready_and_its_kubelet_answers(real_node: RealNode) -> None:
    node = real_node.core.read_node(real_node.node_name)
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert {"type": "InternalIP", "address": real_node.node_ip} in [
        a.to_dict() for a in node.status.addresses
    ]
    assert node.status.daemon_endpoints.kubelet_endpoint.port == real_node.kubelet_port
    assert real_node.cgroup_driver == "cgroupfs"
    # The kubelet API on the node IP, with webhook authentication of the admin's bearer token.
    ctx = ssl.create_default_context(cafile=str(real_node.ca_cert))
    req = urllib.request.Request(
        f"{real_node.kubelet_url}/pods", headers={"Authorization": f"Bearer {real_node.token}"}
    )
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        assert json.load(resp)["kind"] == "PodList"


def test_three_qos_classes_run_in_kubelet_cgroups(real_node: RealNode, e2e_namespace: str) -> None:
    core, ns = real_node.core, e2e_namespace
    for qos in ("Burstable", "BestEffort", "Guaranteed"):
        core.create_namespaced_pod(ns, real_node.pod(qos.lower(), namespace=ns, qos=qos))
    pods = _running(core, ns, ["burstable", "besteffort", "guaranteed"])
    root = real_node.cgroup_root
    version = detect_cgroup_version(root)
    expected = {  # (cfs quota µs at the default 100 ms period, memory limit) per podspec.qos_resources
        "burstable": (20000, 64 << 20),
        "guaranteed": (10000, 32 << 20),
        "besteffort": (-1, None),
    }
    for name, pod in pods.items():
        assert pod.status.qos_class.lower() == name
        cdir = _container_dir(pod)
        prefix = {"burstable": "kubepods/burstable/pod", "besteffort": "kubepods/besteffort/pod"}
        assert cdir.startswith(prefix.get(name, "kubepods/pod"))
        subsystems = ["cpu", "cpuacct", "memory", "pids"] if version is CgroupVersion.V1 else [""]
        for sub in subsystems:
            assert (root / sub / cdir).is_dir(), f"{name}: no container cgroup {root / sub / cdir}"
        procs = (root / subsystems[0] / cdir / "cgroup.procs").read_text().split()
        assert procs, f"{name}: no process in its container cgroup"
        quota, memory = expected[name]
        assert read_cgroup(root, version, CPU_QUOTA, cdir) == quota
        if memory is not None:
            assert read_cgroup(root, version, MEMORY_LIMIT, cdir) == memory


def test_the_api_server_reaches_the_kubelet_for_logs(real_node: RealNode, e2e_namespace: str) -> None:
    core, ns = real_node.core, e2e_namespace
    cmd = ["/bin/sh", "-c", "echo hello-from-busybox; trap 'exit 0' TERM; while :; do sleep 1; done"]
    core.create_namespaced_pod(ns, real_node.pod("talker", namespace=ns, command=cmd))
    _running(core, ns, ["talker"])
    wait_for("the pod's log", lambda: "hello-from-busybox" in core.read_namespaced_pod_log("talker", ns), 30)


def test_eviction_stops_the_pod(real_node: RealNode, e2e_namespace: str) -> None:
    core, ns = real_node.core, e2e_namespace
    core.create_namespaced_pod(ns, real_node.pod("victim", namespace=ns, qos="Burstable"))
    pod = _running(core, ns, ["victim"])["victim"]
    cpu_dir = real_node.cgroup_root / "cpu" / _container_dir(pod)
    assert cpu_dir.is_dir()
    assert _evict(core, ns, "victim") == 201
    # kubelet kills the container within seconds; the API object goes after its cleanup (10-50 s).
    wait_for("the evicted container's cgroup to go", lambda: not cpu_dir.exists(), 30)
    wait_for("the evicted pod to be deleted", lambda: _gone(core, ns, "victim"), 90, interval=0.5)


def test_controller_manager_computes_pdb_status(real_node: RealNode, e2e_namespace: str) -> None:
    core, ns = real_node.core, e2e_namespace
    custom: Any = client.CustomObjectsApi(real_node.api)
    for name in ("guarded-a", "guarded-b"):
        core.create_namespaced_pod(ns, real_node.pod(name, namespace=ns, labels={"app": "guarded"}))
    _running(core, ns, ["guarded-a", "guarded-b"])
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    custom.create_namespaced_custom_object("policy", "v1beta1", ns, "poddisruptionbudgets", pdb)

    def allowed() -> int | None:
        pdb = custom.get_namespaced_custom_object("policy", "v1beta1", ns, "poddisruptionbudgets", "guard")
        status: dict[str, Any] = pdb.get("status", {})
        return status.get("disruptionsAllowed") if status.get("currentHealthy") is not None else None

    wait_for("PDB status with one disruption allowed", lambda: allowed() == 1, 30)
    assert _evict(core, ns, "guarded-a") == 201
    wait_for("PDB status with no disruption allowed", lambda: allowed() == 0, 30)
    assert _evict(core, ns, "guarded-b") == 429


def test_controller_manager_collects_garbage_and_issues_tokens(
    real_node: RealNode, e2e_namespace: str
) -> None:
    core, ns = real_node.core, e2e_namespace
    owner = core.create_namespaced_config_map(ns, {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid}
    core.create_namespaced_config_map(ns, {"metadata": {"name": "dependent", "ownerReferences": [ref]}})
    core.delete_namespaced_config_map("owner", ns)

    def dependent_gone() -> bool:
        try:
            core.read_namespaced_config_map("dependent", ns)
        except ApiException as e:
            return bool(e.status == 404)
        return False

    wait_for("the garbage collector to delete the dependent", dependent_gone, 60)
    wait_for(
        "a token secret for the namespace's default service account",
        lambda: any(
            s.type == "kubernetes.io/service-account-token" for s in core.list_namespaced_secret(ns).items
        ),
        30,
    )


def _host_state(state_dir: Path, bridge: str) -> dict[str, Any]:
    """The host facts stop() must restore, read directly (not through koord.localcluster.hoststate)."""
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(state_dir) in cmd and int(pid) != os.getpid():
            procs.append(f"{pid}: {cmd[:120]}")
    mounts = [
        line.split()[1] for line in Path("/proc/mounts").read_text().splitlines() if str(state_dir) in line
    ]
    return {
        "processes": procs,
        "mounts": mounts,
        "cgroups": sorted(glob.glob("/sys/fs/cgroup/*/kubepods")),
        "bridge": os.path.exists(f"/sys/class/net/{bridge}"),
        "sysctls": {k: Path("/proc/sys", k.replace(".", "/")).read_text().strip() for k in SYSCTLS},
        "pod_logs": sorted(os.listdir("/var/log/pods")) if os.path.isdir("/var/log/pods") else [],
    }


def test_stop_leaves_nothing_behind_and_the_node_restarts(real_node: RealNode) -> None:
    """Runs last in this module: stops the session's node (with a pod running), checks the host, and
    starts the node again for any later test."""
    node, core = real_node.node, real_node.core
    name = f"last-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_pod("default", real_node.pod(name, qos="Guaranteed"))
    _running(core, "default", [name])
    running = _host_state(node.state_dir, node.bridge)
    assert running["processes"] and running["mounts"] and running["cgroups"], running
    t0 = time.monotonic()
    node.stop()
    teardown = time.monotonic() - t0
    after = _host_state(node.state_dir, node.bridge)
    assert node.last_run is not None
    logs_before = node.last_run.dir_entries.get("/var/log/pods") or []
    assert after == {
        "processes": [],
        "mounts": [],
        "cgroups": [],
        "bridge": False,
        "sysctls": {k: v for k, v in node.last_run.sysctls.items()},
        "pod_logs": logs_before,
    }, after
    assert node.leftovers() == []
    assert teardown < 60, f"stop() took {teardown:.1f}s"
    print(f"LocalNode.stop() with one pod running: {teardown:.1f}s")
    node.start()
    print(f"LocalNode restart to Ready: {node.ready_seconds:.1f}s")
    core.create_namespaced_pod("default", real_node.pod(name + "-again"))
    _running(core, "default", [name + "-again"])
    core.delete_namespaced_pod(name + "-again", "default", grace_period_seconds=0)


def test_koord_up_runs_a_real_node_and_removes_it(real_node: RealNode, tmp_path: Path) -> None:
    """`koord up` as root brings up the node too, and Ctrl-C removes it. The session's node steps
    aside meanwhile (one node per host) and restarts afterwards."""
    node = real_node.node
    node.stop()
    try:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        argv = [sys.executable, "-m", "koord.cli", "up", "--no-build", "--state-dir", str(tmp_path / "up"),
                "--no-demo", "--prometheus=off", "--status-interval=0"]  # fmt: skip
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        assert proc.stdout is not None
        out: list[str] = []
        try:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline and (line := proc.stdout.readline()):
                out.append(line)
                if line.startswith("Press Ctrl-C"):
                    break
            text = "".join(out)
            assert f"real node {node.node_name}: containerd, kubelet" in text, text
            kubeconfig = next(ln.split("=", 1)[1].strip() for ln in out if "KUBECONFIG=" in ln)
            kube_config: Any = config  # untyped module
            up_core: Any = client.CoreV1Api(kube_config.new_client_from_config(config_file=kubeconfig))
            conds = up_core.read_node(node.node_name).status.conditions
            assert any(c.type == "Ready" and c.status == "True" for c in conds)
            assert _host_state(tmp_path / "up" / "node", node.bridge)["cgroups"]
        finally:
            proc.send_signal(signal.SIGINT)
            rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, "".join(out) + rest
        assert "koord stopped" in rest
        after = _host_state(tmp_path / "up" / "node", node.bridge)
        assert after["processes"] == [] and after["mounts"] == [] and after["cgroups"] == [], after
        assert not after["bridge"], after
        assert node.last_run is not None and after["sysctls"] == node.last_run.sysctls, after
    finally:
        node.start()
