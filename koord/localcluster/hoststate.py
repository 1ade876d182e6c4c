"""What a local node changes on the host, recorded before start and undone after stop: processes,
mounts under the node's folder, the kubepods cgroups in every hierarchy, the CNI bridge, iptables
chains, the sysctls kubelet always rewrites, and files kubelet/CNI write to fixed host paths.

`HostSnapshot` is what existed before start (saved as JSON in the node's state file, so a crashed
run can be cleaned up by the next one); `cleanup` undoes a run by PID, mount point and name, and
`leftovers` lists anything that is still there (empty after a clean stop).
Imports: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from koord.localcluster.procs import alive as _alive

CGROUP_ROOT = Path("/sys/fs/cgroup")
# kubelet sets these at start whatever its configuration (protectKernelDefaults only makes it exit).
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes")  # fmt: skip
# Host paths that are not configurable: kubelet's pod logs and device-plugin socket, libcni's result
# cache, the shim sockets.
HOST_DIRS = (
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/var/lib/kubelet",
    "/run/containerd/s",
    "/run/containerd",
)
CGROUP_TOPS = ("kubepods", "k8s.io")
_CHAIN_PREFIXES = ("KUBE-", "CNI-")
_TABLES = ("filter", "nat", "mangle")


@dataclass
class HostSnapshot:
    state_dir: str
    containerd_socket: str
    bridge: str
    sysctls: dict[str, str] = field(default_factory=dict)
    chains: list[str] = field(default_factory=list)  # "iptables/nat/KUBE-X"
    dir_entries: dict[str, list[str] | None] = field(default_factory=dict)  # None: the dir did not exist
    pids: dict[str, int] = field(default_factory=dict)
    cmds: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostSnapshot:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        with contextlib.suppress(OSError):
            out[key] = _sysctl_path(key).read_text().strip()
    return out


def _iptables_cmds() -> list[str]:
    return [c for c in ("iptables", "ip6tables") if shutil.which(c, path="/usr/sbin:/sbin:/usr/bin:/bin")]


def _rules(cmd: str, table: str) -> list[str]:
    proc = subprocess.run([cmd, "-w", "5", "-t", table, "-S"], capture_output=True, text=True, timeout=30)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def list_chains() -> list[str]:
    """The KUBE-*/CNI-* chains of every table, as "cmd/table/chain"."""
    found = []
    for cmd in _iptables_cmds():
        for table in _TABLES:
            for rule in _rules(cmd, table):
                parts = rule.split()
                if len(parts) >= 2 and parts[0] == "-N" and parts[1].startswith(_CHAIN_PREFIXES):
                    found.append(f"{cmd}/{table}/{parts[1]}")
    return sorted(found)


def snapshot(state_dir: Path, containerd_socket: Path, bridge: str) -> HostSnapshot:
    entries: dict[str, list[str] | None] = {}
    for d in HOST_DIRS:
        entries[d] = sorted(os.listdir(d)) if os.path.isdir(d) else None
    return HostSnapshot(
        str(state_dir), str(containerd_socket), bridge, read_sysctls(), list_chains(), entries
    )


# --- processes ------------------------------------------------------------------------------------
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def recorded_pids(snap: HostSnapshot) -> list[int]:
    """PIDs the snapshot recorded that still run the recorded binary."""
    return [
        pid for name, pid in snap.pids.items() if _alive(pid) and _cmdline(pid)[:1] == [snap.cmds.get(name)]
    ]


def shim_pids(socket: str) -> list[int]:
    """containerd shims serving our containerd (they outlive it and are matched by its address)."""
    out: list[int] = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            argv = _cmdline(int(entry.name))
            if argv and "containerd-shim" in argv[0] and socket in argv:
                out.append(int(entry.name))
    return out


def cgroup_tops(root: Path = CGROUP_ROOT) -> list[Path]:
    """The kubepods (and containerd k8s.io) cgroups in every hierarchy, v1 subsystems and unified."""
    out: list[Path] = []
    with contextlib.suppress(OSError):
        for hierarchy in sorted(root.iterdir()):
            out.extend(hierarchy / top for top in CGROUP_TOPS if (hierarchy / top).is_dir())
    return out


def _walk_bottom_up(top: Path) -> list[Path]:
    dirs = [Path(d) for d, _, _ in os.walk(top)]
    return sorted(dirs, key=lambda p: len(p.parts), reverse=True)


def cgroup_pids(tops: Iterable[Path]) -> set[int]:
    pids: set[int] = set()
    for top in tops:
        for d in _walk_bottom_up(top):
            with contextlib.suppress(OSError):
                pids.update(int(x) for x in (d / "cgroup.procs").read_text().split())
    return pids


def kill_all(pids: Iterable[int], sig: int = signal.SIGKILL, timeout: float = 10.0) -> list[int]:
    """Signals pids and waits (bounded) until they are gone; returns those still alive."""
    pending = [p for p in pids if p != os.getpid()]
    for pid in pending:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for pid in pending:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        pending = [p for p in pending if _alive(p)]
        if pending:
            time.sleep(0.05)
    return pending


# --- mounts ---------------------------------------------------------------------------------------
def _unescape(field_: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field_ = field_.replace(code, char)
    return field_


def mounts_under(path: str) -> list[str]:
    base = os.path.realpath(path).rstrip("/") + "/"
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            target = _unescape(parts[1])
            if (target + "/").startswith(base):
                out.append(target)
    return sorted(set(out), key=lambda m: len(m), reverse=True)


def unmount_under(path: str, timeout: float = 10.0) -> list[str]:
    """Unmounts everything below path, deepest first (lazily if busy); returns what stays mounted."""
    deadline = time.monotonic() + timeout
    while (left := mounts_under(path)) and time.monotonic() < deadline:
        for m in left:
            if subprocess.run(["umount", m], capture_output=True, timeout=30).returncode != 0:
                subprocess.run(["umount", "-l", m], capture_output=True, timeout=30)
    return mounts_under(path)


# --- cleanup and verification ---------------------------------------------------------------------
def remove_cgroups(tops: Iterable[Path], timeout: float = 10.0) -> list[str]:
    """rmdir bottom-up, retrying while the kernel still releases a just-emptied cgroup."""
    deadline = time.monotonic() + timeout
    tops = list(tops)
    while True:
        left = []
        for top in tops:
            for d in _walk_bottom_up(top):
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(str(d))
        if not left or time.monotonic() > deadline:
            return left
        kill_all(cgroup_pids(tops), timeout=1.0)
        time.sleep(0.1)


def _delete_chains(snap: HostSnapshot) -> None:
    new = [c for c in list_chains() if c not in snap.chains]
    by_table: dict[tuple[str, str], list[str]] = {}
    for entry in new:
        cmd, table, chain = entry.split("/")
        by_table.setdefault((cmd, table), []).append(chain)
    for (cmd, table), chains in by_table.items():
        # First the jumps into the chains from anywhere, then the chains themselves.
        for rule in _rules(cmd, table):
            parts = shlex.split(rule)  # -S quotes comments ("kubernetes postrouting rules")
            targets = {parts[i + 1] for i, p in enumerate(parts[:-1]) if p in ("-j", "-g")}
            if parts[:1] == ["-A"] and targets & set(chains):
                subprocess.run(
                    [cmd, "-w", "5", "-t", table, "-D", *parts[1:]], capture_output=True, timeout=30
                )
        for chain in chains:
            subprocess.run([cmd, "-w", "5", "-t", table, "-F", chain], capture_output=True, timeout=30)
        for chain in chains:
            subprocess.run([cmd, "-w", "5", "-t", table, "-X", chain], capture_output=True, timeout=30)


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _remove_new_entries(snap: HostSnapshot) -> None:
    for d, before in snap.dir_entries.items():
        if not os.path.isdir(d):
            continue
        keep = set(before or [])
        for name in os.listdir(d):
            if name not in keep:
                p = Path(d, name)
                if p.is_dir() and not p.is_symlink():
                    # Never follow into something still mounted.
                    if not mounts_under(str(p)):
                        shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
    # Folders that did not exist before, emptied now: deepest first (/run/containerd/s before its parent).
    for d in sorted(snap.dir_entries, key=len, reverse=True):
        if snap.dir_entries[d] is None:
            with contextlib.suppress(OSError):
                os.rmdir(d)


def cleanup(snap: HostSnapshot) -> None:
    """Undoes a (stopped or crashed) run: kills what is left, unmounts, removes cgroups, the bridge,
    new iptables chains and host files, and restores the sysctls. Idempotent."""
    kill_all(recorded_pids(snap))
    kill_all(shim_pids(snap.containerd_socket))
    kill_all(cgroup_pids(cgroup_tops()))
    unmount_under(snap.state_dir)
    remove_cgroups(cgroup_tops())
    if _link_exists(snap.bridge):
        subprocess.run(["ip", "link", "del", snap.bridge], capture_output=True, timeout=30)
    _delete_chains(snap)
    for key, value in snap.sysctls.items():
        if read_sysctls().get(key) != value:
            with contextlib.suppress(OSError):
                _sysctl_path(key).write_text(value)
    _remove_new_entries(snap)


def leftovers(snap: HostSnapshot) -> list[str]:
    """Everything of the run still on the host, one description each; empty when all is clean."""
    out = [f"process {pid} ({_cmdline(pid)[0]})" for pid in recorded_pids(snap)]
    out += [f"shim process {pid}" for pid in shim_pids(snap.containerd_socket)]
    out += [f"pod process {pid}" for pid in sorted(cgroup_pids(cgroup_tops()))]
    out += [f"mount {m}" for m in mounts_under(snap.state_dir)]
    out += [f"cgroup {c}" for c in cgroup_tops()]
    if _link_exists(snap.bridge):
        out.append(f"network link {snap.bridge}")
    out += [f"iptables chain {c}" for c in list_chains() if c not in snap.chains]
    now = read_sysctls()
    out += [f"sysctl {k}={now.get(k)} (was {v})" for k, v in snap.sysctls.items() if now.get(k) != v]
    for d, before in snap.dir_entries.items():
        if os.path.isdir(d):
            new = sorted(set(os.listdir(d)) - set(before or []))
            if before is None:
                out.append(f"folder {d} (did not exist)")
            elif new:
                out.append(f"new entries in {d}: {new}")
    return out
