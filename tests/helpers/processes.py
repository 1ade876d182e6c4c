"""Stopping the daemons a test started as child processes: SIGTERM (their graceful stop), a bounded wait,
then SIGKILL; always reaped, their pipes drained and closed, so nothing is left for the leak check.

Imports: standard library only.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterable
from typing import Any

__all__ = ["stop_all", "stop_daemon"]


def stop_all(procs: Iterable[subprocess.Popen[Any]], timeout: float) -> list[int]:
    """SIGTERM every process still running (all first, so they stop side by side), then give each up to
    ``timeout`` seconds to exit, SIGKILL it past that; the exit codes in order (−9 for a killed one)."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.communicate(timeout=timeout)  # drains and closes any pipe: a full one would block the exit
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
    return [p.returncode for p in procs]


def stop_daemon(proc: subprocess.Popen[Any], timeout: float) -> int:
    """``stop_all`` of one process: its exit code."""
    return stop_all([proc], timeout)[0]
