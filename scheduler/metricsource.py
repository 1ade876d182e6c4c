"""Where the scheduler's node metrics come from: the MetricHub over gRPC (List in pages, then
WatchBatch from the first page's revision, or Watch from a hub that predates WatchBatch; relist when
the hub says the revision is too old; reconnect with capped backoff; TLS when given the CA bundle the
hub's certificate chains to) and the NodeMetric CR informer as a fallback. `FreshestMerger` keeps, per
node, the metric with the newer `status.updateTime` from either source and forwards only real changes
to the consumer (the LoadAware plugin's `on_node_metric`).

Every hub item is decoded with apis.reportcheck.checked_item, the check the hub applies when a report
arrives: an item that fails it is skipped (the hub's entry for that node is dropped, counted through
`on_skipped(reason)`), never fatal to the watcher. The channel accepts messages up to
CLIENT_MAX_RECEIVE_BYTES: a List page, a WatchBatch message or the event of a largest report
(docs/rules/manager.md#metrichub-limits).

Imports: standard library, grpc, apis (nodemetric, reportcheck, reportlimits), proto.koord.v1.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

from apis.nodemetric import NodeMetric, NodeMetricError
from apis.reportcheck import checked_item, reason_of
from apis.reportlimits import CLIENT_MAX_RECEIVE_BYTES
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
Consumer = Callable[[str, NodeMetric | None], None]
_EPOCH = datetime.min
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", CLIENT_MAX_RECEIVE_BYTES),)
LIST_PAGE_ITEMS = 500
MAX_LIST_PAGES = 10_000  # 5 million nodes: a bound on the paging loop, not a real limit
_SKIP_LOG_INTERVAL = 30.0


def _loopback(target: str) -> bool:
    host = target.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _update_time(nm: NodeMetric) -> datetime:
    t = nm.status.update_time if nm.status is not None else None
    return t.replace(tzinfo=None) if t is not None else _EPOCH


class FreshestMerger:
    """Per node and per source the latest NodeMetric; the consumer sees the freshest of the sources.
    A node disappears for the consumer only when every source has dropped it. Thread-safe."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._by_source: dict[str, dict[str, NodeMetric]] = {}
        self._current: dict[str, NodeMetric] = {}
        self._lock = threading.Lock()

    def update(self, source: str, name: str, nm: NodeMetric | None) -> None:
        with self._lock:
            per = self._by_source.setdefault(source, {})
            if nm is None:
                per.pop(name, None)
            else:
                per[name] = nm
            candidates = [s[name] for s in self._by_source.values() if name in s]
            best = max(candidates, key=_update_time) if candidates else None
            if best is self._current.get(name):
                return
            if best is None:
                self._current.pop(name, None)
            else:
                self._current[name] = best
            self._consumer(name, best)

    def resync(self, source: str, items: dict[str, NodeMetric]) -> None:
        """Replaces everything one source knows (after a List): names it no longer has are dropped."""
        for name in set(self._by_source.get(source, {})) - set(items):
            self.update(source, name, None)
        for name, nm in items.items():
            self.update(source, name, nm)

    def current(self) -> dict[str, NodeMetric]:
        with self._lock:
            return dict(self._current)


class HubWatcher:
    """Follows a MetricHub: List, then Watch from the listed revision, into a FreshestMerger."""

    SOURCE = "hub"

    def __init__(
        self,
        target: str,
        merger: FreshestMerger,
        *,
        channel_factory: Callable[[str], grpc.Channel] | None = None,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        metadata: tuple[tuple[str, str], ...] = (),
        token_file: Path | None = None,
        ca_file: Path | None = None,
        on_skipped: Callable[[str], None] | None = None,
        page_items: int = LIST_PAGE_ITEMS,
    ) -> None:
        self.target = target
        self.merger = merger
        if channel_factory is None:
            channel_factory = functools.partial(grpc.insecure_channel, options=CHANNEL_OPTIONS)
        if ca_file is not None:  # read once: a rotated CA takes a restart
            credentials = grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())
            channel_factory = functools.partial(
                grpc.secure_channel, credentials=credentials, options=CHANNEL_OPTIONS
            )
        elif token_file is not None and not _loopback(target):
            log.warning("metric hub %s: no --hub-ca, the bearer token travels in clear", target)
        self._channel_factory = channel_factory
        self._backoff = (backoff_initial, backoff_max)
        self._static_metadata = metadata
        self._token_file = token_file  # bearer token, re-read on every call (rotation)
        self.synced = threading.Event()
        self.relists = 0
        self.pages = 0  # List answers read
        self.skipped = 0  # hub items that failed the report check
        self.batched = True  # False once the hub answered WatchBatch with UNIMPLEMENTED
        self._call: Any = None  # the open Watch call (grpc is untyped)
        self._on_skipped = on_skipped
        self._page_items = page_items
        self._skip_logged = 0.0

    def run(self, stop: threading.Event) -> None:
        delay = self._backoff[0]
        while not stop.is_set():
            try:
                with self._channel_factory(self.target) as channel:
                    self._follow(pb_grpc.MetricHubStub(channel), stop)
                delay = self._backoff[0]
            except (grpc.RpcError, OSError) as e:
                code = e.code() if hasattr(e, "code") else e
                if stop.is_set() or code == grpc.StatusCode.CANCELLED:
                    continue
                log.warning("metric hub %s: %s; retrying in %.1fs", self.target, code, delay)
                stop.wait(delay)
                delay = min(delay * 2, self._backoff[1])

    @property
    def _metadata(self) -> tuple[tuple[str, str], ...]:
        if self._token_file is None:
            return self._static_metadata
        token = self._token_file.read_text().strip()
        return (*self._static_metadata, ("authorization", f"Bearer {token}"))

    def stop(self) -> None:
        """Cancels the open Watch so run() notices its stop event promptly."""
        call = self._call
        if call is not None:
            call.cancel()

    def _list(self, stub: pb_grpc.MetricHubStub) -> tuple[int, list[pb.NodeMetricItem]]:
        """Every item of the hub, page by page, and the revision to watch from (the first page's:
        the watch brings what changed while the later pages were read)."""
        revision: int | None = None
        items: list[pb.NodeMetricItem] = []
        token = ""
        for _ in range(MAX_LIST_PAGES):
            request = pb.ListRequest(limit=self._page_items, page_token=token)
            page = stub.List(request, timeout=30, metadata=self._metadata)
            self.pages += 1
            revision = page.revision if revision is None else revision
            items.extend(page.items)
            token = page.next_page_token
            if not token:
                break
        return revision or 0, items

    def _decoded(self, items: Iterable[pb.NodeMetricItem]) -> dict[str, NodeMetric]:
        out: dict[str, NodeMetric] = {}
        for item in items:
            nm = self._check(item)
            if nm is not None:
                out[item.report.node_name] = nm
        return out

    def _check(self, item: pb.NodeMetricItem) -> NodeMetric | None:
        """The item's metric, or None (counted, logged now and then) when it fails the report check."""
        try:
            return checked_item(item)
        except NodeMetricError as e:
            reason, detail = reason_of(e), str(e)
        except RecursionError:  # a check this version lacks must still not end the watcher
            reason, detail = "invalid_field", "nested too deeply to decode"
        self.skipped += 1
        if self._on_skipped is not None:
            self._on_skipped(reason)
        now = time.monotonic()
        if now - self._skip_logged >= _SKIP_LOG_INTERVAL or self.skipped == 1:
            self._skip_logged = now
            log.warning(
                "metric hub %s: skipping node %r (%s): %s (%d skipped so far)",
                self.target, item.report.node_name[:80], reason, detail[:300], self.skipped,
            )  # fmt: skip
        return None

    def _follow(self, stub: pb_grpc.MetricHubStub, stop: threading.Event) -> None:
        while not stop.is_set():
            revision, items = self._list(stub)
            self.relists += 1
            self.merger.resync(self.SOURCE, self._decoded(items))
            self.synced.set()
            request = pb.WatchRequest(since_revision=revision)
            if self.batched:
                stream = stub.WatchBatch(request, metadata=self._metadata)
            else:
                stream = stub.Watch(request, metadata=self._metadata)
            self._call = stream
            if stop.is_set():  # stop() ran before the call was there to cancel
                stream.cancel()
            try:
                for msg in stream:
                    for ev in msg.events if self.batched else (msg,):
                        self._apply(ev)
                return  # the hub ended the stream: reconnect
            except grpc.RpcError as e:
                if e.code() == grpc.StatusCode.UNIMPLEMENTED and self.batched:
                    log.info("metric hub %s: no WatchBatch; using Watch", self.target)
                    self.batched = False
                elif e.code() == grpc.StatusCode.OUT_OF_RANGE:
                    log.info("metric hub %s: watch fell behind; relisting", self.target)
                else:
                    raise
            finally:
                self._call = None

    def _apply(self, ev: pb.NodeMetricEvent) -> None:
        name = ev.item.report.node_name
        if ev.type == pb.EVENT_TYPE_DELETED:
            self.merger.update(self.SOURCE, name, None)
        else:  # a node whose new report fails the check has no usable hub metric
            self.merger.update(self.SOURCE, name, self._check(ev.item))
