"""The hub's state: the latest report of every node, a revision counter and a bounded history of
changes for watchers that resume from a revision. Thread-safe.

Reports live as their wire bytes, never as parsed messages: `put_raw` stores what an agent sent
(already validated by the caller) and each change's NodeMetricEvent is framed around those bytes
once, at put time; the report and the item are slices of that one buffer. Watchers (`watch_encoded`,
`batch_encoded`) and List (`list_encoded`) get shared bytes; `list`/`watch` parse on demand for
in-process callers.

Imports: standard library and proto.koord.v1.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Final

from proto.koord.v1 import metrichub_pb2 as pb

DEFAULT_HISTORY = 65536
# A WatchBatch message stays below this size unless a single event is larger (gRPC clients accept
# 4 MiB by default; a report itself is at most the hub's 4 MiB receive limit).
MAX_BATCH_BYTES = 1 << 20

_ADDED, _MODIFIED, _DELETED = pb.EVENT_TYPE_ADDED, pb.EVENT_TYPE_MODIFIED, pb.EVENT_TYPE_DELETED
_SMALL = [bytes((i,)) for i in range(128)]


def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 128:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def timestamp_bytes(ns: int) -> bytes:
    """A google.protobuf.Timestamp message body for ``ns`` nanoseconds (zero fields omitted)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    return (b"\x08" + varint(seconds) if seconds else b"") + (b"\x10" + varint(nanos) if nanos else b"")


def _event_head(kind: int, revision: int, item_len: int) -> bytes:
    """NodeMetricEvent fields type and revision, then the tag and length of `item`."""
    return b"".join((b"\x08", _SMALL[kind], b"\x10", varint(revision), b"\x1a", varint(item_len)))


# One revision of a node's entry, as a plain tuple of atoms (bytes, str, ints): CPython's garbage
# collector stops tracking such tuples at their first collection, so the 65,536 changes of the history
# cost no collector time (as objects they made every old-generation collection walk them all):
# (serialised NodeMetricEvent, node, event revision, event type, item revision, offset of the item in
# the event bytes, offset and length of the report in them). The event bytes are built once,
# whatever the number of watchers; the item and the report are slices of them.
_Change = tuple[bytes, str, int, int, int, int, int, int]
_DATA: Final = 0
_NODE: Final = 1
_REV: Final = 2
_KIND: Final = 3
_ITEM_REV: Final = 4
_ITEM_AT: Final = 5
_RAW_AT: Final = 6
_RAW_LEN: Final = 7


def _of_report(kind: int, revision: int, node: str, raw: bytes, received_ns: int) -> _Change:
    rev = varint(revision)
    raw_len = len(raw)
    lead = b"\x08" + rev + b"\x12" + varint(raw_len)
    ts = timestamp_bytes(received_ns)
    item_len = len(lead) + raw_len + 2 + len(ts)  # the timestamp is < 128 bytes: a 1-byte length
    head = b"".join((b"\x08", _SMALL[kind], b"\x10", rev, b"\x1a", varint(item_len)))
    data = b"".join((head, lead, raw, b"\x1a", _SMALL[len(ts)], ts))
    return (data, node, revision, kind, revision, len(head), len(head) + len(lead), raw_len)


def _again(c: _Change, kind: int, revision: int) -> _Change:
    """The same entry under another event type / event revision (replay, deletion)."""
    item = _item(c)
    head = _event_head(kind, revision, len(item))
    raw_at = c[_RAW_AT] - c[_ITEM_AT] + len(head)
    return (head + item, c[_NODE], revision, kind, c[_ITEM_REV], len(head), raw_at, c[_RAW_LEN])


def _item(c: _Change) -> memoryview:
    """The serialised NodeMetricItem."""
    return memoryview(c[_DATA])[c[_ITEM_AT] :]


def encoded_events(changes: list[_Change]) -> list[bytes]:
    """The serialised NodeMetricEvent of each change (shared bytes)."""
    return [c[_DATA] for c in changes]


def encode_batches(changes: list[_Change], max_bytes: int = MAX_BATCH_BYTES) -> Iterator[bytes]:
    """Serialised NodeMetricEventBatch messages holding `changes` in order, each at most `max_bytes`
    long unless one event alone is longer (that one then travels alone)."""
    parts: list[bytes] = []
    size = 0
    for c in changes:
        data = c[_DATA]
        n = len(data)
        head = b"\x0a" + varint(n)
        if parts and size + len(head) + n > max_bytes:
            yield b"".join(parts)
            parts, size = [], 0
        parts += (head, data)
        size += len(head) + n
    if parts:
        yield b"".join(parts)


class RevisionTooOldError(LookupError):
    """A watcher asked to resume from a revision the bounded history no longer holds."""


_Changes = list[_Change]


class HubStore:
    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self._items: dict[str, _Change] = {}
        self._history: deque[_Change] = deque(maxlen=history)
        self._revision = 0
        self._cond = threading.Condition(threading.Lock())
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
        report's wire form (kept and forwarded as is); otherwise the report is serialised (the hub
        keeps no reference to the caller's message)."""
        return self.put_raw(report.node_name, report.SerializeToString() if raw is None else raw, now)

    def put_raw(self, node: str, raw: bytes, now: float | None = None) -> int:
        """Stores the wire bytes of a NodeMetricReport whose node_name is `node` (the caller has
        parsed or validated them); returns the new revision."""
        if not node:
            raise ValueError("report.node_name is empty")
        received = time.time_ns() if now is None else int(now * 1e9)
        with self._cond:
            self._revision = revision = self._revision + 1
            self.reports_received += 1
            kind = _MODIFIED if node in self._items else _ADDED
            change = _of_report(kind, revision, node, raw, received)
            self._items[node] = change
            self._history.append(change)
            self._cond.notify_all()
        for fn in self._listeners:
            fn()
        return revision

    def delete(self, node_name: str) -> int | None:
        """Removes a node's entry; returns the new revision, or None when there was none."""
        with self._cond:
            last = self._items.pop(node_name, None)
            if last is None:
                return None
            self._revision += 1
            self._history.append(_again(last, _DELETED, self._revision))
            self._cond.notify_all()
            revision = self._revision
        self._notify()
        return revision

    def list_encoded(self, node_name: str | None = None) -> bytes:
        """The serialised ListResponse (see list())."""
        with self._cond:
            names = (
                sorted(self._items) if node_name is None else [n for n in (node_name,) if n in self._items]
            )
            changes = [self._items[n] for n in names]
            revision = self._revision
        parts: list[bytes | memoryview] = [b"\x08" + varint(revision)] if revision else []
        for c in changes:
            item = _item(c)
            parts += (b"\x12", varint(len(item)), item)
        return b"".join(parts)

    def list(self, node_name: str | None = None) -> pb.ListResponse:
        """A consistent snapshot: the hub revision and the entries (of one node, or all, by name)."""
        return pb.ListResponse.FromString(self.list_encoded(node_name))

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
            yield pb.NodeMetricEvent.FromString(change[_DATA])

    def watch_encoded(
        self,
        since: int,
        node_name: str | None = None,
        alive: threading.Event | None = None,
        poll: float = 0.5,
    ) -> Iterator[bytes]:
        """As watch(), but yields each event serialised (the bytes are shared by all watchers)."""
        for change in self._follow(since, node_name, alive, poll):
            yield change[_DATA]

    def start(self, since: int, node_name: str | None = None) -> tuple[_Changes, int]:
        """The first changes of a watch from revision `since` (since=0: the current entries as
        ADDED) and the cursor to continue with tail(). RevisionTooOldError as watch()."""
        with self._cond:
            if since == 0:
                current = sorted(self._items.items()) if node_name is None else (
                    [(node_name, self._items[node_name])] if node_name in self._items else []
                )  # fmt: skip
                revision = self._revision
            else:
                if since > self._revision:
                    raise RevisionTooOldError(
                        f"revision {since} is newer than the hub's {self._revision} (hub restarted)"
                    )
                oldest = self._history[0][_REV] if self._history else self._revision + 1
                if since < oldest - 1:
                    raise RevisionTooOldError(
                        f"revision {since} is older than the hub's history (oldest {oldest})"
                    )
                return [], since
        return [_again(c, _ADDED, c[_ITEM_REV]) for _, c in current], revision

    def tail(self, cursor: int, node_name: str | None = None) -> tuple[_Changes, int]:
        """The changes after `cursor` (never blocks) and the new cursor."""
        with self._cond:
            return self._tail_locked(cursor, node_name)

    def wait_tail(self, cursor: int, node_name: str | None, timeout: float) -> tuple[_Changes, int]:
        """As tail(), but waits up to `timeout` seconds for a change when there is none yet."""
        with self._cond:
            if self._revision <= cursor:
                self._cond.wait(timeout)
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
            new = [c for c in new if c[_NODE] == node_name]
        return new, self._revision

    def _follow(
        self, since: int, node_name: str | None, alive: threading.Event | None, poll: float
    ) -> Iterator[_Change]:
        backlog, cursor = self.start(since, node_name)
        yield from backlog
        while alive is None or alive.is_set():
            new, cursor = self.wait_tail(cursor, node_name, poll)
            yield from new
