"""Helpers of the koordlet fault tests (test_agent_faults*.py): pod objects as the API server returns
them, a fake host tree wired to the real QoS runner and resource executor (with the agent's real
Prometheus metrics and audit log), a metric view with fixed values, and a way to make a cgroup vanish
between the executor's read and its write.

Only the host boundary is faked (a generated cgroup tree); the strategies, the runner, the executor and
its confinement are the production code.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from agent.metrics import AgentMetrics
from agent.podmeta import PodMeta, pod_meta
from agent.qosmanager.framework import Snapshot, Strategy
from agent.qosmanager.runner import HostCgroupView, QoSManager, StrategyEntry
from agent.resourceexecutor.audit import AuditLog
from agent.resourceexecutor.executor import ResourceExecutor, WriteResult
from agent.system.cgroup import CgroupFile, CgroupVersion, cgroup_write_path
from agent.system.nodeinfo import CpuInfo, NodeTopology
from agent.system.podcgroup import CgroupDriver
from apis.kubeobjects import Node, Pod
from apis.nodeslo import NodeSLOSpec
from tests.fixtures.hosttree import HostTree
from tests.unit.agent.qosmanager.fakeclock import FakeClock

NODE = "fault-node"
NCPU = 4
START = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


def be_pod(name: str, *, batch_cpu: str = "500", batch_memory: str = "512Mi") -> Pod:
    """A running BE pod (raw label BE, Kubernetes BestEffort) with one container on batch resources."""
    uid = f"uid-{name}"
    resources: Any = {
        "requests": {"kubernetes.io/batch-cpu": batch_cpu, "kubernetes.io/batch-memory": batch_memory},
        "limits": {"kubernetes.io/batch-cpu": batch_cpu, "kubernetes.io/batch-memory": batch_memory},
    }
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid,
                     "labels": {"koordinator.sh/qosClass": "BE"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "resources": resources}]},
        "status": {"phase": "Running", "qosClass": "BestEffort",
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}]},
    }  # fmt: skip


def ls_pod(name: str) -> Pod:
    """A running LS (Burstable) pod with one container."""
    uid = f"uid-{name}"
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {}},
        "spec": {"nodeName": NODE, "containers": [{"name": "c"}]},
        "status": {"phase": "Running", "qosClass": "Burstable",
                   "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}]},
    }  # fmt: skip


def node(cpu: str = str(NCPU), memory: str = "16Gi") -> Node:
    return {
        "metadata": {"name": NODE},
        "status": {"capacity": {"cpu": cpu, "memory": memory}, "allocatable": {"cpu": cpu, "memory": memory}},
    }


@dataclass
class FixedMetrics:
    """A ``MetricView`` answering fixed values whatever the window (samples that are always fresh)."""

    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)

    def set(self, kind: str, labels: Mapping[str, str], value: float) -> None:
        self.values[(kind, tuple(sorted(labels.items())))] = value

    def last(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self.values.get((kind, tuple(sorted(labels.items()))))

    def avg(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> float | None:
        return self.last(kind, labels, window_seconds)

    def count(self, kind: str, labels: Mapping[str, str], window_seconds: float) -> int:
        return 1 if self.last(kind, labels, window_seconds) is not None else 0


class HostRig:
    """A fake host with pods, and the koordlet's QoS side on it: one strategy in a ``QoSManager``
    driven by a ``FakeClock``, the real executor (audit log, ``AgentMetrics`` callbacks). ``rounds``
    collects every ``execute`` call's results, one list per round."""

    def __init__(self, base: Path, version: CgroupVersion, pods: Sequence[Pod]) -> None:
        self.host = HostTree(base / "host", version, CgroupDriver.CGROUPFS).one_numa_node(
            NCPU, 16 * 1024 * 1024, 12 * 1024 * 1024
        )
        self.version = version
        self.pods: list[PodMeta] = [pod_meta(p, CgroupDriver.CGROUPFS) for p in pods]
        for meta in self.pods:
            for d in (meta.cgroup_dir, *(c.cgroup_dir for c in meta.containers)):
                self.kubelet_defaults(d)
        self.node: Node = node()
        self.slo: NodeSLOSpec | None = None
        self.metrics = FixedMetrics()
        self.topology = NodeTopology(tuple(CpuInfo(c, c, 0, 0) for c in range(NCPU)), (0,))
        self.registry = CollectorRegistry()
        self.agent_metrics = AgentMetrics(NODE, self.registry)
        self.audit_path = base / "audit.log"
        self.audit = AuditLog(self.audit_path)
        self.clock = FakeClock(START)
        self.executor = ResourceExecutor(
            self.host.paths, version, NODE, audit=self.audit, clock=self.clock.now,
            on_write=self.agent_metrics.on_write, on_drift=self.agent_metrics.on_drift,
        )  # fmt: skip
        self.rounds: list[list[WriteResult]] = []
        execute = self.executor.execute

        def recording(actions: Any) -> list[WriteResult]:
            results = execute(actions)
            self.rounds.append(results)
            return results

        self.executor.execute = recording  # type: ignore[method-assign]

    def kubelet_defaults(self, cgroup_dir: str) -> None:
        """What the kubelet leaves in a new pod or container cgroup."""
        self.host.mkdir(cgroup_dir)
        self.host.set_cpu_shares(cgroup_dir, 2 if self.version is CgroupVersion.V1 else 1)
        self.host.set_cpu_limit(cgroup_dir, -1)
        self.host.set_memory_limit(cgroup_dir, -1)
        self.host.set_cpuset(cgroup_dir, f"0-{NCPU - 1}")

    def snapshot(self, now: datetime) -> Snapshot:
        return Snapshot(
            now=now, node=self.node, node_slo=self.slo, pods=list(self.pods), metrics=self.metrics,
            cgroups=HostCgroupView(self.host.paths, self.version), cgroup_version=self.version,
            cgroup_driver=CgroupDriver.CGROUPFS, topology=self.topology,
        )  # fmt: skip

    def manager(self, strategy: Strategy[Any, Any], config: Callable[[], Any]) -> QoSManager:
        entry = StrategyEntry(strategy, config)
        return QoSManager([entry], self.snapshot, self.executor, None, clock=self.clock)

    def path(self, spec: CgroupFile[Any], cgroup_dir: str) -> Path:
        """The file the executor writes for ``spec`` (v2: ``cpuset.cpus``, not the effective one)."""
        return cgroup_write_path(self.host.paths.cgroup_root, self.version, spec, cgroup_dir)

    def text(self, spec: CgroupFile[Any], cgroup_dir: str) -> str:
        return self.path(spec, cgroup_dir).read_text().strip()

    def remove_cgroups(self, meta: PodMeta) -> None:
        """The kubelet deleting a pod's cgroups (every hierarchy)."""
        root = self.host.paths.cgroup_root
        bases = (
            [root / s for s in ("cpu,cpuacct", "memory", "cpuset")]
            if self.version is CgroupVersion.V1
            else [root]
        )
        for base in bases:
            shutil.rmtree(base / meta.cgroup_dir, ignore_errors=True)

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit_path.exists():
            return []
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]

    def sample(self, name: str, labels: Mapping[str, str]) -> float:
        return self.registry.get_sample_value(name, dict(labels)) or 0.0

    def close(self) -> None:
        self.audit.close()


def vanish_before_first_write(rig: HostRig, victim: PodMeta) -> list[str]:
    """From now on, the first write the executor makes into ``victim``'s cgroups finds them deleted: the
    executor has read the file and decided to change it, then the pod goes (the kubelet removes its
    cgroups) before the ``write(2)``. Returns the list the path of that write is appended to."""
    fs = rig.executor.fs
    write = fs.write
    seen: list[str] = []
    marker = f"pod{victim.uid}"

    def vanish_then_write(path: Path, text: str) -> None:
        if not seen and marker in str(path):
            seen.append(str(path))
            rig.remove_cgroups(victim)
        write(path, text)

    fs.write = vanish_then_write  # type: ignore[method-assign]
    return seen
