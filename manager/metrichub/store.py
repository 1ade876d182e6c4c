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
65,536 changes of a full history cost no collector time. The history is bounded by its count, by its
bytes and by its age (the oldest changes go first; their times live in a parallel deque): bounded by
age, its memory follows the rate of change and is flat after that window, instead of filling for hours
towards the count and byte bounds on a small cluster. The latest entries by the number of nodes and their
bytes, so no sender makes the hub grow without bound (docs/rules/manager.md#metrichub-limits).

List pages: `list_encoded(limit=…)` returns at most `limit` items (and stops before LIST_PAGE_BYTES
unless one item alone is longer) after the node named by the page token, with the token of the next
page; each page is taken under the lock at the revision it reports.

Imports: standard library, google.protobuf, apis.reportlimits, manager.metrichub.limits, proto.koord.v1.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import NamedTuple

from google.protobuf.timestamp_pb2 import Timestamp

from apis.reportlimits import LIST_PAGE_BYTES
from manager.metrichub.limits import Counts
from proto.koord.v1 import metrichub_pb2 as pb

DEFAULT_HISTORY = 65536
DEFAULT_HISTORY_BYTES = 128 << 20
DEFAULT_HISTORY_SECONDS = 300.0  # a watcher further behind lists again, as it would after etcd compacts
DEFAULT_MAX_NODES = 50_000
DEFAULT_MAX_STORED_BYTES = 1 << 30
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


class StoreFullError(RuntimeError):
    """A report would take the hub past its number of nodes or its bytes of latest entries."""


def page_token(node: str) -> str:
    """The opaque token of the page that starts after `node`."""
    return base64.urlsafe_b64encode(node.encode()).decode()


def _after(token: str) -> str:
    """The node a page token continues after; ValueError when it is not a token of page_token."""
    try:
        return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeError) as e:
        raise ValueError(f"invalid page token {token[:40]!r}") from e


class HubStore:
    def __init__(
        self,
        history: int = DEFAULT_HISTORY,
        *,
        history_bytes: int = DEFAULT_HISTORY_BYTES,
        history_seconds: float = DEFAULT_HISTORY_SECONDS,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_stored_bytes: int = DEFAULT_MAX_STORED_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._latest: dict[str, _Latest] = {}
        self._history: deque[Change] = deque()
        self._times: deque[float] = deque()  # when each change of the history happened
        self._max_history = (history, history_bytes)
        self._max_age = history_seconds
        self._clock = clock
        self._max_latest = (max_nodes, max_stored_bytes)
        self._revision = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []
        # For Prometheus (read by manager.metrichub.metrics): reports stored, Watch streams open, bytes
        # held by the latest entries and by the history.
        self.reports_received = 0
        self.watchers = 0
        self.stored_bytes = 0
        self.history_bytes = 0
        # Reports and calls the hub refused, by reason (manager.metrichub.ingest and .authgate count).
        self.refused = Counts()
        self.auth_refused = Counts()

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

    def put_raw(
        self, node: str, raw: bytes, now: float | None = None, *, received_ns: int | None = None
    ) -> int:
        """Stores the wire bytes of a NodeMetricReport whose node_name is `node` (the caller has
        checked them), received at `received_ns` (or `now` seconds; default: the current time);
        returns the new revision. StoreFullError when it would take the hub past its node count or
        its bytes of latest entries."""
        if not node:
            raise ValueError("report.node_name is empty")
        received = Timestamp()
        if received_ns is None:
            received_ns = time.time_ns() if now is None else int(now * 1e9)
        received.FromNanoseconds(received_ns)
        with self._lock:
            revision = self._revision + 1
            item = pb.RawNodeMetricItem(revision=revision, report=raw, received_time=received)
            item_bytes = item.SerializeToString()
            previous = self._latest.get(node)
            growth = len(item_bytes) - (len(previous.item) if previous is not None else 0)
            self._check_room_locked(node, previous is None, growth)
            self._revision = revision
            self.reports_received += 1
            self.stored_bytes += growth
            self._latest[node] = _Latest(revision, item_bytes)
            kind = pb.EVENT_TYPE_MODIFIED if previous is not None else pb.EVENT_TYPE_ADDED
            self._append_locked((node, _event(kind, revision, item_bytes)))
        for fn in self._listeners:
            fn()
        return revision

    def _check_room_locked(self, node: str, new: bool, growth: int) -> None:
        max_nodes, max_bytes = self._max_latest
        if new and len(self._latest) >= max_nodes:
            raise StoreFullError(f"the hub holds its maximum of {max_nodes} nodes; {node!r} is not one")
        if growth > 0 and self.stored_bytes + growth > max_bytes:
            raise StoreFullError(f"the hub's latest reports would exceed {max_bytes} bytes")

    def _append_locked(self, change: Change) -> None:
        """Appends a change to the history, dropping the oldest beyond its count, bytes or age."""
        history, times = self._history, self._times
        now = self._clock()
        history.append(change)
        times.append(now)
        self.history_bytes += len(change[1])
        max_count, max_bytes = self._max_history
        oldest = now - self._max_age
        while len(history) > 1 and (
            len(history) > max_count or self.history_bytes > max_bytes or times[0] < oldest
        ):
            self.history_bytes -= len(history.popleft()[1])
            times.popleft()

    def delete(self, node_name: str) -> int | None:
        """Removes a node's entry; returns the new revision, or None when there was none."""
        with self._lock:
            last = self._latest.pop(node_name, None)
            if last is None:
                return None
            self._revision = revision = self._revision + 1
            self.stored_bytes -= len(last.item)
            self._append_locked((node_name, _event(pb.EVENT_TYPE_DELETED, revision, last.item)))
        for fn in self._listeners:
            fn()
        return revision

    def _names_locked(self, node_name: str | None) -> list[str]:
        """The nodes with an entry, sorted (or just `node_name`, when it has one)."""
        if node_name is None:
            return sorted(self._latest)
        return [node_name] if node_name in self._latest else []

    def list_encoded(
        self, node_name: str | None = None, limit: int = 0, token: str = "", max_bytes: int = LIST_PAGE_BYTES
    ) -> bytes:
        """The serialised ListResponse (see list()); ValueError for a token page_token did not make."""
        after = _after(token) if token else None
        more = ""
        with self._lock:
            names = self._names_locked(node_name)
            if after is not None:
                names = names[bisect.bisect_right(names, after) :]
            if limit <= 0:
                items = [self._latest[n].item for n in names]
            else:
                items, size = [], 0
                for n in names[:limit]:
                    item = self._latest[n].item
                    size += len(item) + _FIELD_OVERHEAD
                    if items and size > max_bytes:
                        break
                    items.append(item)
                if len(items) < len(names):
                    more = page_token(names[len(items) - 1])
            revision = self._revision
        return pb.RawListResponse(revision=revision, items=items, next_page_token=more).SerializeToString()

    def list(self, node_name: str | None = None, limit: int = 0, token: str = "") -> pb.ListResponse:
        """The hub revision and the entries (of one node, or all, by name): a consistent snapshot, or
        with `limit` one page of it (see the module docstring)."""
        return pb.ListResponse.FromString(self.list_encoded(node_name, limit, token))

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
