"""A discrete-event ``Clock`` for the QoS loop tests: virtual time only moves inside ``wait``, which runs
the callbacks scheduled up to its deadline (a kick, a collection round, the stop) in time order and
returns as soon as its event is set. A loop driven by it runs in the test's own thread, never sleeps,
and every tick lands at an exact virtual time."""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]

EPOCH = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self, start: datetime = EPOCH, horizon: float = 3600.0) -> None:
        self.start = start
        self.horizon = horizon
        """A wait past this virtual time fails the test (a loop whose stop was never scheduled)."""
        self.t = 0.0
        """Virtual seconds since ``start`` (the ``monotonic`` reading)."""
        self._events: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    def monotonic(self) -> float:
        return self.t

    def at(self, t: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` when a ``wait`` reaches virtual time ``t``."""
        heapq.heappush(self._events, (t, next(self._seq), callback))

    def wait(self, event: threading.Event, timeout: float) -> bool:
        deadline = self.t + max(timeout, 0.0)
        if deadline > self.horizon:
            raise AssertionError(f"waited past the horizon ({self.horizon} s): no stop scheduled?")
        while not event.is_set():
            if not self._events or self._events[0][0] > deadline:
                self.t = deadline
                break
            t, _, callback = heapq.heappop(self._events)
            self.t = max(self.t, t)
            callback()
        return event.is_set()
