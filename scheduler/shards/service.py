"""The arbiter's gRPC service, ``koord.v1.ShardBinder`` (docs/shards.md#transport): Bind, BindBatch and
Forget over a Ledger (scheduler.shards.ledger), served by a threaded gRPC server that the shard holding
the group's leader Lease starts (``serve``) and stops when it stops leading. The ledger decides; this
module only translates messages; authentication is an interceptor (docs/shards.md#security).
Imports: grpc, proto.koord.v1 (shardbinder), scheduler.shards (arbiter, ledger), the standard library.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent import futures
from typing import Any

import grpc

from proto.koord.v1 import shardbinder_pb2 as pb
from proto.koord.v1 import shardbinder_pb2_grpc as pb_grpc
from scheduler.shards.arbiter import BindRequest
from scheduler.shards.ledger import Decision, Ledger

__all__ = ["ShardBinderServer", "from_message", "serve", "to_message"]

log = logging.getLogger(__name__)

SERVER_OPTIONS = (
    ("grpc.server.max_pending_requests", 10_000),
    ("grpc.max_receive_message_length", 16 << 20),
)
MAX_BATCH = 10_000


def to_message(req: BindRequest) -> pb.BindRequest:
    return pb.BindRequest(
        pod_uid=req.uid, pod_key=req.key, node=req.node, requests=dict(req.requests),
        checked=list(req.checked), shard=req.shard,
    )  # fmt: skip


def from_message(m: pb.BindRequest) -> BindRequest:
    return BindRequest(m.pod_uid, m.pod_key, m.node, dict(m.requests), tuple(m.checked), m.shard)


def _response(d: Decision) -> pb.BindResponse:
    return pb.BindResponse(accepted=d.accepted, reason=d.reason)


class _Servicer(pb_grpc.ShardBinderServicer):
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def _decide(self, m: pb.BindRequest) -> Decision:
        req = from_message(m)
        d = self.ledger.bind(req)
        if not d.accepted:
            log.debug("shard %s: bind of %s to %s rejected: %s", req.shard, req.key, req.node, d.reason)
        return d

    def Bind(self, request: pb.BindRequest, context: Any) -> pb.BindResponse:  # noqa: N802  (gRPC's name)
        return _response(self._decide(request))

    def BindBatch(self, request: pb.BindBatchRequest, context: Any) -> pb.BindBatchResponse:  # noqa: N802
        if len(request.binds) > MAX_BATCH:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{len(request.binds)} binds: at most {MAX_BATCH}"
            )
        return pb.BindBatchResponse(results=[_response(self._decide(m)) for m in request.binds])

    def Forget(self, request: pb.ForgetRequest, context: Any) -> pb.ForgetResponse:  # noqa: N802
        return pb.ForgetResponse(forgotten=self.ledger.forget(request.pod_uid))


class ShardBinderServer:
    """A running ShardBinder: ``port`` is the bound port; ``stop()`` ends it (and its threads)."""

    def __init__(self, server: Any, pool: futures.ThreadPoolExecutor, port: int) -> None:
        self._server, self._pool, self.port = server, pool, port

    def stop(self, grace: float | None = 1.0) -> None:
        self._server.stop(grace).wait()
        self._pool.shutdown(wait=True)


def serve(
    ledger: Ledger,
    address: str = "127.0.0.1:0",
    *,
    workers: int = 4,
    credentials: grpc.ServerCredentials | None = None,
    interceptors: Sequence[Any] = (),
) -> ShardBinderServer:
    """Starts the ShardBinder over ``ledger`` on ``address`` (TLS with ``credentials``; every call
    through ``interceptors`` first, e.g. kube.grpcauth.transport.TokenAuthInterceptor)."""
    pool = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="shardbinder")
    server = grpc.server(pool, options=SERVER_OPTIONS, interceptors=list(interceptors))
    pb_grpc.add_ShardBinderServicer_to_server(_Servicer(ledger), server)
    port = (
        server.add_insecure_port(address)
        if credentials is None
        else server.add_secure_port(address, credentials)
    )
    if port == 0:
        pool.shutdown(wait=False)
        raise OSError(f"ShardBinder: cannot bind {address}")
    server.start()
    return ShardBinderServer(server, pool, port)
