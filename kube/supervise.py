"""Supervised threads for every daemon: a long-lived loop runs in its own thread and, when it raises,
is logged, counted and restarted after a capped exponential backoff, until its stop event is set, so
one bad input never leaves a daemon running without the loop (docs/architecture.md#supervised-threads).

`supervise(name, target, stop)` starts one such thread; `Supervisor` keeps a named set of them and
says whether they are healthy (a thread that crashed more than `crash_limit` times within
`crash_window` seconds, or died of a BaseException, is not), for a `/healthz` check. A target is
`target(stop)`: it returns when it is done (the thread then ends) and should return soon after `stop`
is set. The backoff starts again from its initial value after a run that lasted longer than the cap.
Imports: the standard library only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "BACKOFF_INITIAL", "BACKOFF_MAX", "CrashHook", "SupervisedThread", "Supervisor", "restart_delay",
    "supervise",
]  # fmt: skip

log = logging.getLogger(__name__)

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 30.0
CRASH_LIMIT = 5
CRASH_WINDOW_SECONDS = 300.0

Target = Callable[[threading.Event], None]
# on_crash(thread name, the exception): called after each crash, before the backoff (e.g. a counter).
CrashHook = Callable[[str, BaseException], None]


def restart_delay(backoff: float, ran: float, initial: float, cap: float) -> float:
    """How long to wait before restarting a target that crashed after running `ran` seconds, the
    backoff having reached `backoff`: the initial delay again after a run longer than the cap (it
    worked for a while: not a crash loop), else the backoff."""
    return initial if ran > cap else backoff


@dataclass
class SupervisedThread:
    """One supervised loop (see the module docstring); `start()` runs it."""

    name: str
    target: Target
    stop: threading.Event
    backoff_initial: float = BACKOFF_INITIAL
    backoff_max: float = BACKOFF_MAX
    on_crash: CrashHook | None = None
    clock: Callable[[], float] = time.monotonic
    crash_window: float = CRASH_WINDOW_SECONDS
    thread: threading.Thread | None = None
    crashes: list[float] = field(default_factory=list)
    restarts: int = 0
    last_error: str = ""
    finished: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> SupervisedThread:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        backoff = self.backoff_initial
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                self.target(self.stop)
                self.finished = True
                return
            except Exception as e:
                ran = time.monotonic() - began
                wait = restart_delay(backoff, ran, self.backoff_initial, self.backoff_max)
                self._crashed(e, wait)
                if self.stop.wait(wait):
                    return
                self.restarts += 1
                backoff = min(wait * 2, self.backoff_max)

    def _crashed(self, e: Exception, backoff: float) -> None:
        now = self.clock()
        with self._lock:
            self.crashes = [t for t in self.crashes if now - t < self.crash_window] + [now]
            self.last_error = f"{type(e).__name__}: {e}"
        log.error("%s crashed (restart in %.1fs)", self.name, backoff, exc_info=e)
        if self.on_crash is not None:
            try:
                self.on_crash(self.name, e)
            except Exception:  # a broken hook must not end the supervision
                log.exception("%s: crash hook failed", self.name)

    def problem(self, crash_limit: int = CRASH_LIMIT) -> str | None:
        """Why this thread is unhealthy, or None when it is not."""
        now = self.clock()
        window = self.crash_window
        with self._lock:
            recent = [t for t in self.crashes if now - t < window]
            last = self.last_error
        if len(recent) > crash_limit:
            return f"{self.name} crashed {len(recent)} times in {window:.0f}s: {last}"
        alive = self.thread is not None and self.thread.is_alive()
        if self.thread is not None and not alive and not self.finished and not self.stop.is_set():
            return f"{self.name} thread is dead"
        return None

    def join(self, timeout: float | None = None) -> bool:
        """Waits for the thread to end; True when it has."""
        if self.thread is None:
            return True
        self.thread.join(timeout)
        return not self.thread.is_alive()


def supervise(
    name: str,
    target: Target,
    stop: threading.Event,
    *,
    backoff_initial: float = BACKOFF_INITIAL,
    backoff_max: float = BACKOFF_MAX,
    on_crash: CrashHook | None = None,
) -> SupervisedThread:
    """Starts `target(stop)` in a supervised thread named `name` and returns it."""
    return SupervisedThread(
        name, target, stop, backoff_initial=backoff_initial, backoff_max=backoff_max, on_crash=on_crash
    ).start()


class Supervisor:
    """A named set of supervised threads sharing one stop event (a daemon's long-lived loops)."""

    def __init__(
        self,
        stop: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        *,
        backoff_initial: float = BACKOFF_INITIAL,
        backoff_max: float = BACKOFF_MAX,
        crash_limit: int = CRASH_LIMIT,
        crash_window: float = CRASH_WINDOW_SECONDS,
        on_crash: CrashHook | None = None,
    ) -> None:
        self.stop = stop
        self._clock = clock
        self._backoff = (backoff_initial, backoff_max)
        self._limits = (crash_limit, crash_window)
        self._on_crash = on_crash
        self._tasks: dict[str, SupervisedThread] = {}
        self._lock = threading.Lock()

    def spawn(self, name: str, target: Target) -> SupervisedThread:
        """Runs ``target(stop)`` in a supervised thread until it returns normally or ``stop`` is set."""
        task = SupervisedThread(
            name, target, self.stop, backoff_initial=self._backoff[0], backoff_max=self._backoff[1],
            on_crash=self._on_crash, clock=self._clock, crash_window=self._limits[1],
        )  # fmt: skip
        with self._lock:
            if name in self._tasks:
                raise ValueError(f"supervisor: task {name!r} already exists")
            self._tasks[name] = task
        return task.start()

    def tasks(self) -> list[SupervisedThread]:
        with self._lock:
            return list(self._tasks.values())

    def healthy(self) -> tuple[bool, str]:
        """Unhealthy when a task crashed more than the crash limit within the window or its thread died."""
        tasks = self.tasks()
        problems = [p for t in tasks if (p := t.problem(self._limits[0])) is not None]
        return (not problems), ("; ".join(problems) or f"{len(tasks)} tasks running")

    def join(self, timeout: float) -> list[str]:
        """Waits for every thread (after ``stop`` was set); returns the names still running."""
        deadline = time.monotonic() + timeout
        tasks = self.tasks()
        for task in tasks:
            task.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in tasks if not t.join(0)]
