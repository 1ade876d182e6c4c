"""koord.localcluster.procs: spawn_logged's die-with-parent (setpriv, and the Python trampoline where setpriv
is unusable) without a preexec_fn: a child dies when its intermediate parent is SIGKILLed, keeps its own
session and log, and a parent already gone before the prctl makes the child exit instead of run on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from koord.localcluster import procs
from koord.localcluster.procs import alive, die_with_parent_argv, spawn_logged, stop_process
from tests.helpers.polling import eventually

# The intermediate parent: spawns a sleeper (die_with_parent per argv[2]), prints its PID, then waits to be
# killed. argv[1] = "trampoline" makes setpriv unusable, as on a host without it.
_PARENT = """
import subprocess, sys, threading, time
from pathlib import Path
from koord.localcluster import procs
if sys.argv[1] == "trampoline":
    procs._setpriv_prefix = lambda: None
threading.Thread(target=time.sleep, args=(600,), daemon=True).start()  # a parent with threads, like grpc's
child = procs.spawn_logged(Path(sys.argv[3]), ["sleep", "600"], die_with_parent=sys.argv[2] == "1")
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["setpriv", "trampoline"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "setpriv":
        assert procs._setpriv_prefix() is not None, "setpriv --pdeathsig should work on this image"
    else:
        monkeypatch.setattr(procs, "_setpriv_prefix", lambda: None)
    yield request.param


def _wait_dead(pid: int, timeout: float) -> bool:
    return eventually(lambda: not alive(pid), timeout, 0.05)


def _orphan_after_parent_killed(mode: str, die_with_parent: bool, tmp_path: Path) -> int:
    """Starts the intermediate parent, reads its child's PID, SIGKILLs and reaps the parent."""
    log = tmp_path / "child.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, mode, "1" if die_with_parent else "0", str(log)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line, "the intermediate parent printed no PID"
        pid = int(line)
        assert os.getsid(pid) == pid  # start_new_session kept
        time.sleep(0.3)  # past the wrapper: the sleeper itself runs
        assert alive(pid)
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep")
    finally:
        parent.kill()
        parent.wait(timeout=10)
        assert parent.stdout is not None
        parent.stdout.close()
    return pid


def test_child_dies_when_parent_is_sigkilled(mode: str, tmp_path: Path) -> None:
    pid = _orphan_after_parent_killed(mode, True, tmp_path)
    assert _wait_dead(pid, 10.0), f"child {pid} outlived its SIGKILLed parent"


def test_without_die_with_parent_the_child_outlives_it(tmp_path: Path) -> None:
    """The control: the same child, not asked to die with its parent, runs on (then we stop it)."""
    pid = _orphan_after_parent_killed("setpriv", False, tmp_path)
    try:
        assert not _wait_dead(pid, 1.0)
    finally:
        os.killpg(pid, signal.SIGKILL)
    assert _wait_dead(pid, 10.0)


def test_spawn_logged_output_exit_code_and_pid(mode: str, tmp_path: Path) -> None:
    """The wrapper execs argv: the handle's PID, exit code and log are the program's own."""
    log = tmp_path / "out.log"
    log.write_bytes(b"before\n")
    proc = spawn_logged(log, ["sh", "-c", 'echo "pid $$ ppid $PPID"; exit 7'], die_with_parent=True)
    assert proc.wait(timeout=10) == 7
    assert log.read_text() == f"before\npid {proc.pid} ppid {os.getpid()}\n"


def test_missing_program_raises_in_the_caller(mode: str, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-program-koord"):
        spawn_logged(tmp_path / "x.log", ["no-such-program-koord"], die_with_parent=True)


def test_parent_gone_before_prctl_child_exits(mode: str) -> None:
    """The wrapper is told another parent PID, as if its parent had died before the prctl: it exits 125
    instead of running the program."""
    argv = die_with_parent_argv(["sh", "-c", "exit 0"])
    parent = str(os.getpid())
    assert argv.count(parent) == 1
    argv[argv.index(parent)] = "1"
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
    assert done.returncode == 125, done.stderr


def test_stop_process_stops_a_wrapped_child(mode: str, tmp_path: Path) -> None:
    proc = spawn_logged(tmp_path / "s.log", ["sleep", "600"], die_with_parent=True)
    time.sleep(0.2)
    t0 = time.monotonic()
    stop_process(proc)
    assert proc.returncode is not None and not alive(proc.pid)
    assert time.monotonic() - t0 < 5.0  # SIGTERM reached the program itself (no SIGKILL escalation)


def test_no_preexec_fn(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing runs in the child between fork and exec (so CPython may vfork)."""
    seen: list[object] = []
    real = subprocess.Popen

    def popen(*args: object, **kw: object) -> subprocess.Popen[bytes]:
        seen.append(kw.get("preexec_fn"))
        return real(*args, **kw)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(subprocess, "Popen", popen)
    proc = spawn_logged(tmp_path / "p.log", ["true"], die_with_parent=True)
    assert proc.wait(timeout=10) == 0
    assert seen == [None]
