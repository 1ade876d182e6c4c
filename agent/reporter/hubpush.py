"""Pushes the koordlet's reports to the MetricHub (docs/rules/koordlet.md#pushing-reports-to-the-metrichub).

Each push is one short ``Report`` stream carrying one report, over one long-lived channel, so every
report gets its own acknowledgement and a failure is known at once. While the hub is unreachable only the
latest report is kept (an older one is worthless once a newer exists) and it is retried on the next push;
the channel tries to reconnect at least every 5 s, so a hub that is back gets it within seconds.
A bearer token (the pod's ServiceAccount token, or a static token in local mode) is sent on every call;
the file is re-read on each push so a rotated token is picked up. With a CA bundle (``--hub-ca``) the
channel is TLS and the hub's certificate must chain to it; without one the channel is plaintext and
the token travels in clear, which is logged when the hub is not on loopback (docs/install.md).

Imports: standard library, grpc, kube.grpcauth.transport (token file, CA credentials), proto.koord.v1.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import grpc

from kube.grpcauth.transport import TokenFile, channel_credentials
from proto.koord.v1 import metrichub_pb2 as pb
from proto.koord.v1 import metrichub_pb2_grpc as pb_grpc

__all__ = ["HubPusher", "PushResult"]

log = logging.getLogger(__name__)

CALL_TIMEOUT_SECONDS = 5.0
RECONNECT_BACKOFF_MS = (1_000, 5_000)
"""The channel's reconnection backoff, first and longest: a hub back is reached within 5 s."""


class PushResult:
    OK = "succeeded"
    FAILED = "failed"


class HubPusher:
    """Latest-only buffered pusher; ``push`` is called by the reporter loop, never concurrently."""

    def __init__(
        self,
        target: str,
        token_file: Path | None = None,
        on_result: Callable[[str, str], None] | None = None,
        timeout: float = CALL_TIMEOUT_SECONDS,
        ca_file: Path | None = None,
    ) -> None:
        self.target = target
        self._token_file = token_file
        self._on_result = on_result
        self._timeout = timeout
        options = [
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.enable_retries", 0),
            # gRPC spaces reconnection attempts up to 120 s apart while the hub is down, and a push
            # fails at once between them: a hub back after a minute waited up to ~half a minute more.
            ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
            ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
        ]
        if ca_file is not None:
            credentials = channel_credentials(ca_file)
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            if token_file is not None and not _loopback(target):
                log.warning("MetricHub %s: no --hub-ca, the bearer token travels in clear", target)
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.MetricHubStub(self._channel)
        self._pending: pb.NodeMetricReport | None = None
        self._lock = threading.Lock()
        self.last_error: str | None = None

    def _metadata(self) -> list[tuple[str, str]]:
        return [] if self._token_file is None else TokenFile(self._token_file, "hub token file").metadata()

    @property
    def pending(self) -> pb.NodeMetricReport | None:
        """The report waiting to be delivered (None when everything offered was acknowledged)."""
        return self._pending

    def push(self, report: pb.NodeMetricReport | None = None) -> bool:
        """Offer ``report`` (replacing any undelivered older one) and try to deliver the latest.

        Returns True when the hub acknowledged it; on failure the report stays pending.
        """
        with self._lock:
            if report is not None:
                self._pending = report
            latest = self._pending
            if latest is None:
                return True
            try:
                ack = self._stub.Report(iter([latest]), timeout=self._timeout, metadata=self._metadata())
            except (grpc.RpcError, RuntimeError) as e:
                self.last_error = _describe(e)
                log.warning(
                    "MetricHub %s: report not delivered (kept for the next push): %s",
                    self.target,
                    self.last_error,
                )
                self._notify(PushResult.FAILED)
                return False
            if ack.accepted < 1:
                self.last_error = "hub accepted no report"
                self._notify(PushResult.FAILED)
                return False
            if self._pending is latest:
                self._pending = None
            self.last_error = None
            self._notify(PushResult.OK)
            return True

    def _notify(self, result: str) -> None:
        if self._on_result is not None:
            self._on_result("hub", result)

    def close(self) -> None:
        self._channel.close()


def _loopback(target: str) -> bool:
    host = target.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _describe(e: BaseException) -> str:
    if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call):
        return f"{e.code().name}: {e.details()}"
    return str(e)
