"""The scheduler's lock, with a mailbox for the informers (docs/architecture.md#informer-mailbox).

A re-entrant lock like ``threading.RLock``, plus ``post(fn, *args)``: work that needs the lock, handed
over by a thread that must not wait for it (an informer). Posted work runs in posting order, under the
lock, on whichever thread takes the lock next from outside (the scheduling thread, at the start of its
next cycle) or, when the lock is free, at once on the posting thread. So a busy scheduling loop
applies the events of a whole cycle in one batch between cycles instead of making the informer wait for
its turn — an RLock is not fair: a loop that releases and takes it again at once starves every waiter,
and an informer that waits falls behind the API server. ``post`` never blocks, so a thread holding
another lock (the NodeMetric merger's, say) can post without a lock-order deadlock.

Each taker runs one batch, the items posted when it took the lock, so the scheduling loop alternates
a cycle and the events that came during the previous one, however fast they come (events must cost
less than their share of a CPU, or neither keeps up). An item posted while a batch runs waits for the
next taker: the scheduling loop calls ``flush`` on every turn, idle or not, so nothing waits longer
than its pop timeout.
Imports: the standard library.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = ["EventLock"]

log = logging.getLogger(__name__)


class EventLock:
    """``with lock:`` as with an RLock; ``post(fn, *args)`` from any thread (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # the owner's nesting; only the owner reads or writes it
        self._posted: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.applied = 0  # posted items run so far (benchmarks, tests)

    # --- the lock -------------------------------------------------------------------------------------
    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1 and self._posted:
            self._run_posted()
        return True

    def release(self) -> None:
        self._depth -= 1
        outermost = self._depth == 0
        self._lock.release()
        # What was posted while we held the lock (its poster could not take it) runs now, unless
        # another thread has taken the lock meanwhile (it ran them as it took it). One batch only:
        # what is posted while it runs waits for the next taker or `flush`, so a flood of events
        # cannot keep the releasing thread (the scheduling loop) from its next cycle.
        if outermost and self._posted and self._lock.acquire(blocking=False):
            self._depth = 1
            try:
                self._run_posted()
            finally:
                self._depth = 0
                self._lock.release()

    def flush(self) -> None:
        """Runs what is posted now (taking the lock; a no-op when nothing is)."""
        if self._posted:
            with self:
                pass

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    # --- the mailbox ----------------------------------------------------------------------------------
    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Runs ``fn(*args)`` under the lock: now if it is free, else when its holder lets it go. Called
        by a thread that holds the lock already, it runs after that thread's outermost release."""
        self._posted.append((fn, args))
        if self.acquire(blocking=False):
            self.release()

    def pending(self) -> int:
        """Items posted and not yet run."""
        return len(self._posted)

    def _run_posted(self) -> None:
        # Under the lock at depth 1: a handler's own `with lock` nests (depth 2) and runs nothing, so
        # items never interleave. The items there now, not those posted meanwhile: each taker of the
        # lock runs one batch, so cycles and batches alternate however fast events come.
        for _ in range(len(self._posted)):
            fn, args = self._posted.popleft()
            try:
                fn(*args)
            except Exception:
                log.exception("posted %s failed", getattr(fn, "__qualname__", fn))
            self.applied += 1


def posting(lock: EventLock, handlers: dict[str, Any]) -> dict[str, Any]:
    """Informer handlers that post each call to ``lock`` instead of running it on the informer's
    thread (``None`` handlers stay ``None``)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., None]:
        def posted(*args: Any) -> None:
            lock.post(fn, *args)

        posted.__name__ = getattr(fn, "__name__", "handler")
        return posted

    return {k: (wrap(v) if callable(v) else v) for k, v in handlers.items()}
