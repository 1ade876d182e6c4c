"""The executor's confinement on a fake host tree (docs/rules/koordlet.md#confinement): every path is opened
component by component from an allowed root, so a symbolic link anywhere (even one pointing inside the
root, even one swapped in between the read and the write) and any file that is not a regular one (FIFO,
socket, device, directory) is refused, audited once, and never blocks the executor."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.resourceexecutor import WriteStatus, hostfs
from agent.resourceexecutor.actions import CgroupWrite, FileWrite, MakeDir
from agent.resourceexecutor.hostfs import ConfinedFS
from agent.system import cgroup as cg
from agent.system.podcgroup import KubeQOS
from tests.unit.agent.resourceexecutor.conftest import Env

QUOTA = cg.CPU_QUOTA


def _write(env: Env, cgroup_dir: str | None = None, value: int = 200000) -> CgroupWrite:
    return CgroupWrite(
        "CPUSuppress", QUOTA, env.pod_dir if cgroup_dir is None else cgroup_dir, value, cacheable=False
    )


def _quota(env: Env) -> str:
    return "max 100000\n" if env.v2 else "-1\n"


def _apply_in_thread(env: Env, write: CgroupWrite) -> Any:
    """Apply ``write`` from another thread and insist it returns promptly (a FIFO once blocked forever)."""
    ex = env.executor()
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.extend(ex.apply([write])), daemon=True)
    thread.start()
    thread.join(5.0)
    assert not thread.is_alive(), "the executor blocked"
    [res] = results
    return res


def test_symlinked_directory_inside_the_root_is_refused(env: Env) -> None:
    target = env.put(QUOTA, _quota(env))
    link_dir = env.pod_dir.rstrip("/") + "-link/"
    env.path(QUOTA, link_dir).parent.symlink_to(target.parent)  # points inside the root
    [res] = env.executor().apply([_write(env, link_dir)])
    assert res.status is WriteStatus.REFUSED and res.reason.endswith("is a symbolic link")
    assert target.read_text() == _quota(env)
    [line] = env.audit_lines()
    assert line["refused"] == res.reason and line["new"] == "200000"


def test_symlinked_file_inside_the_root_is_refused(env: Env) -> None:
    target = env.put(QUOTA, _quota(env))
    other = env.host.add_pod("uid-2", KubeQOS.BESTEFFORT)
    env.path(QUOTA, other).symlink_to(target)
    [res] = env.executor().apply([_write(env, other)])
    assert res.status is WriteStatus.REFUSED and "symbolic link" in res.reason
    assert target.read_text() == _quota(env)


def test_directory_swapped_between_read_and_write_cannot_escape(env: Env, tmp_path: Path) -> None:
    target = env.put(QUOTA, _quota(env))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / target.name).write_text("untouched\n")
    ex = env.executor()
    read = ex.fs.read

    def read_then_swap(path: Path) -> str:
        text = read(path)
        target.parent.rename(target.parent.with_name(target.parent.name + ".orig"))
        target.parent.symlink_to(outside)  # the classic check-then-write race
        return text

    ex.fs.read = read_then_swap  # type: ignore[method-assign]
    [res] = ex.apply([_write(env)])
    assert res.status is WriteStatus.REFUSED and "symbolic link" in res.reason
    assert (outside / target.name).read_text() == "untouched\n"
    assert env.audit_lines()[-1]["refused"] == res.reason


def test_directory_swapped_inside_the_walk_writes_where_it_was_opened(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = env.put(QUOTA, _quota(env))
    pod = target.parent
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / target.name).write_text("untouched\n")
    opened: list[str] = []
    real_open_at = hostfs._open_at

    def open_then_swap(dir_fd: int, name: str, flags: int, path: Path) -> int:
        fd = real_open_at(dir_fd, name, flags, path)
        opened.append(name)
        if name == pod.name and opened.count(name) == 2:  # the write's walk, right after this directory
            pod.rename(pod.with_name(pod.name + ".orig"))
            pod.symlink_to(outside)
        return fd

    monkeypatch.setattr(hostfs, "_open_at", open_then_swap)
    [res] = env.executor().apply([_write(env)])
    assert res.status is WriteStatus.WRITTEN
    assert (outside / target.name).read_text() == "untouched\n"
    assert (pod.with_name(pod.name + ".orig") / target.name).read_text() == "200000"


def test_fifo_in_place_of_a_cgroup_file_is_refused_without_blocking(env: Env) -> None:
    path = env.path(QUOTA)
    os.mkfifo(path)
    res = _apply_in_thread(env, _write(env))
    assert res.status is WriteStatus.REFUSED and "a FIFO, not a regular file" in res.reason
    assert stat.S_ISFIFO(path.stat().st_mode)
    assert env.audit_lines()[0]["refused"] == res.reason


def test_socket_in_place_of_a_cgroup_file_is_refused(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    path = env.path(QUOTA)
    monkeypatch.chdir(path.parent)  # AF_UNIX paths are short: bind relative to the directory
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(path.name)
        res = _apply_in_thread(env, _write(env))
    assert res.status is WriteStatus.REFUSED and "a socket, not a regular file" in res.reason


def test_device_in_place_of_a_cgroup_file_is_refused(env: Env) -> None:
    path = env.path(QUOTA)
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except (PermissionError, OSError) as exc:
        pytest.skip(f"cannot create a device node here: {exc}")
    res = _apply_in_thread(env, _write(env))
    assert res.status is WriteStatus.REFUSED and "a character device, not a regular file" in res.reason


def test_directory_in_place_of_a_cgroup_file_is_refused(env: Env) -> None:
    env.path(QUOTA).mkdir()
    [res] = env.executor().apply([_write(env)])
    assert res.status is WriteStatus.REFUSED and "a directory, not a regular file" in res.reason


def test_a_refusal_is_audited_once_while_it_lasts(env: Env, tmp_path: Path) -> None:
    path = env.path(QUOTA)
    path.symlink_to(tmp_path / "elsewhere")
    ex = env.executor()
    for _ in range(3):
        assert ex.apply([_write(env)])[0].status is WriteStatus.REFUSED
    assert len(env.audit_lines()) == 1
    path.unlink()
    path.write_text(_quota(env))
    assert ex.apply([_write(env)])[0].status is WriteStatus.WRITTEN
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    assert ex.apply([_write(env, value=300000)])[0].status is WriteStatus.REFUSED
    assert [("refused" in line) for line in env.audit_lines()] == [True, False, True]


def test_make_dir_under_a_symlinked_parent_is_refused(env: Env, tmp_path: Path) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "LS").symlink_to(outside)
    ex = env.executor()
    res = ex.make_dir(MakeDir("ResctrlReconcile", root / "LS" / "child"))
    assert res.status is WriteStatus.REFUSED and not (outside / "child").exists()
    assert ex.make_dir(MakeDir("ResctrlReconcile", root / "LS")).status is WriteStatus.REFUSED


def test_links_at_a_root_are_anchors_only_to_siblings_known_at_start(env: Env, tmp_path: Path) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    (root / "BE" / "schemata").write_text("L3:0=fff\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "schemata").write_text("untouched\n")
    (root / "away").symlink_to(outside)  # to a directory outside the root: never an anchor
    ex = env.executor()
    (root / "late").symlink_to(root / "BE")  # a sibling link made after the start: not an anchor
    for name in ("away", "late"):
        res = ex.write_file(FileWrite("ResctrlReconcile", root / name / "schemata", "L3:0=f"))
        assert res.status is WriteStatus.REFUSED, name
    assert (outside / "schemata").read_text() == "untouched\n"
    assert (root / "BE" / "schemata").read_text() == "L3:0=fff\n"


def test_cgroup_v1_subsystem_links_are_followed(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    (root / "cpu,cpuacct" / "kubepods").mkdir(parents=True)
    (root / "cpu").symlink_to("cpu,cpuacct")
    (root / "cpu,cpuacct" / "kubepods" / "cpu.shares").write_text("2\n")
    fs = ConfinedFS([root])
    path = root / "cpu" / "kubepods" / "cpu.shares"
    assert fs.key(path) == str(root / "cpu,cpuacct" / "kubepods" / "cpu.shares")
    fs.write(path, "1024")
    assert fs.read(path) == "1024"
    assert fs.key(tmp_path / "other") is None and fs.key(root / "cpu" / ".." / "x") is None
