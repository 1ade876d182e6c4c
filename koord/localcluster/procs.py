"""Process helpers shared by the local control plane, the local node and the host-state recorder:
liveness (a zombie counts as dead) and spawning a component with its output appended to a log file in
its own session (so a Ctrl-C to `koord up` does not hit it before we stop it in order), optionally made to
die with its parent without a preexec_fn (docs/install.md#trying-it-locally-koord-up).

Imports: standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["alive", "die_with_parent_argv", "spawn_logged", "stop_pid", "stop_process"]

log = logging.getLogger(__name__)


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


# A child that dies with its parent: PR_SET_PDEATHSIG(SIGTERM), set in the child after its exec, never in a
# preexec_fn (Python code between fork and exec in a process with threads, gRPC's among them, can deadlock
# on a lock some other thread held at the fork). Set by util-linux's setpriv (Essential on Debian, so on
# this image and CI's), or where it is missing or too old (no --pdeathsig before 2.33) by a Python
# trampoline on this interpreter. Either way a check follows: if the parent died before the prctl (the
# child then has another parent and no signal will come), the child exits instead of running on; then the
# wrapper execs argv, so the process keeps its PID. The parent is the thread that called spawn_logged (a
# kernel rule): spawn from a thread that lives as long as the child should.
_PARENT_CHECK = 'p=$1; shift; [ "$PPID" = "$p" ] || exit 125; exec "$@"'
_TRAMPOLINE = (
    "import ctypes, os, signal, sys\n"
    "if ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0) != 0:\n"
    "    sys.exit(f'PR_SET_PDEATHSIG: {os.strerror(ctypes.get_errno())}')\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(125)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


@functools.cache
def _setpriv_prefix() -> tuple[str, ...] | None:
    """``setpriv --pdeathsig TERM -- sh -c CHECK sh``, once it has been seen to work; None otherwise."""
    setpriv, sh = shutil.which("setpriv"), shutil.which("sh")
    if setpriv is None or sh is None:
        log.warning("setpriv or sh not found: children die with their parent through a Python trampoline")
        return None
    prefix = (setpriv, "--pdeathsig", "TERM", "--", sh, "-c", _PARENT_CHECK, "sh")
    try:
        probe = subprocess.run(
            [*prefix, str(os.getpid()), sh, "-c", ":"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        err = str(exc)
    else:
        if probe.returncode == 0:
            return prefix
        err = probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
    log.warning(
        "%s --pdeathsig fails (%s): children die with their parent through a Python trampoline", setpriv, err
    )
    return None


def die_with_parent_argv(argv: list[str]) -> list[str]:
    """argv wrapped so that the process gets SIGTERM when its parent (this thread) dies; argv[0] is
    resolved on PATH here, so a missing program raises FileNotFoundError in the caller as Popen does."""
    exe = shutil.which(argv[0])
    if exe is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    parent = str(os.getpid())
    prefix = _setpriv_prefix()
    if prefix is None:
        return [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, parent, exe, *argv[1:]]
    return [*prefix, parent, exe, *argv[1:]]


def spawn_logged(
    log_path: Path, argv: list[str], die_with_parent: bool = False, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Starts argv in its own session, output appended to log_path. ``die_with_parent``: SIGTERM the
    child when its parent dies, so a `koord up` killed with SIGKILL leaves no daemon of its own behind
    (no preexec_fn: the fork stays free of Python code). ``env``: variables set over this process's."""
    if die_with_parent:
        argv = die_with_parent_argv(argv)
    with log_path.open("ab") as log_file:
        return subprocess.Popen(
            argv,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
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
