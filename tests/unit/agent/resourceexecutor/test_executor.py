"""ResourceExecutor on a fake host tree (cgroup v1 and v2): allow-list, read-before-write, cache, audit,
dry run, vanished cgroups, changes that did not happen, v2 formatting, leveled updates, drift, raw file
writes, directories and the order of ``execute``."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from agent.podmeta import PodMeta
from agent.resourceexecutor import WriteStatus
from agent.resourceexecutor.actions import CgroupWrite, FileWrite, HostActions, MakeDir
from agent.system import cgroup as cg
from agent.system.podcgroup import KubeQOS
from tests.unit.agent.resourceexecutor.conftest import Env

POD = PodMeta("uid-1", "ns-a", "pod-a", KubeQOS.BESTEFFORT, "", (), {})


def _w(
    env: Env, spec: cg.CgroupFile[Any], value: Any, cgroup_dir: str | None = None, **kw: Any
) -> CgroupWrite:
    d = env.pod_dir if cgroup_dir is None else cgroup_dir
    return CgroupWrite("CPUSuppress", spec, d, value, **kw)


def _quota_text(env: Env, quota: int) -> str:
    if env.v2:
        return f"{'max' if quota == -1 else quota} 100000\n"
    return f"{quota}\n"


def test_write_audits_the_change(env: Env) -> None:
    env.put(cg.CPU_QUOTA, _quota_text(env, -1))
    ex = env.executor()
    [res] = ex.apply([_w(env, cg.CPU_QUOTA, 200000, pod=POD, container_id="c1", cacheable=False)])
    assert res.status is WriteStatus.WRITTEN
    assert res.old == ("max 100000" if env.v2 else "-1") and res.new == "200000"
    assert env.text(cg.CPU_QUOTA) == "200000"
    [line] = env.audit_lines()
    assert line == {
        "time": "2024-01-01T00:00:00+00:00",
        "node": "node-1",
        "pod": "pod-a",
        "namespace": "ns-a",
        "container": "c1",
        "strategy": "CPUSuppress",
        "file": str(env.path(cg.CPU_QUOTA).resolve()),
        "old": res.old,
        "new": "200000",
        "dry_run": False,
    }
    [(strategy, file, seconds, status)] = env.timings
    assert (strategy, status) == ("CPUSuppress", "written") and seconds >= 0
    assert file == ("cpu.max" if env.v2 else "cpu.cfs_quota_us")


def test_equal_value_is_a_noop(env: Env) -> None:
    path = env.put(cg.CPUSET_CPUS, "0,1,2,3\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    limit = env.put(cg.MEMORY_LIMIT, "max\n" if env.v2 else "9223372036854771712\n")
    os.utime(limit, ns=(1_000_000_000, 1_000_000_000))
    ex = env.executor()
    results = ex.apply([_w(env, cg.CPUSET_CPUS, [0, 1, 2, 3]), _w(env, cg.MEMORY_LIMIT, -1, cacheable=False)])
    assert [r.status for r in results] == [WriteStatus.UNCHANGED, WriteStatus.UNCHANGED]
    assert path.stat().st_mtime_ns == limit.stat().st_mtime_ns == 1_000_000_000
    assert env.audit_lines() == []


def test_symlink_escape_is_refused(env: Env, tmp_path: Any) -> None:
    outside = tmp_path / "outside"
    outside.write_text("untouched\n")
    link = env.path(cg.CPU_QUOTA)
    link.symlink_to(outside)
    [res] = env.executor().apply([_w(env, cg.CPU_QUOTA, 200000)])
    assert res.status is WriteStatus.REFUSED and "symbolic link" in res.reason
    assert outside.read_text() == "untouched\n"
    [line] = env.audit_lines()  # refusals are audited (docs/rules/koordlet.md#confinement)
    assert line["refused"] == res.reason and line["file"] == res.path
    # a symlinked cgroup dir pointing outside
    evil_dir = tmp_path / "evil"
    evil_dir.mkdir()
    (evil_dir / link.name).write_text("untouched\n")
    base = link.parent.parent
    (base / "evil").symlink_to(evil_dir)
    [res] = env.executor().apply([_w(env, cg.CPU_QUOTA, 200000, cgroup_dir="kubepods/besteffort/evil/")])
    assert res.status is WriteStatus.REFUSED
    assert (evil_dir / link.name).read_text() == "untouched\n"


def test_dotdot_is_refused(env: Env) -> None:
    for d in ("../../../../etc/", "kubepods/../kubepods/"):
        [res] = env.executor().apply([_w(env, cg.CPU_SHARES, 1024, cgroup_dir=d)])
        assert res.status is WriteStatus.REFUSED, d


def test_dry_run_writes_nothing_but_audits(env: Env) -> None:
    env.put(cg.MEMORY_LIMIT, "max\n" if env.v2 else "9223372036854771712\n")
    [res] = env.executor(dry_run=True).apply([_w(env, cg.MEMORY_LIMIT, 1 << 30)])
    assert res.status is WriteStatus.DRY_RUN
    assert env.text(cg.MEMORY_LIMIT) in ("max", "9223372036854771712")
    [line] = env.audit_lines()
    assert line["dry_run"] is True and line["new"] == str(1 << 30)


def test_vanished_cgroup_is_skipped(env: Env) -> None:
    ex = env.executor()
    [gone] = ex.apply([_w(env, cg.CPU_QUOTA, 200000, cgroup_dir="kubepods/besteffort/podgone/")])
    assert gone.status is WriteStatus.SKIPPED and "vanished" in gone.reason
    [missing] = ex.apply([_w(env, cg.CPU_BURST, 1000)])  # dir exists, file does not
    assert missing.status is WriteStatus.SKIPPED
    assert not env.path(cg.CPU_BURST).exists()  # never created as a regular file
    assert env.audit_lines() == []


def test_empty_cpuset_is_never_written(env: Env) -> None:
    env.put(cg.CPUSET_CPUS, "0-3\n")
    results = env.executor().apply([_w(env, cg.CPUSET_CPUS, []), _w(env, cg.CPUSET_CPUS, "")])
    assert [r.status for r in results] == [WriteStatus.INVALID, WriteStatus.INVALID]
    assert "empty cpuset" in results[0].reason
    assert env.text(cg.CPUSET_CPUS) == "0-3"


def test_version_formatting(env: Env) -> None:
    env.put(cg.CPU_QUOTA, _quota_text(env, 100000))
    env.put(cg.CPU_SHARES, "100\n")
    env.put(cg.MEMORY_LIMIT, "1024\n")
    env.put(cg.CPUSET_CPUS, "0\n")
    ex = env.executor()
    writes = [
        _w(env, cg.CPU_QUOTA, -1),
        _w(env, cg.CPU_SHARES, 1024),
        _w(env, cg.MEMORY_LIMIT, -1),
        _w(env, cg.CPUSET_CPUS, [1, 2, 3, 5]),
    ]
    assert all(r.status is WriteStatus.WRITTEN for r in ex.apply(writes))
    if env.v2:
        assert env.path(cg.CPU_QUOTA).name == "cpu.max" and env.text(cg.CPU_QUOTA) == "max"
        assert env.path(cg.CPU_SHARES).name == "cpu.weight" and env.text(cg.CPU_SHARES) == "39"
        assert env.path(cg.MEMORY_LIMIT).name == "memory.max" and env.text(cg.MEMORY_LIMIT) == "max"
        assert env.path(cg.CPUSET_CPUS).name == "cpuset.cpus"
    else:
        assert env.text(cg.CPU_QUOTA) == "-1" and env.text(cg.CPU_SHARES) == "1024"
        assert env.text(cg.MEMORY_LIMIT) == "-1"
    assert env.text(cg.CPUSET_CPUS) == "1-3,5"


def test_cacheable_write_still_compares_with_the_file(env: Env) -> None:
    # docs/rules/koordlet.md#re-asserting-written-values: the cache never stands in for the file.
    env.put(cg.CPU_SHARES, "2\n")
    ex = env.executor(force_update_seconds=60)
    assert ex.apply([_w(env, cg.CPU_SHARES, 1024)])[0].status is WriteStatus.WRITTEN
    env.advance(10)
    [same] = ex.apply([_w(env, cg.CPU_SHARES, 1024)])
    assert same.status is WriteStatus.CACHED and not same.drift  # fresh cache entry, file agrees
    env.put(cg.CPU_SHARES, "7\n")  # someone else changed it
    env.advance(10)
    [res] = ex.apply([_w(env, cg.CPU_SHARES, 1024)])
    assert res.status is WriteStatus.WRITTEN and res.drift and res.old == "7"
    assert env.text(cg.CPU_SHARES) == ("39" if env.v2 else "1024")
    assert env.drifts == [("CPUSuppress", "cpu.weight" if env.v2 else "cpu.shares")]
    # non-cacheable writes read-compare-write the same way, without the ``cached`` label
    [res] = ex.apply([_w(env, cg.CPU_SHARES, 1024, cacheable=False)])
    assert res.status is WriteStatus.UNCHANGED


def test_cache_entry_freshness_only_labels_the_outcome(env: Env) -> None:
    env.put(cg.CPU_SHARES, "2\n")
    ex = env.executor(force_update_seconds=1000, cache_ttl_seconds=120)
    ex.apply([_w(env, cg.CPU_SHARES, 1024)])
    env.advance(100)
    assert ex.apply([_w(env, cg.CPU_SHARES, 1024)])[0].status is WriteStatus.CACHED
    env.advance(121)  # the entry expired: the same equal file is now plain ``unchanged``
    assert ex.apply([_w(env, cg.CPU_SHARES, 1024)])[0].status is WriteStatus.UNCHANGED
    assert ex.apply([_w(env, cg.CPU_SHARES, 1024)])[0].status is WriteStatus.CACHED


def test_order(env: Env) -> None:
    env.put(cg.CPU_SHARES, "2\n")
    env.put(cg.CPU_BURST, "0\n")
    results = env.executor().apply([_w(env, cg.CPU_BURST, 5, order=2), _w(env, cg.CPU_SHARES, 1024, order=1)])
    assert [r.write.file.name for r in results if r.write] == ["cpu_shares", "cpu_cfs_burst_us"]


def test_leveled_cpuset_widens_parent_first(env: Env) -> None:
    parent, child = "kubepods/besteffort/", env.pod_dir
    env.put(cg.CPUSET_CPUS, "0-1\n", parent)
    env.put(cg.CPUSET_CPUS, "0-1\n", child)
    seen: list[tuple[str, str, str]] = []
    ex = env.executor()
    results = ex.apply_leveled(
        [
            [_w(env, cg.CPUSET_CPUS, [2, 3], cgroup_dir=parent)],
            [_w(env, cg.CPUSET_CPUS, [2, 3], cgroup_dir=child)],
        ]
    )
    for r in results:
        seen.append((r.phase, r.path.split("/kubepods/")[1], r.new or ""))
    assert seen == [
        ("merge", "besteffort/cpuset.cpus", "0-3"),
        ("merge", "besteffort/pod" + "uid-1/cpuset.cpus", "0-3"),
        ("final", "besteffort/pod" + "uid-1/cpuset.cpus", "2-3"),
        ("final", "besteffort/cpuset.cpus", "2-3"),
    ]
    assert all(r.status is WriteStatus.WRITTEN for r in results)
    assert env.text(cg.CPUSET_CPUS, parent) == env.text(cg.CPUSET_CPUS, child) == "2-3"
    assert env.drifts == []
    # narrowing only: no merge phase
    results = ex.apply_leveled([[_w(env, cg.CPUSET_CPUS, [2], cgroup_dir=parent)]])
    assert [r.phase for r in results] == ["final"]


def test_leveled_quota_loosens_only_when_larger(env: Env) -> None:
    parent = "kubepods/besteffort/"
    env.put(cg.CPU_QUOTA, _quota_text(env, 100000), parent)
    ex = env.executor()
    up = ex.apply_leveled([[_w(env, cg.CPU_QUOTA, -1, cgroup_dir=parent)]])
    assert [r.phase for r in up] == ["merge", "final"] and up[1].status is WriteStatus.UNCHANGED
    down = ex.apply_leveled([[_w(env, cg.CPU_QUOTA, 50000, cgroup_dir=parent)]])
    assert [r.phase for r in down] == ["final"]


def test_drift_is_counted_and_reasserted(env: Env) -> None:
    env.put(cg.CPU_SHARES, "2\n")
    ex = env.executor()
    ex.apply([_w(env, cg.CPU_SHARES, 1024, cacheable=False)])
    assert ex.reassert()[0].status is WriteStatus.UNCHANGED and env.drifts == []
    env.put(cg.CPU_SHARES, "5\n")  # e.g. the kubelet
    [res] = ex.reassert()
    assert res.status is WriteStatus.WRITTEN and res.drift and res.old == "5"
    file = "cpu.weight" if env.v2 else "cpu.shares"
    assert env.drifts == [("CPUSuppress", file)]
    env.put(cg.CPU_SHARES, "5\n")
    [res] = ex.apply([_w(env, cg.CPU_SHARES, 1024, cacheable=False)])
    assert res.drift and len(env.drifts) == 2


def test_write_file_under_resctrl_root(env: Env, tmp_path: Any) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    (root / "BE").mkdir(exist_ok=True)
    schemata = root / "BE" / "schemata"
    schemata.write_text("L3:0=fff\n")
    ex = env.executor()
    assert ex.write_file(FileWrite("ResctrlReconcile", schemata, "L3:0=f")).status is WriteStatus.WRITTEN
    assert schemata.read_text() == "L3:0=f"
    outside = tmp_path / "x"
    outside.write_text("1")
    assert ex.write_file(FileWrite("ResctrlReconcile", outside, "2")).status is WriteStatus.REFUSED
    assert outside.read_text() == "1"


def test_make_dir_under_an_allowed_root_is_audited(env: Env, tmp_path: Any) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    ex = env.executor()
    made = ex.make_dir(MakeDir("ResctrlReconcile", root / "LS"))
    assert made.status is WriteStatus.WRITTEN and (root / "LS").is_dir()
    assert (root / "LS").stat().st_mode & 0o777 == 0o755 & ~_umask()
    [line] = env.audit_lines()
    assert (line["file"], line["old"], line["new"], line["dry_run"]) == (
        str(root / "LS"),
        None,
        "mkdir 0755",
        False,
    )
    assert ex.make_dir(MakeDir("ResctrlReconcile", root / "LS")).status is WriteStatus.UNCHANGED
    assert len(env.audit_lines()) == 1
    for bad in (tmp_path / "elsewhere", root / ".." / "escape", root / "LS" / ".."):
        assert ex.make_dir(MakeDir("ResctrlReconcile", bad)).status is WriteStatus.REFUSED
        assert not (tmp_path / "elsewhere").exists() and not (root.parent / "escape").exists()


def test_make_dir_dry_run_audits_and_creates_nothing(env: Env) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    res = env.executor(dry_run=True).make_dir(MakeDir("ResctrlReconcile", root / "LSR"))
    assert res.status is WriteStatus.DRY_RUN and not (root / "LSR").exists()
    [line] = env.audit_lines()
    assert line["dry_run"] is True and line["new"] == "mkdir 0755"


def test_execute_creates_directories_before_writing_into_them(env: Env) -> None:
    root = env.host.write_resctrl({"BE": {"0": (1, 2, 3)}})
    parent = "kubepods/besteffort/"
    env.put(cg.CPU_SHARES, "2\n")
    env.put(cg.CPU_QUOTA, _quota_text(env, 100000), parent)
    group = root / "LS"
    actions = HostActions(
        mkdirs=(MakeDir("ResctrlReconcile", group),),
        leveled_writes=((_w(env, cg.CPU_QUOTA, 50000, cgroup_dir=parent),),),
        cgroup_writes=(_w(env, cg.CPU_SHARES, 1024),),
        resctrl_writes=(FileWrite("ResctrlReconcile", group / "tasks", "42"),),
    )
    assert actions.has_host_actions() and not HostActions().has_host_actions()
    # the fake tree has no kernel to create a group's files: the test does it when the dir appears
    ex = env.executor()
    real_make_dir = ex.make_dir

    def make_dir_with_files(action: MakeDir) -> Any:
        res = real_make_dir(action)
        (action.path / "tasks").write_text("")
        return res

    ex.make_dir = make_dir_with_files  # type: ignore[method-assign]
    results = ex.execute(actions)
    assert [r.path.rsplit("/", 1)[-1] for r in results] == [
        "LS",
        "cpu.max" if env.v2 else "cpu.cfs_quota_us",
        "cpu.weight" if env.v2 else "cpu.shares",
        "tasks",
    ]
    assert all(r.status is WriteStatus.WRITTEN for r in results)
    assert (group / "tasks").read_text() == "42"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_change_that_did_not_happen_is_audited_once_while_it_lasts(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.put(cg.CPU_SHARES, "2\n")
    ex = env.executor()

    def refuse(path: Path, text: str) -> None:
        raise OSError(errno.EINVAL, "Invalid argument", str(path))

    monkeypatch.setattr(ex.fs, "write", refuse)
    for _ in range(3):
        [res] = ex.apply([_w(env, cg.CPU_SHARES, 1024, pod=POD)])
        assert res.status is WriteStatus.FAILED and res.reason == "Invalid argument"
    [line] = env.audit_lines()
    assert line["failed"] == "Invalid argument" and line["old"] == "2" and line["pod"] == "pod-a"
    monkeypatch.undo()
    assert ex.apply([_w(env, cg.CPU_SHARES, 1024)])[0].status is WriteStatus.WRITTEN
    monkeypatch.setattr(ex.fs, "write", refuse)
    env.put(cg.CPU_SHARES, "2\n")
    ex.apply([_w(env, cg.CPU_SHARES, 1024)])  # failing again after a success: audited again
    assert [
        sorted(k for k in line if k in ("failed", "refused", "skipped")) for line in env.audit_lines()
    ] == [
        ["failed"],
        [],
        ["failed"],
    ]


# A kernel file that cannot be read (as cgroup v1 devices.allow / devices.deny): written blind.
WRITE_ONLY: cg.CgroupFile[str] = cg.CgroupFile(
    "write_only", "cpu", "test.write_only", None, "test.write_only", None, v1_format=str, v2_format=str,
    write_only=True,
)  # fmt: skip


def test_a_write_only_file_is_written_every_time_never_read(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    env.put(WRITE_ONLY, "")
    ex = env.executor()

    def unreadable(path: Path) -> str:
        raise OSError(errno.EINVAL, "Invalid argument", str(path))

    monkeypatch.setattr(ex.fs, "read", unreadable)
    for rule in ("c 195:0 rwm", "c 195:0 rwm", "c 195:1 rwm"):
        [res] = ex.apply([_w(env, WRITE_ONLY, rule, pod=POD, container_id="c1")])
        assert (res.status, res.old, res.new, res.drift) == (WriteStatus.WRITTEN, None, rule, False)
        assert env.text(WRITE_ONLY) == rule
    lines = env.audit_lines()
    assert [(line["old"], line["new"], line["dry_run"], line["pod"]) for line in lines] == [
        (None, "c 195:0 rwm", False, "pod-a"),
        (None, "c 195:0 rwm", False, "pod-a"),
        (None, "c 195:1 rwm", False, "pod-a"),
    ]
    assert lines[0]["file"] == str(env.path(WRITE_ONLY).resolve())
    assert [t[3] for t in env.timings] == ["written"] * 3
    assert ex.reassert() == [] and env.drifts == []  # no memory: nothing to re-assert, no drift


def test_a_write_only_file_honours_dry_run_and_vanishing(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.put(WRITE_ONLY, "before")
    ex = env.executor(dry_run=True)
    monkeypatch.setattr(ex.fs, "read", lambda path: pytest.fail(f"read {path}"))
    [res] = ex.apply([_w(env, WRITE_ONLY, "c 195:0 rwm")])
    assert res.status is WriteStatus.DRY_RUN and env.text(WRITE_ONLY) == "before"
    [line] = env.audit_lines()
    assert (line["old"], line["new"], line["dry_run"]) == (None, "c 195:0 rwm", True)
    # A vanished cgroup: skipped, audited once as a change that did not happen; never created.
    live = env.executor()
    gone = "kubepods/besteffort/podgone/"
    for _ in range(2):
        [res] = live.apply([_w(env, WRITE_ONLY, "c 195:0 rwm", cgroup_dir=gone)])
        assert res.status is WriteStatus.SKIPPED and "vanished" in res.reason
    assert not env.path(WRITE_ONLY, gone).exists()
    assert [line.get("skipped") for line in env.audit_lines()] == [
        None,
        "vanished: No such file or directory",
    ]
