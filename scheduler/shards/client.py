"""A shard's side of optimistic binding (docs/shards.md#transport): ``ArbiterClient`` asks the group's
arbiter (found through ``resolve()``, e.g. ``ShardHeartbeat.arbiter_address``) over gRPC, with a
deadline per call; ``ArbitratedBinder`` is the scheduler's Binder for a sharded scheduler: the arbiter
first, then the API bind through the wrapped binder (the existing APIBinder). A rejection, an arbiter
that cannot be reached, or no arbiter at all is an unsuccessful Status, which the scheduler's
failed-bind path turns into forget + Unreserve + requeue with backoff; an API bind that fails after the
arbiter accepted gives the room back (Forget). ``LocalFirstArbiter`` lets the shard hosting the arbiter
ask its ledger in-process.
Imports: grpc, apis.pod, proto.koord.v1 (shardbinder), scheduler.framework.status, scheduler.shards
(arbiter, ledger, service), the standard library.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol

import grpc

from apis.kubeobjects import Pod
from apis.pod import pod_key
from proto.koord.v1 import shardbinder_pb2 as pb
from proto.koord.v1 import shardbinder_pb2_grpc as pb_grpc
from scheduler.framework.status import Status
from scheduler.shards.arbiter import BindRequest, request_of
from scheduler.shards.ledger import Decision
from scheduler.shards.service import to_message

__all__ = [
    "ArbiterClient",
    "ArbiterUnavailableError",
    "ArbitratedBinder",
    "CoalescingArbiter",
    "LocalFirstArbiter",
]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0
BINDER = "DefaultBinder"


class ArbiterUnavailableError(Exception):
    """No arbiter is known, or it did not answer in time."""


class _Binder(Protocol):
    def bind(self, pod: Pod, node: str) -> Status: ...


class ArbiterClient:
    """Thread-safe. Keeps one channel, replaced when ``resolve()`` names another address. With
    ``credentials`` the channel is TLS; ``metadata()`` (e.g. kube.grpcauth.transport.TokenFile's) is
    sent with every call. ``credentials()`` is called when a channel is made."""

    def __init__(
        self,
        resolve: Callable[[], str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        credentials: Callable[[], grpc.ChannelCredentials] | None = None,
        server_name: str = "",
        metadata: Callable[[], list[tuple[str, str]]] | None = None,
    ) -> None:
        self._resolve = resolve
        self.timeout = timeout
        # TLS (docs/shards.md#security): the arbiter is dialed by pod IP, so its certificate is checked
        # against ``server_name``, the one name every arbiter's certificate carries.
        self._credentials = credentials
        self._options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
        self._metadata = metadata
        self._lock = threading.Lock()
        self._address = ""
        self._channel: grpc.Channel | None = None
        self._stub: Any = None

    def _current(self) -> Any:
        address = self._resolve()
        if not address:
            raise ArbiterUnavailableError("no shard arbiter is known (no leader, or it publishes no address)")
        with self._lock:
            if address != self._address or self._stub is None:
                if self._channel is not None:
                    self._channel.close()
                self._channel, self._stub, self._address = None, None, ""
                if self._credentials is None:
                    self._channel = grpc.insecure_channel(address)
                else:
                    try:  # read when dialing: the CA file may be written after the shard is built
                        creds = self._credentials()
                    except OSError as e:
                        raise ArbiterUnavailableError(f"shard arbiter CA bundle: {e}") from e
                    self._channel = grpc.secure_channel(address, creds, options=self._options)
                self._stub = pb_grpc.ShardBinderStub(self._channel)
                self._address = address
            return self._stub

    def _call(self, method: str, message: Any) -> Any:
        stub = self._current()
        try:
            metadata = self._metadata() if self._metadata is not None else None
        except RuntimeError as e:  # the token file cannot be read
            raise ArbiterUnavailableError(str(e)) from e
        try:
            return getattr(stub, method)(message, timeout=self.timeout, metadata=metadata)
        except grpc.RpcError as e:
            code = e.code() if hasattr(e, "code") else None
            raise ArbiterUnavailableError(f"shard arbiter {self._address}: {code}: {e.details()}") from e

    def bind(self, req: BindRequest) -> Decision:
        r = self._call("Bind", to_message(req))
        return Decision(bool(r.accepted), str(r.reason))

    def bind_batch(self, reqs: Sequence[BindRequest]) -> list[Decision]:
        r = self._call("BindBatch", pb.BindBatchRequest(binds=[to_message(q) for q in reqs]))
        if len(r.results) != len(reqs):
            raise ArbiterUnavailableError(f"shard arbiter answered {len(r.results)} of {len(reqs)} binds")
        return [Decision(bool(x.accepted), str(x.reason)) for x in r.results]

    def forget(self, uid: str, shard: str = "") -> bool:
        return bool(self._call("Forget", pb.ForgetRequest(pod_uid=uid, shard=shard)).forgotten)

    def close(self) -> None:
        with self._lock:
            if self._channel is not None:
                self._channel.close()
            self._channel, self._stub, self._address = None, None, ""


class CoalescingArbiter:
    """``bind`` as ArbiterClient's, but concurrent calls share round trips: one sender thread sends
    whatever binds are waiting as one BindBatch (at most ``max_batch``), so while one call is in flight
    the next ones gather; a lone call goes at once. The scheduler binds from several threads: this is
    what lets one shard bind thousands of pods per second through one arbiter. ``forget`` goes
    straight through. ``close()`` ends the sender thread (calls after it fail)."""

    def __init__(self, client: ArbiterClient, *, max_batch: int = 256) -> None:
        self.client, self.max_batch = client, max_batch
        self._queue: queue.SimpleQueue[tuple[BindRequest, Future[Decision]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.batches = 0

    def bind(self, req: BindRequest) -> Decision:
        fut: Future[Decision] = Future()
        with self._lock:
            if self._closed:
                raise ArbiterUnavailableError("the arbiter client is closed")
            if self._thread is None:
                self._thread = threading.Thread(target=self._send, name="shard-arbiter-sender", daemon=True)
                self._thread.start()
            self._queue.put((req, fut))
        return fut.result()

    def forget(self, uid: str, shard: str = "") -> bool:
        return self.client.forget(uid, shard)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()
        self.client.close()

    def _send(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            try:
                decisions = self.client.bind_batch([r for r, _ in batch])
                for (_, fut), d in zip(batch, decisions, strict=True):
                    fut.set_result(d)
            except Exception as e:
                for _, fut in batch:
                    fut.set_exception(e)
            self.batches += 1
            if stop:
                return


class _Arbiter(Protocol):
    def bind(self, req: BindRequest) -> Decision: ...

    def forget(self, uid: str, shard: str = "") -> bool: ...


class _Ledger(Protocol):
    def bind(self, req: BindRequest) -> Decision: ...

    def forget(self, uid: str) -> bool: ...


class LocalFirstArbiter:
    """The shard hosting the arbiter asks its own ledger in-process (no gRPC round trip); the others,
    and this one when it does not host it, go through ``remote``. ``local()`` is the hosted ledger or
    None (``ArbiterHost.ledger``)."""

    def __init__(self, local: Callable[[], _Ledger | None], remote: _Arbiter) -> None:
        self._local, self.remote = local, remote

    def bind(self, req: BindRequest) -> Decision:
        led = self._local()
        return led.bind(req) if led is not None else self.remote.bind(req)

    def forget(self, uid: str, shard: str = "") -> bool:
        led = self._local()
        return led.forget(uid) if led is not None else self.remote.forget(uid, shard)


class ArbitratedBinder:
    """The Binder of a shard: ``arbiter`` decides, then ``api`` binds (docs/shards.md#transport)."""

    def __init__(self, api: _Binder, arbiter: _Arbiter, shard: str) -> None:
        self.api, self.arbiter, self.shard = api, arbiter, shard
        self.rejections = 0

    def bind(self, pod: Pod, node: str) -> Status:
        req = request_of(pod, node, self.shard)
        where = f"binding {pod_key(pod)} to {node}"
        try:
            decision = self.arbiter.bind(req)
        except ArbiterUnavailableError as e:
            return Status.error(f"{where}: {e}", plugin=BINDER)
        if not decision.accepted:
            self.rejections += 1
            return Status.error(f"{where}: rejected by the shard arbiter: {decision.reason}", plugin=BINDER)
        try:
            st = self.api.bind(pod, node)
        except Exception:
            self._forget(req.uid, where)
            raise
        if not st.is_success():
            self._forget(req.uid, where)
        return st

    def _forget(self, uid: str, where: str) -> None:
        try:
            self.arbiter.forget(uid, self.shard)
        except ArbiterUnavailableError as e:  # the arbiter's TTL gives the room back instead
            log.warning("%s: could not tell the arbiter the bind failed: %s", where, e)
