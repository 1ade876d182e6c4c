"""The hub's state: the latest report of every node, a revision counter and a bounded history of
changes for watchers that resume from a revision. Thread-safe; knows only the protobuf messages
(reports are stored and forwarded as received, never re-encoded).

Imports: standard library and proto.koord.v1.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterator

from proto.koord.v1 import metrichub_pb2 as pb

DEFAULT_HISTORY = 65536


class RevisionTooOldError(LookupError):
    """A watcher asked to resume from a revision the bounded history no longer holds."""


class HubStore:
    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self._items: dict[str, pb.NodeMetricItem] = {}
        self._history: deque[pb.NodeMetricEvent] = deque(maxlen=history)
        self._revision = 0
        self._cond = threading.Condition()

    @property
    def revision(self) -> int:
        with self._cond:
            return self._revision

    def put(self, report: pb.NodeMetricReport, now: float | None = None) -> int:
        """Stores report as its node's latest entry; returns the new revision."""
        if not report.node_name:
            raise ValueError("report.node_name is empty")
        item = pb.NodeMetricItem(report=report)
        item.received_time.FromNanoseconds(int((time.time() if now is None else now) * 1e9))
        with self._cond:
            self._revision += 1
            item.revision = self._revision
            kind = pb.EVENT_TYPE_MODIFIED if report.node_name in self._items else pb.EVENT_TYPE_ADDED
            self._items[report.node_name] = item
            self._history.append(pb.NodeMetricEvent(type=kind, revision=self._revision, item=item))
            self._cond.notify_all()
            return self._revision

    def delete(self, node_name: str) -> int | None:
        """Removes a node's entry; returns the new revision, or None when there was none."""
        with self._cond:
            item = self._items.pop(node_name, None)
            if item is None:
                return None
            self._revision += 1
            self._history.append(
                pb.NodeMetricEvent(type=pb.EVENT_TYPE_DELETED, revision=self._revision, item=item)
            )
            self._cond.notify_all()
            return self._revision

    def list(self, node_name: str | None = None) -> pb.ListResponse:
        with self._cond:
            names = (
                sorted(self._items) if node_name is None else [n for n in (node_name,) if n in self._items]
            )
            return pb.ListResponse(revision=self._revision, items=[self._items[n] for n in names])

    def watch(
        self,
        since: int,
        node_name: str | None = None,
        alive: threading.Event | None = None,
        poll: float = 0.5,
    ) -> Iterator[pb.NodeMetricEvent]:
        """Yields changes after revision `since` (since=0: the current entries as ADDED first) until
        `alive` is cleared. Raises RevisionTooOldError when history no longer reaches back to `since`."""
        with self._cond:
            if since == 0:
                backlog = [
                    pb.NodeMetricEvent(type=pb.EVENT_TYPE_ADDED, revision=it.revision, item=it)
                    for n, it in sorted(self._items.items())
                    if node_name is None or n == node_name
                ]
                cursor = self._revision
            else:
                if since > self._revision:
                    raise RevisionTooOldError(
                        f"revision {since} is newer than the hub's {self._revision} (hub restarted)"
                    )
                oldest = self._history[0].revision if self._history else self._revision + 1
                if since < oldest - 1:
                    raise RevisionTooOldError(
                        f"revision {since} is older than the hub's history (oldest {oldest})"
                    )
                backlog = []
                cursor = since
        yield from backlog
        while alive is None or alive.is_set():
            with self._cond:
                if self._revision <= cursor:
                    self._cond.wait(poll)
                if self._revision <= cursor:
                    continue
                # History is ordered by revision: the changes after cursor are its tail.
                count = self._revision - cursor
                if count > len(self._history):
                    raise RevisionTooOldError(f"watcher at revision {cursor} fell behind the hub's history")
                new = list(itertools.islice(reversed(self._history), count))[::-1]
                cursor = self._revision
            for ev in new:
                if node_name is None or ev.item.report.node_name == node_name:
                    yield ev
