"""The koordlet's supervised threads: each loop runs in its own thread and is restarted with a capped
backoff when it raises, so one bad tick never takes the agent down; repeated crashes fail ``/healthz``
so the kubelet restarts the pod instead of leaving a half-working agent. The machinery is the shared
kube.supervise; this module holds the agent's numbers. Imports: the standard library, kube.supervise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kube import supervise

__all__ = ["Supervisor"]

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
# More crashes than this within the window make the agent unhealthy.
CRASH_LIMIT = supervise.CRASH_LIMIT
CRASH_WINDOW_SECONDS = supervise.CRASH_WINDOW_SECONDS


class Supervisor(supervise.Supervisor):
    def __init__(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(
            stop, clock, backoff_initial=BACKOFF_INITIAL, backoff_max=BACKOFF_MAX,
            crash_limit=CRASH_LIMIT, crash_window=CRASH_WINDOW_SECONDS,
        )  # fmt: skip
