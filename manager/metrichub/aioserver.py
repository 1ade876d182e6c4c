"""MetricHub on grpc.aio: the same RPCs and checks as manager.metrichub.server, served by one asyncio
event loop in a background thread. Python's threaded gRPC server pays several GIL hand-offs per
streamed message (poller thread → handler thread → watcher threads); here a report is checked
(manager.metrichub.wire), stored as bytes and fanned out to every watcher within the loop.

Watchers wake together at most once per `batch_window` (default 5 ms) after a change, whatever the
number of changes: a WatchBatch watcher then gets one message with everything new, a Watch watcher
one message per change. Token authentication and the pod lookup run once per RPC (not per report);
List runs in a small thread pool. Reports for another node end the stream with PERMISSION_DENIED;
missing/invalid tokens give UNAUTHENTICATED (see manager.metrichub.server).

The server raises grpc core's pending-call limits (1,000 soft / 3,000 hard by default): the aio
server accepts new calls one at a time, and with the defaults a burst of thousands of agents
(re)connecting at once, e.g. after a manager restart, has a third of its streams cancelled.

Imports: asyncio, grpc, proto.koord.v1, manager.metrichub (auth, store, server, wire).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent import futures
from typing import Any, NoReturn, TypeVar

import grpc
import grpc.aio

from manager.metrichub.auth import (
    Authenticator,
    Authorizer,
    AuthUnavailableError,
    DeniedError,
    Identity,
    bearer_token,
)
from manager.metrichub.server import SERVICE, _passthrough, _warn_insecure
from manager.metrichub.store import HubStore, RevisionTooOldError, encode_batches, encoded_events
from manager.metrichub.wire import Received, parse_report
from proto.koord.v1 import metrichub_pb2 as pb

log = logging.getLogger(__name__)
T = TypeVar("T")
_Group = list[Any]  # changes of the store (manager.metrichub.store), in revision order

DEFAULT_BATCH_WINDOW = 0.005
SERVER_OPTIONS = (
    ("grpc.server.max_pending_requests", 50_000),
    ("grpc.server.max_pending_requests_hard_limit", 100_000),
)


async def _abort(context: Any, code: grpc.StatusCode, details: str) -> NoReturn:
    await context.abort(code, details)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


class AsyncHub:
    """The RPC behaviours on the event loop `loop`."""

    def __init__(
        self,
        store: HubStore,
        loop: asyncio.AbstractEventLoop,
        authenticator: Authenticator | None,
        authorizer: Authorizer,
        pool: futures.Executor,
        batch_window: float = DEFAULT_BATCH_WINDOW,
    ) -> None:
        self.store = store
        self.loop = loop
        self.authenticator = authenticator
        self.authorizer = authorizer
        self._pool = pool
        self._window = batch_window
        self._changed = asyncio.Event()
        self._wake_pending = False
        self._loop_thread = threading.get_ident()
        store.add_listener(self._on_change)

    # --- change notification: watchers wake once per batch window, whatever the number of changes
    def _on_change(self) -> None:
        if threading.get_ident() == self._loop_thread:
            self._arm()
        else:
            self.loop.call_soon_threadsafe(self._arm)

    def _arm(self) -> None:
        if not self._wake_pending:
            self._wake_pending = True
            self.loop.call_later(self._window, self._wake)

    def _wake(self) -> None:
        self._wake_pending = False
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.loop.run_in_executor(self._pool, fn, *args)

    # --- authentication and authorization -------------------------------------------------------
    async def _identity(self, context: Any) -> Identity:
        assert self.authenticator is not None
        token = bearer_token(context.invocation_metadata())
        if not token:
            await _abort(context, grpc.StatusCode.UNAUTHENTICATED, "missing 'authorization: Bearer <token>'")
        try:
            ident = await self._blocking(self.authenticator.authenticate, token)
        except AuthUnavailableError as e:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot authenticate now: {e}")
        if ident is None:
            await _abort(context, grpc.StatusCode.UNAUTHENTICATED, "invalid bearer token")
        return ident

    async def _reader(self, context: Any) -> None:
        if self.authenticator is None:
            return
        ident = await self._identity(context)
        try:
            self.authorizer.reader(ident)
        except DeniedError as e:
            await _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))

    async def _reporter(self, context: Any) -> tuple[Identity, str] | None:
        if self.authenticator is None:
            return None
        ident = await self._identity(context)
        try:
            return ident, await self._blocking(self.authorizer.node_of, ident)
        except DeniedError as e:
            log.info("MetricHub: Report refused: %s", e)
            await _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))
        except AuthUnavailableError as e:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot authorise now: {e}")

    # --- RPCs -----------------------------------------------------------------------------------
    async def report(self, requests: AsyncIterator[Received], context: Any) -> pb.ReportAck:
        bound = await self._reporter(context)
        accepted = 0
        last = 0
        put = self.store.put_raw
        async for node, raw in requests:
            if bound is not None and node != bound[1]:
                msg = f"{bound[0].user!r} is bound to node {bound[1]!r} and may not report for node {node!r}"
                log.warning("MetricHub: Report refused: %s", msg)
                await _abort(context, grpc.StatusCode.PERMISSION_DENIED, msg)
            try:
                last = put(node, raw)
            except ValueError as e:
                await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"report {accepted + 1}: {e}")
            accepted += 1
        return pb.ReportAck(accepted=accepted, last_revision=last)

    async def list(self, request: pb.ListRequest, context: Any) -> bytes:
        await self._reader(context)
        return await self._blocking(
            self.store.list_encoded, request.node_name if request.HasField("node_name") else None
        )

    async def watch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[bytes]:
        """Serialised NodeMetricEvents, one per message."""
        async for changes in self._follow(request, context):
            for data in encoded_events(changes):
                yield data

    async def watch_batch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[bytes]:
        """Serialised NodeMetricEventBatches: everything new at each wake-up (split at MAX_BATCH_BYTES)."""
        async for changes in self._follow(request, context):
            for batch in encode_batches(changes):
                yield batch

    async def _follow(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[_Group]:
        """The changes a watch sends, in non-empty groups: the backlog, then what each wake-up finds."""
        await self._reader(context)
        node = request.node_name if request.HasField("node_name") else None
        try:
            with self.store.watching():
                changes, cursor = self.store.start(request.since_revision, node)
                while True:
                    if changes:
                        yield changes
                    changed = self._changed
                    changes, cursor = self.store.tail(cursor, node)
                    if not changes:
                        await changed.wait()
        except RevisionTooOldError as e:
            await _abort(context, grpc.StatusCode.OUT_OF_RANGE, str(e))

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Report": grpc.stream_unary_rpc_method_handler(
                    self.report, parse_report, pb.ReportAck.SerializeToString
                ),
                "List": grpc.unary_unary_rpc_method_handler(
                    self.list, pb.ListRequest.FromString, _passthrough
                ),
                "Watch": grpc.unary_stream_rpc_method_handler(
                    self.watch, pb.WatchRequest.FromString, _passthrough
                ),
                "WatchBatch": grpc.unary_stream_rpc_method_handler(
                    self.watch_batch, pb.WatchRequest.FromString, _passthrough
                ),
            },
        )


class HubServer:
    """A grpc.aio server running in its own thread, stopped like a grpc.Server."""

    def __init__(self, loop: asyncio.AbstractEventLoop, server: Any, thread: threading.Thread) -> None:
        self._loop = loop
        self._server = server
        self._thread = thread

    def stop(self, grace: float | None) -> threading.Event:
        """Stops the server (cancelling open RPCs after `grace` seconds); the event is set when done."""
        done = threading.Event()
        if self._server is None or self._loop.is_closed() or not self._loop.is_running():
            done.set()
            return done
        fut = asyncio.run_coroutine_threadsafe(self._server.stop(grace), self._loop)

        def finished(_: object) -> None:
            # Let go of the stopped grpc.aio server: grpc's poller thread runs while any aio server lives.
            self._server = None
            self._loop.call_soon_threadsafe(self._loop.stop)
            done.set()

        fut.add_done_callback(finished)
        return done

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def serve_aio(
    store: HubStore,
    address: str = "127.0.0.1:0",
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    blocking_workers: int = 8,
    batch_window: float = DEFAULT_BATCH_WINDOW,
) -> tuple[HubServer, int]:
    """Starts the MetricHub on grpc.aio in a background thread; returns the server and the bound port."""
    if authenticator is None:
        _warn_insecure(address)
    loop = asyncio.new_event_loop()
    pool = futures.ThreadPoolExecutor(max_workers=blocking_workers, thread_name_prefix="metrichub-auth")
    started: futures.Future[tuple[Any, int]] = futures.Future()

    async def start() -> tuple[Any, int]:
        hub = AsyncHub(store, loop, authenticator, authorizer or Authorizer(), pool, batch_window)
        server = grpc.aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers((hub.handler(),))
        port = server.add_insecure_port(address)
        if port == 0:
            raise OSError(f"MetricHub: cannot bind {address}")
        await server.start()
        return server, port

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            started.set_result(loop.run_until_complete(start()))
        except BaseException as e:
            started.set_exception(e)
            loop.close()
            return
        loop.run_forever()
        loop.close()
        pool.shutdown(wait=False)

    thread = threading.Thread(target=run, name="metrichub-aio", daemon=True)
    thread.start()
    server, port = started.result()
    return HubServer(loop, server, thread), port
