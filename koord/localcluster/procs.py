"""Process helpers shared by the local control plane, the local node and the host-state recorder:
liveness (a zombie counts as dead) and spawning a component with its output appended to a log file in
its own session (so a Ctrl-C to `koord up` does not hit it before we stop it in order).

Imports: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

__all__ = ["alive", "spawn_logged"]


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


def spawn_logged(log_path: Path, argv: list[str]) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
