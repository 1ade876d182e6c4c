"""The hub's state: the latest report of every node, a revision counter and a bounded history of
changes for watchers that resume from a revision. Thread-safe; knows only the protobuf messages
(reports are stored and forwarded as received, never re-encoded).

Imports: standard library and proto.koord.v1.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from proto.koord.v1 import metrichub_pb2 as pb

DEFAULT_HISTORY = 65536


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return b"".join((tag, _varint(len(payload)), payload))


def _timestamp(ns: int) -> bytes:
    seconds, nanos = divmod(ns, 1_000_000_000)
    return (b"\x08" + _varint(seconds) if seconds else b"") + (b"\x10" + _varint(nanos) if nanos else b"")


class _Change:
    """One revision of a node's entry. Its NodeMetricItem / NodeMetricEvent messages and the event's
    wire bytes are built on first use, once whatever the number of watchers. When the report's wire
    bytes are known (`raw`), the event bytes are framed around them: no copy, no re-serialisation."""

    __slots__ = (
        "_data",
        "_item",
        "item_revision",
        "kind",
        "node",
        "raw",
        "received_ns",
        "report",
        "revision",
    )

    def __init__(
        self,
        kind: int,
        revision: int,
        node: str,
        report: pb.NodeMetricReport,
        received_ns: int,
        raw: bytes | None = None,
        item_revision: int | None = None,
        item: pb.NodeMetricItem | None = None,
    ) -> None:
        self.kind = kind
        self.revision = revision
        self.item_revision = revision if item_revision is None else item_revision
        self.node = node
        self.report = report
        self.received_ns = received_ns
        self.raw = raw
        self._item = item
        self._data: bytes | None = None

    def again(self, kind: int, revision: int) -> _Change:
        """The same entry under another event type / event revision (replay, deletion)."""
        return _Change(
            kind, revision, self.node, self.report, self.received_ns, self.raw, self.item_revision, self._item
        )

    @property
    def item(self) -> pb.NodeMetricItem:
        if self._item is None:
            item = pb.NodeMetricItem(revision=self.item_revision, report=self.report)
            item.received_time.FromNanoseconds(self.received_ns)
            self._item = item
        return self._item

    @property
    def event(self) -> pb.NodeMetricEvent:
        return pb.NodeMetricEvent(type=self.kind, revision=self.revision, item=self.item)  # type: ignore[arg-type]

    @property
    def data(self) -> bytes:
        """The serialised NodeMetricEvent."""
        if self._data is None:
            if self.raw is not None and self._item is None:
                item = b"".join(
                    (
                        b"\x08",
                        _varint(self.item_revision),
                        _field(b"\x12", self.raw),
                        _field(b"\x1a", _timestamp(self.received_ns)),
                    )
                )
            else:
                item = self.item.SerializeToString()
            head = b"\x08" + _varint(self.kind) + b"\x10" + _varint(self.revision)
            self._data = head + _field(b"\x1a", item)
        return self._data


class RevisionTooOldError(LookupError):
    """A watcher asked to resume from a revision the bounded history no longer holds."""


_Changes = list[_Change]


class HubStore:
    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self._items: dict[str, _Change] = {}
        self._history: deque[_Change] = deque(maxlen=history)
        self._revision = 0
        self._cond = threading.Condition()
        self._listeners: list[Callable[[], None]] = []
        # For Prometheus (read by manager.metrichub.metrics): reports stored, Watch streams open.
        self.reports_received = 0
        self.watchers = 0

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Counts an open Watch stream for as long as the block runs."""
        with self._cond:
            self.watchers += 1
        try:
            yield
        finally:
            with self._cond:
                self.watchers -= 1

    def node_count(self) -> int:
        with self._cond:
            return len(self._items)

    def add_listener(self, fn: Callable[[], None]) -> None:
        """fn() is called (outside the store's lock, in the writer's thread) after every change."""
        self._listeners.append(fn)

    def _notify(self) -> None:
        for fn in self._listeners:
            fn()

    @property
    def revision(self) -> int:
        with self._cond:
            return self._revision

    def put(self, report: pb.NodeMetricReport, now: float | None = None, raw: bytes | None = None) -> int:
        """Stores report as its node's latest entry; returns the new revision. `raw`, when given, is
        report's wire form (forwarded to watchers as is)."""
        node = report.node_name
        if not node:
            raise ValueError("report.node_name is empty")
        received = time.time_ns() if now is None else int(now * 1e9)
        if raw is None:  # the caller keeps its message: the hub keeps a copy
            own = pb.NodeMetricReport()
            own.CopyFrom(report)
            report = own
        with self._cond:
            self._revision += 1
            self.reports_received += 1
            kind = pb.EVENT_TYPE_MODIFIED if node in self._items else pb.EVENT_TYPE_ADDED
            change = _Change(kind, self._revision, node, report, received, raw)
            self._items[node] = change
            self._history.append(change)
            self._cond.notify_all()
            revision = self._revision
        self._notify()
        return revision

    def delete(self, node_name: str) -> int | None:
        """Removes a node's entry; returns the new revision, or None when there was none."""
        with self._cond:
            last = self._items.pop(node_name, None)
            if last is None:
                return None
            self._revision += 1
            self._history.append(last.again(pb.EVENT_TYPE_DELETED, self._revision))
            self._cond.notify_all()
            revision = self._revision
        self._notify()
        return revision

    def list(self, node_name: str | None = None) -> pb.ListResponse:
        with self._cond:
            names = (
                sorted(self._items) if node_name is None else [n for n in (node_name,) if n in self._items]
            )
            changes = [self._items[n] for n in names]
            revision = self._revision
        return pb.ListResponse(revision=revision, items=[c.item for c in changes])

    def watch(
        self,
        since: int,
        node_name: str | None = None,
        alive: threading.Event | None = None,
        poll: float = 0.5,
    ) -> Iterator[pb.NodeMetricEvent]:
        """Yields changes after revision `since` (since=0: the current entries as ADDED first) until
        `alive` is cleared. Raises RevisionTooOldError when history no longer reaches back to `since`."""
        for change in self._follow(since, node_name, alive, poll):
            yield change.event

    def watch_encoded(
        self,
        since: int,
        node_name: str | None = None,
        alive: threading.Event | None = None,
        poll: float = 0.5,
    ) -> Iterator[bytes]:
        """As watch(), but yields each event serialised (the bytes are shared by all watchers)."""
        for change in self._follow(since, node_name, alive, poll):
            yield change.data

    def start(self, since: int, node_name: str | None = None) -> tuple[_Changes, int]:
        """The first changes of a watch from revision `since` (since=0: the current entries as
        ADDED) and the cursor to continue with tail(). RevisionTooOldError as watch()."""
        with self._cond:
            if since == 0:
                backlog = [
                    c.again(pb.EVENT_TYPE_ADDED, c.item_revision)
                    for n, c in sorted(self._items.items())
                    if node_name is None or n == node_name
                ]
                return backlog, self._revision
            if since > self._revision:
                raise RevisionTooOldError(
                    f"revision {since} is newer than the hub's {self._revision} (hub restarted)"
                )
            oldest = self._history[0].revision if self._history else self._revision + 1
            if since < oldest - 1:
                raise RevisionTooOldError(
                    f"revision {since} is older than the hub's history (oldest {oldest})"
                )
        return [], since

    def tail(self, cursor: int, node_name: str | None = None) -> tuple[_Changes, int]:
        """The changes after `cursor` (never blocks) and the new cursor."""
        with self._cond:
            return self._tail_locked(cursor, node_name)

    def _tail_locked(self, cursor: int, node_name: str | None) -> tuple[_Changes, int]:
        count = self._revision - cursor
        if count <= 0:
            return [], cursor
        # History is ordered by revision: the changes after cursor are its tail.
        if count > len(self._history):
            raise RevisionTooOldError(f"watcher at revision {cursor} fell behind the hub's history")
        new = list(itertools.islice(reversed(self._history), count))
        new.reverse()
        if node_name is not None:
            new = [c for c in new if c.node == node_name]
        return new, self._revision

    def _follow(
        self, since: int, node_name: str | None, alive: threading.Event | None, poll: float
    ) -> Iterator[_Change]:
        backlog, cursor = self.start(since, node_name)
        yield from backlog
        while alive is None or alive.is_set():
            with self._cond:
                if self._revision <= cursor:
                    self._cond.wait(poll)
                new, cursor = self._tail_locked(cursor, node_name)
            yield from new
