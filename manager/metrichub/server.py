"""MetricHub gRPC adapter: maps the Report / List / Watch RPCs onto a HubStore.

Caller authentication (TokenReview / static tokens) and the own-node check are added by the
manager's hub issue; this module is the transport only. Imports: grpc, proto.koord.v1,
manager.metrichub.store.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc

from manager.metrichub.store import HubStore, RevisionTooOldError
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc


class MetricHubServicer(pb_grpc.MetricHubServicer):
    def __init__(self, store: HubStore) -> None:
        self.store = store

    def Report(  # noqa: N802 (gRPC method name)
        self, request_iterator: Iterator[pb.NodeMetricReport], context: grpc.ServicerContext
    ) -> pb.ReportAck:
        accepted = 0
        last = 0
        for report in request_iterator:
            try:
                last = self.store.put(report)
            except ValueError as e:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"report {accepted + 1}: {e}")
            accepted += 1
        return pb.ReportAck(accepted=accepted, last_revision=last)

    def List(self, request: pb.ListRequest, context: grpc.ServicerContext) -> pb.ListResponse:  # noqa: N802
        return self.store.list(request.node_name if request.HasField("node_name") else None)

    def Watch(  # noqa: N802
        self, request: pb.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.NodeMetricEvent]:
        alive = threading.Event()
        alive.set()
        context.add_callback(alive.clear)
        node = request.node_name if request.HasField("node_name") else None
        try:
            yield from self.store.watch(request.since_revision, node, alive)
        except RevisionTooOldError as e:
            context.abort(grpc.StatusCode.OUT_OF_RANGE, str(e))


def serve(store: HubStore, address: str = "127.0.0.1:0", max_workers: int = 64) -> tuple[grpc.Server, int]:
    """Starts a MetricHub server on address; returns the server and the bound port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="metrichub"))
    pb_grpc.add_MetricHubServicer_to_server(MetricHubServicer(store), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"MetricHub: cannot bind {address}")
    server.start()
    return server, port
