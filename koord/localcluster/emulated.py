"""A simulated host for `koord up --nodes N`: a generated proc/sys/cgroup (v1, cgroupfs) tree whose
counters advance as if the machine ran a background load plus its pods' loads, so a real koordlet
pointed at it (``--proc-root-dir``, ``--sys-root-dir``, ``--cgroup-root-dir``) measures that load.

Pure file writing, no API calls (``koord.localcluster.emunode`` drives it from the pods the API server
binds to the node). Every write is an atomic replace, like a pseudo-file never seen half-written.

Imports: standard library, agent.system.{cgroup,podcgroup}, agent.podmeta.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.podmeta import PodMeta, pod_meta
from agent.system import cgroup as cg
from agent.system.cgroup import CgroupVersion, HostPaths
from agent.system.podcgroup import CgroupDriver, KubeQOS, qos_cgroup_dir
from apis.kubeobjects import Pod

CLK_TCK = 100  # USER_HZ of /proc/stat; the koordlet reads it as 100 like every Linux build
PAGE = 4096
_V1 = CgroupVersion.V1
_SUBSYSTEMS = ("cpu,cpuacct", "memory", "cpuset")


@dataclass(frozen=True, slots=True)
class PodLoad:
    """What one pod of the simulated host uses: CPU in cores, memory in bytes (spread over its
    containers)."""

    cpu_cores: float
    memory_bytes: int


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


class EmulatedHost:
    """`EmulatedHost(base, cpus=4, memory_bytes=8 GiB, base_load=0.3)`: ``build()`` once, then
    ``set_pod``/``remove_pod`` as pods come and go and ``advance(seconds)`` every second.

    ``base_load`` is the share of the CPUs busy outside any pod (system daemons, host applications),
    ``base_memory_bytes`` the memory they hold; the node total is that plus the pods'.
    """

    def __init__(
        self,
        base: Path,
        *,
        cpus: int = 4,
        memory_bytes: int = 8 << 30,
        base_load: float = 0.3,
        base_memory_bytes: int = 1 << 30,
    ) -> None:
        if cpus < 1 or memory_bytes < PAGE or not 0.0 <= base_load <= 1.0:
            raise ValueError(
                f"bad simulated host: cpus={cpus} memory_bytes={memory_bytes} base_load={base_load}"
            )
        self.base = base
        self.cpus = cpus
        self.memory_bytes = memory_bytes
        self.base_load = base_load
        self.base_memory_bytes = base_memory_bytes
        self.paths = HostPaths(cgroup_root=base / "cgroup", proc=base / "proc", sys=base / "sys")
        self.driver = CgroupDriver.CGROUPFS
        self._pods: dict[str, tuple[PodMeta, PodLoad]] = {}
        self._cpu_ns: dict[str, int] = {}  # cumulative cpuacct.usage per cgroup dir
        self._ticks = [0] * cpus  # cumulative busy ticks per CPU (user column)
        self._idle = [0] * cpus
        self._lock = threading.Lock()

    # --- layout -------------------------------------------------------------------------------
    def _file(self, spec: cg.CgroupFile[Any], cgroup_dir: str) -> Path:
        return cg.cgroup_file_path(self.paths.cgroup_root, _V1, spec, cgroup_dir)

    def _mkdir(self, cgroup_dir: str) -> None:
        for sub in _SUBSYSTEMS:
            (self.paths.cgroup_root / sub / cgroup_dir).mkdir(parents=True, exist_ok=True)
        cpus = f"0-{self.cpus - 1}\n"
        _write(self._file(cg.CPUSET_CPUS, cgroup_dir), cpus)
        _write(self._file(cg.CPU_PERIOD, cgroup_dir), "100000\n")
        _write(self._file(cg.CPU_QUOTA, cgroup_dir), "-1\n")
        _write(self._file(cg.CPU_SHARES, cgroup_dir), "1024\n")
        self._cpu_ns.setdefault(cgroup_dir, 0)
        self._write_usage(cgroup_dir, 0.0, 0)

    def build(self) -> EmulatedHost:
        root = self.paths.cgroup_root
        root.mkdir(parents=True, exist_ok=True)
        for sub in _SUBSYSTEMS:
            (root / sub).mkdir(exist_ok=True)
        for alias in ("cpu", "cpuacct"):
            if not (root / alias).exists():
                (root / alias).symlink_to("cpu,cpuacct")
        (self.paths.proc / "pressure").mkdir(parents=True, exist_ok=True)
        for qos in KubeQOS:
            self._mkdir(qos_cgroup_dir(self.driver, qos))
        system = self.paths.sys / "devices" / "system"
        for cpu in range(self.cpus):
            topo = system / "cpu" / f"cpu{cpu}" / "topology"
            topo.mkdir(parents=True, exist_ok=True)
            (topo / "core_id").write_text(f"{cpu}\n")
            (topo / "physical_package_id").write_text("0\n")
        (system / "node" / "node0").mkdir(parents=True, exist_ok=True)
        (system / "node" / "node0" / "cpulist").write_text(f"0-{self.cpus - 1}\n")
        for name in ("cpu", "memory", "io"):
            text = "".join(f"{k} avg10=0.00 avg60=0.00 avg300=0.00 total=0\n" for k in ("some", "full"))
            (self.paths.proc / "pressure" / name).write_text(text)
        self.advance(0.0)
        return self

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    # --- pods ---------------------------------------------------------------------------------
    def set_pod(self, pod: Pod, load: PodLoad) -> PodMeta:
        """Creates (or updates the load of) the pod's and its containers' cgroups; the pod must carry
        ``status.containerStatuses[].containerID`` for its containers to get cgroups."""
        meta = pod_meta(pod, self.driver)
        with self._lock:
            known = self._pods.get(meta.uid)
            if known is None or known[0].containers != meta.containers:
                for d in (meta.cgroup_dir, *(c.cgroup_dir for c in meta.containers)):
                    self._mkdir(d)
            self._pods[meta.uid] = (meta, load)
        return meta

    def remove_pod(self, uid: str) -> None:
        with self._lock:
            gone = self._pods.pop(uid, None)
        if gone is None:
            return
        meta = gone[0]
        for d in (*(c.cgroup_dir for c in meta.containers), meta.cgroup_dir):
            self._cpu_ns.pop(d, None)
            for sub in _SUBSYSTEMS:
                shutil.rmtree(self.paths.cgroup_root / sub / d, ignore_errors=True)

    def pod_uids(self) -> set[str]:
        with self._lock:
            return set(self._pods)

    def used_cpu_cores(self) -> float:
        """What the node uses now: the background load plus every pod's, capped at the CPU count."""
        with self._lock:
            pods = sum(load.cpu_cores for _, load in self._pods.values())
        return min(float(self.cpus), self.base_load * self.cpus + pods)

    # --- counters -----------------------------------------------------------------------------
    def _write_usage(self, cgroup_dir: str, cores: float, memory: int) -> None:
        _write(self._file(cg.CPU_USAGE, cgroup_dir), f"{self._cpu_ns[cgroup_dir]}\n")
        _write(self._file(cg.CPU_STAT, cgroup_dir), "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
        keys = {
            "cache": 0,
            "rss": memory,
            "inactive_file": 0,
            "active_file": 0,
            "inactive_anon": 0,
            "active_anon": memory,
            "unevictable": 0,
        }
        _write(
            self._file(cg.MEMORY_STAT, cgroup_dir),
            "".join(f"{p}{k} {v}\n" for p in ("", "total_") for k, v in keys.items()),
        )
        _write(self._file(cg.MEMORY_USAGE, cgroup_dir), f"{memory}\n")
        pages = memory // PAGE
        _write(
            self._file(cg.MEMORY_NUMA_STAT, cgroup_dir),
            f"total={pages} N0={pages}\nfile=0 N0=0\nanon={pages} N0={pages}\n",
        )

    def advance(self, seconds: float) -> None:
        """Move every counter on by ``seconds`` of the current loads and rewrite the files."""
        with self._lock:
            pods = list(self._pods.values())
            pod_cores = sum(load.cpu_cores for _, load in pods)
            busy = min(float(self.cpus), self.base_load * self.cpus + pod_cores)
            be_dir = qos_cgroup_dir(self.driver, KubeQOS.BESTEFFORT)
            be_cores, be_mem = 0.0, 0
            for meta, load in pods:
                share = len(meta.containers) or 1
                self._cpu_ns[meta.cgroup_dir] += int(load.cpu_cores * seconds * 1e9)
                self._write_usage(meta.cgroup_dir, load.cpu_cores, load.memory_bytes)
                for c in meta.containers:
                    self._cpu_ns[c.cgroup_dir] += int(load.cpu_cores / share * seconds * 1e9)
                    self._write_usage(c.cgroup_dir, load.cpu_cores / share, load.memory_bytes // share)
                if meta.kube_qos is KubeQOS.BESTEFFORT:
                    be_cores += load.cpu_cores
                    be_mem += load.memory_bytes
            self._cpu_ns[be_dir] += int(be_cores * seconds * 1e9)
            self._write_usage(be_dir, be_cores, be_mem)
            ticks = seconds * CLK_TCK
            for i in range(self.cpus):
                self._ticks[i] += round(ticks * busy / self.cpus)
                self._idle[i] += round(ticks * (1 - busy / self.cpus))
            used_mem = min(self.memory_bytes, self.base_memory_bytes + sum(ld.memory_bytes for _, ld in pods))
        per_cpu = [[self._ticks[i], 0, 0, self._idle[i], 0, 0, 0, 0] for i in range(self.cpus)]
        total = [sum(col) for col in zip(*per_cpu, strict=True)]
        lines = ["cpu  " + " ".join(map(str, total))]
        lines += [f"cpu{i} " + " ".join(map(str, t)) for i, t in enumerate(per_cpu)]
        _write(self.paths.proc / "stat", "\n".join(lines) + "\nctxt 1\nbtime 1\nprocesses 1\n")
        total_kb, free_kb = self.memory_bytes // 1024, (self.memory_bytes - used_mem) // 1024
        _write(
            self.paths.proc / "meminfo",
            f"MemTotal: {total_kb} kB\nMemFree: {free_kb} kB\nMemAvailable: {free_kb} kB\n"
            "Buffers: 0 kB\nCached: 0 kB\n",
        )
        _write(
            self.paths.sys / "devices/system/node/node0/meminfo",
            f"Node 0 MemTotal: {total_kb} kB\nNode 0 MemFree: {free_kb} kB\nNode 0 Active(file): 0 kB\n"
            "Node 0 Inactive(file): 0 kB\nNode 0 SReclaimable: 0 kB\n",
        )
