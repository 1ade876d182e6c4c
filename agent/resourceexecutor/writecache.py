"""The resource executor's write cache (docs/rules/koordlet.md#re-asserting-written-values): per file
(key = its resolved path) the value last written there and when. It never stands in for the file: the
executor still reads the file and only names an equal value ``cached`` while the entry is fresher than
``force_update_seconds``; entries expire after ``ttl_seconds``, swept at most once a second.

Imports: standard library only.
"""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["WriteCache"]

_SWEEP_INTERVAL = timedelta(seconds=1)


class WriteCache:
    """See the module docstring. Not locked: the executor calls it under its own lock."""

    def __init__(self, force_update_seconds: float, ttl_seconds: float) -> None:
        self.force_update_seconds = force_update_seconds
        self.ttl_seconds = ttl_seconds
        self._entries: dict[str, tuple[str, datetime]] = {}
        self._expired_at: datetime | None = None  # the last sweep

    def fresh(self, key: str, now: datetime) -> str | None:
        """The value written at ``key`` when that was less than ``force_update_seconds`` before ``now``."""
        entry = self._entries.get(key)
        if entry is None or (now - entry[1]).total_seconds() >= self.force_update_seconds:
            return None
        return entry[0]

    def put(self, key: str, text: str, now: datetime) -> None:
        self._entries[key] = (text, now)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)

    def expire(self, now: datetime) -> None:
        """Drop entries older than ``ttl_seconds``; a sweep a second at most, not one per write."""
        if self._expired_at is not None and timedelta(0) <= now - self._expired_at < _SWEEP_INTERVAL:
            return
        self._expired_at = now
        stale = [k for k, (_, t) in self._entries.items() if (now - t).total_seconds() >= self.ttl_seconds]
        for k in stale:
            del self._entries[k]
