"""Supervised threads: each loop runs in its own thread and is restarted with a capped backoff when it
raises, so one bad tick never takes the agent down; repeated crashes fail ``/healthz`` so the kubelet
restarts the pod instead of leaving a half-working agent. Imports: standard library only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Supervisor"]

log = logging.getLogger(__name__)

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
# More crashes than this within the window make the agent unhealthy.
CRASH_LIMIT = 5
CRASH_WINDOW_SECONDS = 300.0


@dataclass
class _Task:
    name: str
    target: Callable[[threading.Event], None]
    thread: threading.Thread | None = None
    crashes: list[float] = field(default_factory=list)
    last_error: str = ""
    finished: bool = False


class Supervisor:
    def __init__(self, stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        self.stop = stop
        self._clock = clock
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()

    def spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        """Run ``target(stop)`` in a thread until it returns normally or ``stop`` is set."""
        task = _Task(name, target)
        with self._lock:
            if name in self._tasks:
                raise ValueError(f"supervisor: task {name!r} already exists")
            self._tasks[name] = task
        task.thread = threading.Thread(target=self._run, args=(task,), name=name, daemon=True)
        task.thread.start()

    def _run(self, task: _Task) -> None:
        backoff = BACKOFF_INITIAL
        while not self.stop.is_set():
            try:
                task.target(self.stop)
                task.finished = True
                return
            except Exception as e:
                now = self._clock()
                with self._lock:
                    task.crashes = [t for t in task.crashes if now - t < CRASH_WINDOW_SECONDS] + [now]
                    task.last_error = f"{type(e).__name__}: {e}"
                log.exception("%s crashed (restart in %.0fs)", task.name, backoff)
                if self.stop.wait(backoff):
                    return
                backoff = min(backoff * 2, BACKOFF_MAX)

    def healthy(self) -> tuple[bool, str]:
        """Unhealthy when a task crashed more than CRASH_LIMIT times in the window or its thread died."""
        now = self._clock()
        problems: list[str] = []
        with self._lock:
            tasks = list(self._tasks.values())
        for task in tasks:
            recent = [t for t in task.crashes if now - t < CRASH_WINDOW_SECONDS]
            if len(recent) > CRASH_LIMIT:
                problems.append(
                    f"{task.name} crashed {len(recent)} times in {CRASH_WINDOW_SECONDS:.0f}s: "
                    f"{task.last_error}"
                )
            elif (
                task.thread is not None
                and not task.thread.is_alive()
                and not task.finished
                and not self.stop.is_set()
            ):
                problems.append(f"{task.name} thread is dead")
        return (not problems), ("; ".join(problems) or f"{len(tasks)} tasks running")

    def join(self, timeout: float) -> list[str]:
        """Wait for every thread (after ``stop`` was set); returns the names still running."""
        deadline = self._clock() + timeout
        with self._lock:
            tasks = list(self._tasks.values())
        for task in tasks:
            if task.thread is not None:
                task.thread.join(max(0.0, deadline - self._clock()))
        return [t.name for t in tasks if t.thread is not None and t.thread.is_alive()]
