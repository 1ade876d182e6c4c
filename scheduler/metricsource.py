"""Where the scheduler's node metrics come from: the MetricHub over gRPC (List, then WatchBatch from the
listed revision, or Watch from a hub that predates WatchBatch; relist when the hub says the revision
is too old; reconnect with capped backoff; TLS when given the CA bundle the hub's certificate chains
to) and the NodeMetric CR informer as a fallback. `FreshestMerger` keeps, per node, the metric with the
newer `status.updateTime` from either source and forwards only real changes to the consumer (the
LoadAware plugin's `on_node_metric`).

Imports: standard library, grpc, apis (nodemetric, convert), proto.koord.v1.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

from apis.convert import nodemetric_from_report
from apis.nodemetric import NodeMetric
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
Consumer = Callable[[str, NodeMetric | None], None]
_EPOCH = datetime.min


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
        channel_factory: Callable[[str], grpc.Channel] = grpc.insecure_channel,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        metadata: tuple[tuple[str, str], ...] = (),
        token_file: Path | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.target = target
        self.merger = merger
        if ca_file is not None:  # read once: a rotated CA takes a restart
            credentials = grpc.ssl_channel_credentials(root_certificates=ca_file.read_bytes())
            channel_factory = functools.partial(grpc.secure_channel, credentials=credentials)
        elif token_file is not None and not _loopback(target):
            log.warning("metric hub %s: no --hub-ca, the bearer token travels in clear", target)
        self._channel_factory = channel_factory
        self._backoff = (backoff_initial, backoff_max)
        self._static_metadata = metadata
        self._token_file = token_file  # bearer token, re-read on every call (rotation)
        self.synced = threading.Event()
        self.relists = 0
        self.batched = True  # False once the hub answered WatchBatch with UNIMPLEMENTED
        self._call: Any = None  # the open Watch call (grpc is untyped)

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

    def _follow(self, stub: pb_grpc.MetricHubStub, stop: threading.Event) -> None:
        while not stop.is_set():
            listed = stub.List(pb.ListRequest(), timeout=30, metadata=self._metadata)
            self.relists += 1
            self.merger.resync(
                self.SOURCE, {i.report.node_name: nodemetric_from_report(i.report) for i in listed.items}
            )
            self.synced.set()
            request = pb.WatchRequest(since_revision=listed.revision)
            if self.batched:
                stream = stub.WatchBatch(request, metadata=self._metadata)
            else:
                stream = stub.Watch(request, metadata=self._metadata)
            self._call = stream
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
        else:
            self.merger.update(self.SOURCE, name, nodemetric_from_report(ev.item.report))
