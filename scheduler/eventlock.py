"""The scheduler's lock, with a mailbox for the informers (docs/architecture.md#informer-mailbox).

A re-entrant lock like ``threading.RLock``, plus ``post(fn, *args)``: work that needs the lock, handed
over by a thread that must not wait for it (an informer). Posted work runs in posting order, under the
lock, on whichever thread takes the lock next from outside (the scheduling thread, at the start of its
next cycle) or, when the lock is free, at once on the posting thread. So a busy scheduling loop
applies the events of a whole cycle in one batch between cycles instead of making the informer wait for
its turn — an RLock is not fair: a loop that releases and takes it again at once starves every waiter,
and an informer that waits falls behind the API server. ``post`` never blocks, so a thread holding
another lock (the NodeMetric merger's, say) can post without a lock-order deadlock.

Unlike an RLock it is fair to the threads that do wait for it (a membership change, a controller's
round, a failed bind's rollback): they are served first come, first served, so the scheduling loop
cannot take it back ahead of them cycle after cycle.

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


_FAILED, _OUTER, _NESTED = 0, 1, 2


class EventLock:
    """``with lock:`` as with an RLock, but fair; ``post(fn, *args)`` from any thread (see the module)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()  # guards the fields below; held for a few instructions only
        self._turn = threading.Condition(self._mutex)
        self._owner: int | None = None
        self._depth = 0
        self._tickets = 0  # tickets handed to blocked takers so far
        self._serving = 0  # the ticket whose turn is next; == _tickets: nobody waits
        self._abandoned: set[int] = set()  # tickets whose takers gave up (interrupted)
        self._posted: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self.applied = 0  # posted items run so far (benchmarks, tests)

    # --- the lock -------------------------------------------------------------------------------------
    def _take(self, blocking: bool) -> int:
        me = threading.get_ident()
        with self._mutex:
            if self._owner == me:
                self._depth += 1
                return _NESTED
            if self._owner is None and self._serving == self._tickets:  # free, and nobody waits
                self._owner, self._depth = me, 1
                return _OUTER
            if not blocking:
                return _FAILED
            # First come, first served: a thread that lets the lock go and takes it again at once (the
            # scheduling loop) queues behind those already waiting instead of barging past them.
            ticket = self._tickets
            self._tickets += 1
            try:
                while self._owner is not None or self._serving != ticket:
                    self._turn.wait()
            except BaseException:
                self._abandoned.add(ticket)
                self._skip_abandoned()
                self._turn.notify_all()
                raise
            self._serving += 1
            self._skip_abandoned()
            self._owner, self._depth = me, 1
            return _OUTER

    def _skip_abandoned(self) -> None:
        while self._serving in self._abandoned:
            self._abandoned.discard(self._serving)
            self._serving += 1

    def _give(self) -> bool:
        """Lets one level go; True when that was the outermost."""
        with self._mutex:
            if self._owner != threading.get_ident():
                raise RuntimeError("EventLock released by a thread that does not hold it")
            self._depth -= 1
            if self._depth:
                return False
            self._owner = None
            if self._serving != self._tickets:
                self._turn.notify_all()
            return True

    def acquire(self, blocking: bool = True) -> bool:
        taken = self._take(blocking)
        if taken == _OUTER and self._posted:
            self._run_posted()
        return taken != _FAILED

    def release(self) -> None:
        # What was posted while we held the lock (its poster could not take it) runs now, unless
        # another thread has the lock or waits for it (it runs them as it takes it). One batch only:
        # what is posted while it runs waits for the next taker or `flush`, so a flood of events
        # cannot keep the releasing thread (the scheduling loop) from its next cycle.
        if self._give() and self._posted and self._take(False) == _OUTER:
            try:
                self._run_posted()
            finally:
                self._give()

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
        if self.acquire(blocking=False):  # free and nobody waiting: run it (and what else waits) now
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
