"""MetricHub gRPC adapter: maps the Report / List / Watch RPCs onto a HubStore, behind an
authentication/authorization interceptor. `serve` starts the hub on the default grpc.aio engine
(manager.metrichub.aioserver, same checks, measured faster) or on this module's thread-pool engine.

With an authenticator, every RPC needs `authorization: Bearer <token>` metadata: no or an invalid
token → UNAUTHENTICATED; the authenticator cannot decide (API server down) → UNAVAILABLE; Report from
a caller whose node cannot be established, or a report for another node (the stream ends at the first
foreign report) → PERMISSION_DENIED; List/Watch by a non-reader → PERMISSION_DENIED. Methods the
interceptor does not know are refused. Without an authenticator the hub is *insecure* (tests and the
embedded loopback hub only), which `serve` logs loudly.

Reports are checked and kept as their wire bytes (manager.metrichub.wire); Watch events are
serialised once per change in the store and sent as the same bytes to every watcher, WatchBatch
messages are those bytes concatenated, and List is assembled from them (the handlers' serializers
pass bytes through).

Imports: grpc, proto.koord.v1, manager.metrichub (store, auth, wire; aioserver lazily from serve).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, Literal, NoReturn, Protocol

import grpc

from manager.metrichub.auth import (
    Authenticator,
    Authorizer,
    AuthUnavailableError,
    DeniedError,
    Identity,
    bearer_token,
)
from manager.metrichub.store import HubStore, RevisionTooOldError, encode_batches
from manager.metrichub.wire import Received, parse_report
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

SERVICE = "koord.v1.MetricHub"
_REPORT, _LIST, _WATCH, _WATCH_BATCH = (f"/{SERVICE}/{m}" for m in ("Report", "List", "Watch", "WatchBatch"))


def _stream_of(request: pb.WatchRequest, context: grpc.ServicerContext) -> tuple[threading.Event, str | None]:
    """A watch stream's liveness (cleared when the client goes) and the node it asks for (None: all)."""
    alive = threading.Event()
    alive.set()
    context.add_callback(alive.clear)
    return alive, (request.node_name if request.HasField("node_name") else None)


def _abort(context: Any, code: grpc.StatusCode, details: str) -> NoReturn:
    context.abort(code, details)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


class MetricHubServicer(pb_grpc.MetricHubServicer):
    """The RPC behaviours (registered by `serve` with its own handler table)."""

    def __init__(self, store: HubStore) -> None:
        self.store = store

    def Report(  # noqa: N802 (gRPC method name)
        self, request_iterator: Iterator[pb.NodeMetricReport | Received], context: grpc.ServicerContext
    ) -> pb.ReportAck:
        accepted = 0
        last = 0
        for got in request_iterator:
            try:
                if isinstance(got, Received):
                    last = self.store.put_raw(got.node, got.raw)
                else:
                    last = self.store.put(got)
            except ValueError as e:
                _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"report {accepted + 1}: {e}")
            accepted += 1
        return pb.ReportAck(accepted=accepted, last_revision=last)

    def List(self, request: pb.ListRequest, context: grpc.ServicerContext) -> bytes:  # type: ignore[override]  # noqa: N802
        """The serialised ListResponse (served with a pass-through serializer)."""
        return self.store.list_encoded(request.node_name if request.HasField("node_name") else None)

    def Watch(  # type: ignore[override]  # noqa: N802 (bytes: served with a pass-through serializer)
        self, request: pb.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Yields serialised NodeMetricEvents (see the module docstring)."""
        alive, node = _stream_of(request, context)
        try:
            with self.store.watching():
                yield from self.store.watch_encoded(request.since_revision, node, alive)
        except RevisionTooOldError as e:
            _abort(context, grpc.StatusCode.OUT_OF_RANGE, str(e))

    def WatchBatch(  # type: ignore[override]  # noqa: N802 (bytes, as Watch)
        self, request: pb.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Yields serialised NodeMetricEventBatches: what is new each time the stream catches up."""
        alive, node = _stream_of(request, context)
        store = self.store
        try:
            with store.watching():
                changes, cursor = store.start(request.since_revision, node)
                while alive.is_set():
                    yield from encode_batches(changes)
                    changes, cursor = store.wait_tail(cursor, node, 0.5)
        except RevisionTooOldError as e:
            _abort(context, grpc.StatusCode.OUT_OF_RANGE, str(e))


def _passthrough(data: bytes) -> bytes:
    return data


def _handler(servicer: MetricHubServicer) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Report": grpc.stream_unary_rpc_method_handler(
                servicer.Report,
                request_deserializer=parse_report,
                response_serializer=pb.ReportAck.SerializeToString,
            ),
            "List": grpc.unary_unary_rpc_method_handler(
                servicer.List,
                request_deserializer=pb.ListRequest.FromString,
                response_serializer=_passthrough,
            ),
            "Watch": grpc.unary_stream_rpc_method_handler(
                servicer.Watch,
                request_deserializer=pb.WatchRequest.FromString,
                response_serializer=_passthrough,
            ),
            "WatchBatch": grpc.unary_stream_rpc_method_handler(
                servicer.WatchBatch,
                request_deserializer=pb.WatchRequest.FromString,
                response_serializer=_passthrough,
            ),
        },
    )


class AuthInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Authenticates every call and applies the Authorizer (see the module docstring). The checks
    run in the call's worker thread, never in the server's polling thread."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer

    def identity(self, context: Any) -> Identity:
        token = bearer_token(context.invocation_metadata())
        if not token:
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, "missing 'authorization: Bearer <token>'")
        try:
            ident = self.authenticator.authenticate(token)
        except AuthUnavailableError as e:
            _abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot authenticate now: {e}")
        if ident is None:
            _abort(context, grpc.StatusCode.UNAUTHENTICATED, "invalid bearer token")
        return ident

    def _reporter(self, context: Any) -> tuple[Identity, str]:
        ident = self.identity(context)
        try:
            return ident, self.authorizer.node_of(ident)
        except DeniedError as e:
            log.info("MetricHub: Report refused: %s", e)
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))
        except AuthUnavailableError as e:
            _abort(context, grpc.StatusCode.UNAVAILABLE, f"cannot authorise now: {e}")

    def _reader(self, context: Any) -> None:
        ident = self.identity(context)
        try:
            self.authorizer.reader(ident)
        except DeniedError as e:
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))

    def intercept_service(self, continuation: Callable[[Any], Any], details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method
        if method == _REPORT:
            inner = handler.stream_unary

            def report(requests: Iterator[Received], context: Any) -> Any:
                ident, node = self._reporter(context)
                return inner(_own_node(requests, ident, node, context), context)

            return grpc.stream_unary_rpc_method_handler(
                report, handler.request_deserializer, handler.response_serializer
            )
        if method == _LIST:
            unary = handler.unary_unary

            def list_(request: Any, context: Any) -> Any:
                self._reader(context)
                return unary(request, context)

            return grpc.unary_unary_rpc_method_handler(
                list_, handler.request_deserializer, handler.response_serializer
            )
        if method in (_WATCH, _WATCH_BATCH):
            stream = handler.unary_stream

            def watch(request: Any, context: Any) -> Any:
                self._reader(context)
                yield from stream(request, context)

            return grpc.unary_stream_rpc_method_handler(
                watch, handler.request_deserializer, handler.response_serializer
            )

        def refuse(request: Any, context: Any) -> Any:
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, f"method {method} is not allowed")

        return grpc.unary_unary_rpc_method_handler(refuse)


def _own_node(requests: Iterator[Received], ident: Identity, node: str, context: Any) -> Iterator[Received]:
    for got in requests:
        if got.node != node:
            other = got.node
            msg = f"{ident.user!r} is bound to node {node!r} and may not report for node {other!r}"
            log.warning("MetricHub: Report refused: %s", msg)
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, msg)
        yield got


def _warn_insecure(address: str) -> None:
    host = address.rsplit(":", 1)[0].strip("[]")
    loopback = host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")
    level = logging.WARNING if loopback else logging.ERROR
    log.log(level, "MetricHub on %s is INSECURE: no authenticator (tests / embedded loopback only)", address)


class StoppableServer(Protocol):
    """What serve() returns: grpc.Server (threads engine) or aioserver.HubServer (aio engine)."""

    def stop(self, grace: float | None) -> threading.Event: ...


def serve(
    store: HubStore,
    address: str = "127.0.0.1:0",
    max_workers: int = 64,
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    engine: Literal["aio", "threads"] = "aio",
) -> tuple[StoppableServer, int]:
    """Starts a MetricHub server on address; returns the server and the bound port.

    engine "aio" (default): grpc.aio in a background thread (manager.metrichub.aioserver), about
    twice the throughput at a fraction of the latency; `max_workers` sizes its pool for blocking
    authentication. "threads": grpc's thread-pool server with AuthInterceptor; `max_workers` bounds
    the concurrent RPCs (each open Watch or Report stream holds a worker). Without an authenticator the
    hub is insecure (any caller may report for any node and read everything)."""
    if engine == "aio":
        from manager.metrichub.aioserver import serve_aio

        return serve_aio(
            store, address, authenticator=authenticator, authorizer=authorizer, blocking_workers=max_workers
        )
    interceptors: list[Any] = []
    if authenticator is not None:
        interceptors.append(AuthInterceptor(authenticator, authorizer or Authorizer()))
    else:
        _warn_insecure(address)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="metrichub"),
        interceptors=interceptors,
    )
    server.add_generic_rpc_handlers((_handler(MetricHubServicer(store)),))
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"MetricHub: cannot bind {address}")
    server.start()
    return server, port
