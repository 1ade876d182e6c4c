"""The MetricHub gRPC server: the Report / List / Watch / WatchBatch RPCs over a HubStore, served by
one grpc.aio event loop in a background thread (`serve`), with TLS when given credentials.

Authentication (with an authenticator): every RPC needs `authorization: Bearer <token>` metadata; no
or an invalid token → UNAUTHENTICATED; the authenticator cannot decide (API server down), or too many
TokenReviews run already → UNAVAILABLE; a peer address with too many failed authentications →
RESOURCE_EXHAUSTED (manager.metrichub.authgate); Report from a caller whose node cannot be established,
or a report for another node (the stream ends at the first foreign report) → PERMISSION_DENIED;
List/Watch by a non-reader → PERMISSION_DENIED. Cached tokens are answered on the loop; a TokenReview
and the pod lookup run once per RPC (not per report) in a small thread pool, as does List. Without an
authenticator the hub is *insecure* (tests and the embedded loopback hub only), which `serve` logs
loudly. Bearer tokens travel in clear without TLS, which `serve` logs too when the hub listens beyond
loopback (docs/install.md, "TLS for the MetricHub").

Each report goes through manager.metrichub.ingest: bounded in size and rate per node, parsed, bound to
the caller's node and checked with the rule every consumer applies (apis.reportcheck), so a report
a scheduler could not decode never reaches the store; a refused report ends its stream with the status
the ingest names (docs/rules/manager.md#metrichub-limits). A report is kept as the bytes the agent sent;
events, batches and List answers are built by the store around those bytes (manager.metrichub.store)
and sent as they are (the handlers' serializers pass bytes through). gRPC itself refuses a message
longer than SERVER_MAX_RECEIVE_BYTES. List pages when asked to (ListRequest.limit).

Watchers wake together at most once per `batch_window` (default 5 ms) after a change, whatever the
number of changes: a WatchBatch watcher then gets one message with everything new, a Watch watcher
one message per change. A threaded gRPC server paid several GIL hand-offs per streamed message
(poller thread → handler thread → watcher threads); here a report is checked, stored and fanned out
within the loop. The server raises grpc core's pending-call limits (1,000 soft / 3,000 hard by
default): the aio server accepts new calls one at a time, and with the defaults a burst of thousands
of agents (re)connecting at once, e.g. after a manager restart, has a third of its streams cancelled.

Imports: asyncio, grpc, apis.reportlimits, kube.grpcauth.transport, proto.koord.v1, manager.metrichub
(auth, authgate, hubserver, ingest, limits, store).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable
from concurrent import futures
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import grpc
import grpc.aio

from apis.reportlimits import SERVER_MAX_RECEIVE_BYTES
from kube.grpcauth.transport import server_credentials
from manager.metrichub.auth import (
    Authenticator,
    Authorizer,
    AuthUnavailableError,
    DeniedError,
    Identity,
    bearer_token,
)
from manager.metrichub.authgate import AuthGate
from manager.metrichub.hubserver import HubServer
from manager.metrichub.ingest import Bound, Ingest
from manager.metrichub.limits import HubLimits, RefusedError
from manager.metrichub.store import Changes, HubStore, RevisionTooOldError, encode_batches, encoded_events
from proto.koord.v1 import metrichub_pb2 as pb

log = logging.getLogger(__name__)
T = TypeVar("T")

SERVICE = "koord.v1.MetricHub"
DEFAULT_BATCH_WINDOW = 0.005
SERVER_OPTIONS = (
    ("grpc.server.max_pending_requests", 50_000),
    ("grpc.server.max_pending_requests_hard_limit", 100_000),
    ("grpc.max_receive_message_length", SERVER_MAX_RECEIVE_BYTES),
)
# Refusal logs: the first of each reason, then at most one per reason and interval (a flood is counted).
_LOG_INTERVAL = 30.0


def _passthrough(data: bytes) -> bytes:
    return data


def tls_credentials(cert_file: Path, key_file: Path) -> grpc.ServerCredentials:
    """Server credentials from a PEM certificate chain and its PEM private key."""
    return server_credentials(cert_file, key_file)


def _is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


async def _abort(context: Any, code: grpc.StatusCode, details: str) -> NoReturn:
    await context.abort(code, details)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


async def _refused(context: Any, e: RefusedError, prefix: str = "") -> NoReturn:
    await _abort(context, getattr(grpc.StatusCode, e.code), prefix + e.details)


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
        limits: HubLimits | None = None,
        checker: futures.Executor | None = None,
    ) -> None:
        self.store = store
        self.loop = loop
        self.authenticator = authenticator
        self.authorizer = authorizer
        self._pool = pool
        self.limits = limits = limits or HubLimits()
        self.gate = AuthGate(authenticator, limits, pool, store.auth_refused) if authenticator else None
        self.ingest = Ingest(store, limits, store.refused, checker or pool)
        self._logged: dict[str, float] = {}
        self._window = batch_window
        self._changed = asyncio.Event()
        self._wake_pending = False
        self._loop_thread = threading.get_ident()
        # The batches of the latest wake-up: watchers that caught up together share them.
        self._shared: tuple[tuple[int, int], list[bytes]] = ((0, 0), [])
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
    def _log_refusal(self, what: str, e: RefusedError) -> None:
        now = self.loop.time()
        if now - self._logged.get(e.reason, -_LOG_INTERVAL) >= _LOG_INTERVAL:
            self._logged[e.reason] = now
            log.warning(
                "MetricHub: %s refused (%s; further ones counted only): %s", what, e.reason, e.details
            )

    async def _identity(self, context: Any) -> Identity:
        assert self.gate is not None
        token = bearer_token(context.invocation_metadata())
        try:
            return await self.gate.identity(token, context.peer() or "")
        except RefusedError as e:
            self._log_refusal("call", e)
            await _refused(context, e)

    async def _reader(self, context: Any) -> None:
        if self.authenticator is None:
            return
        ident = await self._identity(context)
        try:
            self.authorizer.reader(ident)
        except DeniedError as e:
            await _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))

    async def _reporter(self, context: Any) -> Bound | None:
        if self.authenticator is None:
            return None
        ident = await self._identity(context)
        try:
            return ident.user, await self._blocking(self.authorizer.node_of, ident)
        except DeniedError as e:
            log.info("MetricHub: Report refused: %s", e)
            await _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))
        except AuthUnavailableError as e:
            await _abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot authorise now: {e}")

    # --- RPCs -----------------------------------------------------------------------------------
    async def report(self, requests: AsyncIterator[bytes], context: Any) -> pb.ReportAck:
        bound = await self._reporter(context)
        accepted = 0
        last = 0
        accept = self.ingest.accept
        # Nothing may keep a refused report's bytes alive until the next full cyclic collection (an
        # aborted call's frames sit in reference cycles): a flood of refused 1 MiB reports would grow
        # the heap by their sum. So no traceback keeps accept()'s frame, our frame drops the bytes, and
        # grpc's message generator, which holds the last message, is closed.
        messages = aiter(requests)
        try:
            async for raw in messages:
                try:
                    last = await accept(raw, bound)
                    accepted += 1
                    continue
                except RefusedError as e:
                    refusal = e.with_traceback(None)
                del raw
                self._log_refusal("Report", refusal)
                await _refused(context, refusal, f"report {accepted + 1}: ")
        finally:
            close = getattr(messages, "aclose", None)
            if close is not None:
                await close()
        return pb.ReportAck(accepted=accepted, last_revision=last)

    async def list(self, request: pb.ListRequest, context: Any) -> bytes:
        await self._reader(context)
        node = request.node_name if request.HasField("node_name") else None
        try:
            return await self._blocking(self.store.list_encoded, node, request.limit, request.page_token)
        except ValueError as e:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(e))

    async def watch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[bytes]:
        """Serialised NodeMetricEvents, one per message."""
        async for changes, _ in self._follow(request, context):
            for data in encoded_events(changes):
                yield data

    async def watch_batch(self, request: pb.WatchRequest, context: Any) -> AsyncIterator[bytes]:
        """Serialised NodeMetricEventBatches: everything new at each wake-up (split at MAX_BATCH_BYTES)."""
        async for changes, span in self._follow(request, context):
            if span is None:  # a replay, or one node's changes: this watcher's own
                for batch in encode_batches(changes):
                    yield batch
                continue
            if self._shared[0] != span:
                self._shared = (span, list(encode_batches(changes)))
            for batch in self._shared[1]:
                yield batch

    async def _follow(
        self, request: pb.WatchRequest, context: Any
    ) -> AsyncIterator[tuple[Changes, tuple[int, int] | None]]:
        """The changes a watch sends, in non-empty groups: the backlog, then what each wake-up finds,
        each with the revisions it spans (after, up to) when it holds every node's changes."""
        await self._reader(context)
        node = request.node_name if request.HasField("node_name") else None
        try:
            with self.store.watching():
                changes, cursor = self.store.start(request.since_revision, node)
                span: tuple[int, int] | None = None
                while True:
                    if changes:
                        yield changes, span
                    changed = self._changed
                    changes, after = self.store.tail(cursor, node)
                    span = (cursor, after) if node is None else None
                    cursor = after
                    if not changes:
                        await changed.wait()
        except RevisionTooOldError as e:
            await _abort(context, grpc.StatusCode.OUT_OF_RANGE, str(e))

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Report": grpc.stream_unary_rpc_method_handler(
                    self.report, _passthrough, pb.ReportAck.SerializeToString
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


def _warn_unprotected(address: str, authenticated: bool, tls: bool) -> None:
    loopback = _is_loopback(address)
    if not authenticated:
        level = logging.WARNING if loopback else logging.ERROR
        log.log(
            level, "MetricHub on %s is INSECURE: no authenticator (tests / embedded loopback only)", address
        )
    elif not tls and not loopback:
        log.warning(
            "MetricHub on %s serves without TLS: bearer tokens travel in clear "
            "(set --hub-tls-cert/--hub-tls-key or --hub-tls-secret)",
            address,
        )


def serve(
    store: HubStore,
    address: str = "127.0.0.1:0",
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    credentials: grpc.ServerCredentials | None = None,
    blocking_workers: int = 8,
    batch_window: float = DEFAULT_BATCH_WINDOW,
    limits: HubLimits | None = None,
) -> tuple[HubServer, int]:
    """Starts the MetricHub in a background thread; returns the server and the bound port. With
    `credentials` (tls_credentials) the port serves TLS only. `blocking_workers` sizes the pool for
    authentication and List; large reports are checked on one thread of their own."""
    _warn_unprotected(address, authenticator is not None, credentials is not None)
    loop = asyncio.new_event_loop()
    pool = futures.ThreadPoolExecutor(max_workers=blocking_workers, thread_name_prefix="metrichub-auth")
    checker = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrichub-check")
    # A queue, not a Future: a Future would keep the grpc.aio server alive for as long as the thread's
    # closure lives, and the server must be freed on the loop thread while the loop still runs.
    started: queue.SimpleQueue[tuple[Any, int] | BaseException] = queue.SimpleQueue()
    finished = threading.Event()

    async def start() -> tuple[Any, int]:
        hub = AsyncHub(
            store, loop, authenticator, authorizer or Authorizer(), pool, batch_window, limits, checker
        )
        server = grpc.aio.server(options=SERVER_OPTIONS)
        server.add_generic_rpc_handlers((hub.handler(),))
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
        if port == 0:
            raise OSError(f"MetricHub: cannot bind {address}")
        await server.start()
        return server, port

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            try:
                started.put(loop.run_until_complete(start()))
            except BaseException as e:
                started.put(e)
                return
            loop.run_forever()
        finally:
            loop.close()
            pool.shutdown(wait=False)
            checker.shutdown(wait=False)
            finished.set()

    thread = threading.Thread(target=run, name="metrichub-aio", daemon=True)
    thread.start()
    outcome = started.get()
    if isinstance(outcome, BaseException):
        raise outcome
    server, port = outcome
    return HubServer(loop, server, thread, finished), port
