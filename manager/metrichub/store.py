"""The hub's state: the latest report of every node, a revision counter and a bounded history of
changes for watchers that resume from a revision. Thread-safe.

Reports live as the wire bytes their agent sent, never as parsed messages: `put_raw` stores bytes the
caller has checked (manager.metrichub.server parses every report before it gets here). Each change's
NodeMetricEvent is serialised once, when it happens, with the generated Raw* forwarding messages of
proto/koord/v1/metrichub.proto (wire-identical to NodeMetricItem / NodeMetricEvent / ListResponse, the
report held as bytes), and every watcher is sent those same bytes; a WatchBatch message is a
RawNodeMetricEventBatch of them, List a RawListResponse of the items. `list` parses for in-process
callers. Field numbers live only in the .proto.

Every revision is one change, so the history (a deque of (node, serialised event) pairs, the newest
last) is addressed by revision arithmetic and keeps no revision of its own. Its pairs hold only a str
and a bytes: CPython's garbage collector stops tracking such tuples at their first collection, so the
65,536 changes of a full history cost no collector time.

Imports: standard library, google.protobuf, proto.koord.v1.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

from google.protobuf.timestamp_pb2 import Timestamp

from proto.koord.v1 import metrichub_pb2 as pb

DEFAULT_HISTORY = 65536
# A WatchBatch message stays below this size unless a single event is larger (gRPC clients accept
# 4 MiB by default; a report itself is at most the hub's 4 MiB receive limit).
MAX_BATCH_BYTES = 1 << 20
# What a length-delimited field adds to its content at most: a one-byte tag and a 10-byte length.
_FIELD_OVERHEAD = 11

Change = tuple[str, bytes]  # (node, serialised NodeMetricEvent)
Changes = list[Change]


class _Latest(NamedTuple):
    """A node's current entry: the revision it was stored at and the serialised NodeMetricItem."""

    revision: int
    item: bytes


def _event(kind: pb.EventType.ValueType, revision: int, item: bytes) -> bytes:
    return pb.RawNodeMetricEvent(type=kind, revision=revision, item=item).SerializeToString()


def encoded_events(changes: Changes) -> list[bytes]:
    """The serialised NodeMetricEvent of each change (shared bytes)."""
    return [event for _, event in changes]


def encode_batches(changes: Changes, max_bytes: int = MAX_BATCH_BYTES) -> Iterator[bytes]:
    """Serialised NodeMetricEventBatch messages holding `changes` in order, each at most `max_bytes`
    long unless one event alone is longer (that one then travels alone)."""
    events: list[bytes] = []
    size = 0
    for _, event in changes:
        n = len(event) + _FIELD_OVERHEAD
        if events and size + n > max_bytes:
            yield pb.RawNodeMetricEventBatch(events=events).SerializeToString()
            events, size = [], 0
        events.append(event)
        size += n
    if events:
        yield pb.RawNodeMetricEventBatch(events=events).SerializeToString()


class RevisionTooOldError(LookupError):
    """A watcher asked to resume from a revision the bounded history no longer holds."""


class HubStore:
    def __init__(self, history: int = DEFAULT_HISTORY) -> None:
        self._latest: dict[str, _Latest] = {}
        self._history: deque[Change] = deque(maxlen=history)
        self._revision = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        # For Prometheus (read by manager.metrichub.metrics): reports stored, Watch streams open.
        self.reports_received = 0
        self.watchers = 0

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Counts an open Watch stream for as long as the block runs."""
        with self._lock:
            self.watchers += 1
        try:
            yield
        finally:
            with self._lock:
                self.watchers -= 1

    def node_count(self) -> int:
        with self._lock:
            return len(self._latest)

    def add_listener(self, fn: Callable[[], None]) -> None:
        """fn() is called (outside the store's lock, in the writer's thread) after every change."""
        self._listeners.append(fn)

    @property
    def revision(self) -> int:
        with self._lock:
            return self._revision

    def put(self, report: pb.NodeMetricReport, now: float | None = None) -> int:
        """Stores report as its node's latest entry (serialised: the hub keeps no reference to the
        caller's message); returns the new revision."""
        return self.put_raw(report.node_name, report.SerializeToString(), now)

    def put_raw(self, node: str, raw: bytes, now: float | None = None) -> int:
        """Stores the wire bytes of a NodeMetricReport whose node_name is `node` (the caller has
        parsed them); returns the new revision."""
        if not node:
            raise ValueError("report.node_name is empty")
        received = Timestamp()
        received.FromNanoseconds(time.time_ns() if now is None else int(now * 1e9))
        with self._lock:
            self._revision = revision = self._revision + 1
            self.reports_received += 1
            kind = pb.EVENT_TYPE_MODIFIED if node in self._latest else pb.EVENT_TYPE_ADDED
            item = pb.RawNodeMetricItem(revision=revision, report=raw, received_time=received)
            latest = self._latest[node] = _Latest(revision, item.SerializeToString())
            self._history.append((node, _event(kind, revision, latest.item)))
        for fn in self._listeners:
            fn()
        return revision

    def delete(self, node_name: str) -> int | None:
        """Removes a node's entry; returns the new revision, or None when there was none."""
        with self._lock:
            last = self._latest.pop(node_name, None)
            if last is None:
                return None
            self._revision = revision = self._revision + 1
            self._history.append((node_name, _event(pb.EVENT_TYPE_DELETED, revision, last.item)))
        for fn in self._listeners:
            fn()
        return revision

    def _names_locked(self, node_name: str | None) -> list[str]:
        """The nodes with an entry, sorted (or just `node_name`, when it has one)."""
        if node_name is None:
            return sorted(self._latest)
        return [node_name] if node_name in self._latest else []

    def list_encoded(self, node_name: str | None = None) -> bytes:
        """The serialised ListResponse (see list())."""
        with self._lock:
            items = [self._latest[n].item for n in self._names_locked(node_name)]
            revision = self._revision
        return pb.RawListResponse(revision=revision, items=items).SerializeToString()

    def list(self, node_name: str | None = None) -> pb.ListResponse:
        """A consistent snapshot: the hub revision and the entries (of one node, or all, by name)."""
        return pb.ListResponse.FromString(self.list_encoded(node_name))

    def start(self, since: int, node_name: str | None = None) -> tuple[Changes, int]:
        """The first changes of a watch from revision `since` and the cursor to continue with tail():
        since=0 replays the current entries as ADDED events (in node order); otherwise nothing yet.
        Raises RevisionTooOldError when history no longer reaches back to `since` (or `since` is
        in the hub's future: the hub restarted)."""
        with self._lock:
            if since == 0:
                current = [(n, self._latest[n]) for n in self._names_locked(node_name)]
                revision = self._revision
            else:
                if since > self._revision:
                    raise RevisionTooOldError(
                        f"revision {since} is newer than the hub's {self._revision} (hub restarted)"
                    )
                oldest = self._revision - len(self._history) + 1
                if since < oldest - 1:
                    raise RevisionTooOldError(
                        f"revision {since} is older than the hub's history (oldest {oldest})"
                    )
                return [], since
        return [(n, _event(pb.EVENT_TYPE_ADDED, e.revision, e.item)) for n, e in current], revision

    def tail(self, cursor: int, node_name: str | None = None) -> tuple[Changes, int]:
        """The changes after `cursor` (never blocks) and the new cursor."""
        with self._lock:
            count = self._revision - cursor
            if count <= 0:
                return [], cursor
            if count > len(self._history):
                raise RevisionTooOldError(f"watcher at revision {cursor} fell behind the hub's history")
            # One change per revision, the newest last: the changes after cursor are the history's tail.
            new = list(itertools.islice(reversed(self._history), count))
            revision = self._revision
        new.reverse()
        if node_name is not None:
            new = [c for c in new if c[0] == node_name]
        return new, revision
