"""Stopping the threads a test started: every stop event set first, so they wind down side by side, then
each thread joined with a bound (the leak check names any still running).

Imports: standard library only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

__all__ = ["Stoppable", "stop_and_join"]


class Stoppable(Protocol):
    """A test's worker: a thread that ends once ``stop`` is set."""

    @property
    def stop(self) -> threading.Event: ...

    @property
    def thread(self) -> threading.Thread: ...


def stop_and_join(workers: Iterable[Stoppable], timeout: float = 5.0) -> list[str]:
    """Set every worker's ``stop``, then join each thread started for up to ``timeout`` seconds; the names
    of the threads still running."""
    workers = list(workers)
    for w in workers:
        w.stop.set()
    for w in workers:
        if w.thread.ident is not None:
            w.thread.join(timeout)
    return [w.thread.name for w in workers if w.thread.is_alive()]
