"""Process helpers shared by the local control plane, the local node and the host-state recorder:
liveness (a zombie counts as dead) and spawning a component with its output appended to a log file in
its own session (so a Ctrl-C to `koord up` does not hit it before we stop it in order).

Imports: standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["alive", "spawn_logged", "stop_pid", "stop_process"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours is dead for our purpose (its parent reaps it).
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


_PR_SET_PDEATHSIG = 1
try:  # loaded up front: the child of a threaded parent must not import or allocate between fork and exec
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - not glibc/musl
    _LIBC = None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """PR_SET_PDEATHSIG(SIGTERM): the child is told to stop when the process that started it dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def spawn_logged(log_path: Path, argv: list[str], die_with_parent: bool = False) -> subprocess.Popen[bytes]:
    """Starts argv in its own session, output appended to log_path. ``die_with_parent``: SIGTERM the
    child when its parent dies, so a `koord up` killed with SIGKILL leaves no daemon of its own behind."""
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if die_with_parent else None,  # prctl only: no lock, no import
        )


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group led by pid, wait, then SIGKILL it."""
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    return
            if not alive(pid):
                # It may have exited since the waitpid above: reap it if it is our own child.
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                return
            time.sleep(0.05)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """stop_pid for a process we started, then its exit recorded in the handle: a handle dropped
    without it reports the process as still running (a ResourceWarning)."""
    stop_pid(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
