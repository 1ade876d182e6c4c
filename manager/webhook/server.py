"""koord-manager's admission webhook server: HTTPS on one port, each registered path answered by one
``Handler`` (manager.webhook.admission), plus ``/healthz``.

Every replica serves (the API server calls any endpoint of the Service). A request must be a POST of
``application/json`` to a registered path, at most ``max_body`` bytes (413 beyond: not read, only
up to 256 KiB dropped so the client gets the answer), read within ``request_timeout`` (the socket
timeout, and a deadline for the whole body). A body that is no
AdmissionReview is answered 400; a handler that raises is answered as controller-runtime's
``Errored``: refused with code 500 and the exception's message (the webhook configurations'
failurePolicy decides what the API server does with it). Connections are served by at most
``max_workers`` threads; the TLS handshake runs on the worker, never on the accept loop. The
serving certificate is re-read when its files change (a new SSLContext for new connections; open
ones keep theirs), so manager.webhook.certkeeper or cert-manager can rotate it under a running server.
Metrics on an injected registry: requests by webhook path and result (allowed, denied, error) and a
latency histogram. Start/stop like kube.httpserver.ProbeServer (port 0 picks a free port: ``port``).
Imports: the standard library, prometheus_client, kube.httpserver (parse_addr), manager.webhook.admission.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kube.httpserver import parse_addr
from manager.webhook.admission import AdmissionResponse, Handler, ReviewError, decode_review, errored, review

__all__ = ["CertFiles", "WebhookMetrics", "WebhookServer"]

log = logging.getLogger(__name__)

MAX_BODY = 3 * 1024 * 1024
REQUEST_TIMEOUT = 10.0
MAX_WORKERS = 16
QUEUE_WAIT = 2.0  # how long an accepted connection may wait for a worker before it is closed
DRAIN_LIMIT = 256 * 1024  # of a refused body, read and dropped so that the client gets the answer
DRAIN_TIME = 1.0
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class WebhookMetrics:
    """The server's metrics on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "koord_manager_webhook_requests_total",
            "Admission requests by webhook path and result (allowed, denied, error)",
            ["webhook", "result"],
            registry=registry,
        )
        self.latency = Histogram(
            "koord_manager_webhook_latency_seconds",
            "Time from a request's body being read to its answer being ready",
            ["webhook"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "koord_manager_webhook_requests_in_flight", "Admission requests being answered", registry=registry
        )


class CertFiles:
    """The serving certificate as an SSLContext, rebuilt when ``cert_file`` or ``key_file`` changes.

    A pair that does not load (the two files are replaced one after the other, so a reader may see a
    new certificate with the old key for a moment) keeps the previous context and is retried on the
    next call."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._lock = threading.Lock()
        self._stamp: tuple[object, ...] | None = None
        self._failed: tuple[object, ...] | None = None
        self._context: ssl.SSLContext | None = None
        self.loads = 0

    def _signature(self) -> tuple[object, ...]:
        # The contents, not the mtimes: a rewrite within the file system's timestamp granularity
        # would look unchanged. Two small files per connection cost microseconds.
        return (self.cert_file.read_bytes(), self.key_file.read_bytes())

    def context(self) -> ssl.SSLContext:
        """The current context; ``OSError``/``ssl.SSLError`` only when no pair ever loaded."""
        with self._lock:
            try:
                stamp = self._signature()
            except OSError:
                if self._context is None:
                    raise
                return self._context
            if stamp != self._stamp and stamp != self._failed:
                try:
                    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                    ctx.set_alpn_protocols(["http/1.1"])
                    ctx.load_cert_chain(self.cert_file, self.key_file)
                except (OSError, ssl.SSLError) as e:
                    if self._context is None:
                        raise
                    self._failed = stamp
                    log.warning("webhook certificate %s: %s; serving the previous one", self.cert_file, e)
                else:
                    self._context, self._stamp, self._failed = ctx, stamp, None
                    self.loads += 1
                    log.info("webhook server: serving certificate %s (load %d)", self.cert_file, self.loads)
            assert self._context is not None
            return self._context


class _HTTPServer(HTTPServer):
    """An HTTPServer whose connections run on a bounded pool, the TLS handshake included."""

    daemon_threads = True

    def __init__(self, addr: tuple[str, int], owner: WebhookServer) -> None:
        self.owner = owner
        super().__init__(addr, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        owner = self.owner
        if not owner._slots.acquire(timeout=QUEUE_WAIT):
            log.warning("webhook server: every worker busy; closing a connection from %s", client_address)
            self.shutdown_request(request)
            return
        try:
            owner._pool.submit(self._serve, request, client_address)
        except RuntimeError:  # the pool is shutting down
            owner._slots.release()
            self.shutdown_request(request)

    def _serve(self, sock: socket.socket, client_address: Any) -> None:
        owner = self.owner
        conn: socket.socket = sock
        slot = object()
        try:
            if owner._stopping.is_set():
                return
            sock.settimeout(owner.request_timeout)
            owner._track(slot, sock)
            conn = owner.cert.context().wrap_socket(sock, server_side=True)
            owner._track(slot, conn)  # the TLS socket took over the descriptor
            self.finish_request(conn, client_address)
        except OSError as e:  # ssl.SSLError too: a failed handshake, a reset, a cut at stop
            log.debug("webhook server: connection from %s: %s", client_address, e)
        except Exception:
            log.exception("webhook server: connection from %s", client_address)
        finally:
            owner._track(slot, None)
            self.shutdown_request(conn)
            owner._slots.release()


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/healthz", "/readyz"):
            self._plain(200, "ok")
        elif path in self.server.owner.handlers:
            self._plain(405, "use POST", {"Allow": "POST"})
        else:
            self._plain(404, "not found")

    def do_POST(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        handler = owner.handlers.get(path)
        if handler is None:
            self._plain(404, "not found")
            return
        media = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            self._refuse(path, 415, f"Content-Type {media or 'none'!r}: expected application/json",
                         unread=_length(self.headers.get("Content-Length")))  # fmt: skip
            return
        try:
            length = int(self.headers.get("Content-Length") or "")
        except ValueError:
            self._refuse(path, 411, "Content-Length required")
            return
        if length < 0 or length > owner.max_body:
            self._refuse(
                path, 413, f"body of {length} bytes exceeds the limit of {owner.max_body}", unread=length
            )
            return
        body = self._read(length)
        if body is None:
            self.close_connection = True
            return
        owner.answer(self, path, handler, body)

    def do_PUT(self) -> None:
        self._plain(405, "use POST", {"Allow": "POST"})

    def do_DELETE(self) -> None:
        self.do_PUT()

    def do_PATCH(self) -> None:
        self.do_PUT()

    def _read(self, length: int) -> bytes | None:
        """The body, or None when the client sent less within the deadline."""
        deadline = time.monotonic() + self.server.owner.request_timeout
        chunks: list[bytes] = []
        left = length
        while left > 0:
            if time.monotonic() > deadline:
                return None
            chunk = self.rfile.read1(min(left, 65536))
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _refuse(self, path: str, code: int, message: str, unread: int = 0) -> None:
        self.server.owner.metrics.requests.labels(webhook=path, result="error").inc()
        self.close_connection = True  # the unread body would be taken for the next request
        self._plain(code, message, {"Connection": "close"})
        if unread > 0:
            self._discard(min(unread, DRAIN_LIMIT))

    def _discard(self, size: int) -> None:
        """Read and drop up to ``size`` bytes for at most DRAIN_TIME: closing a socket with unread input
        resets the connection, and the client, still sending its body, would lose our answer."""
        deadline = time.monotonic() + DRAIN_TIME
        with contextlib.suppress(OSError):
            self.connection.settimeout(DRAIN_TIME)
            while size > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(size, 65536))
                if not chunk:
                    return
                size -= len(chunk)

    def _plain(self, code: int, text: str, headers: Mapping[str, str] | None = None) -> None:
        self.send(code, (text + "\n").encode(), "text/plain; charset=utf-8", headers)

    def send(
        self, code: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("webhook http: " + format, *args)


class WebhookServer:
    """HTTPS on ``addr`` answering ``handlers`` (path → Handler) with the certificate in
    ``cert_file``/``key_file`` (see the module docstring). Binds when built; ``start`` serves."""

    def __init__(
        self,
        addr: str,
        handlers: Mapping[str, Handler],
        *,
        cert_file: Path,
        key_file: Path,
        registry: CollectorRegistry,
        max_workers: int = MAX_WORKERS,
        max_body: int = MAX_BODY,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        bad = [p for p in handlers if not p.startswith("/") or p in ("/healthz", "/readyz")]
        if bad:
            raise ValueError(f"webhook paths {bad}: a path starts with / and is not /healthz or /readyz")
        self.handlers = dict(handlers)
        self.cert = CertFiles(cert_file, key_file)
        self.cert.context()  # a server without a certificate fails here, not at its first client
        self.metrics = WebhookMetrics(registry)
        self.max_body, self.request_timeout = max_body, request_timeout
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="webhook")
        self._slots = threading.BoundedSemaphore(2 * max_workers)  # running + waiting for a worker
        self._live: dict[object, socket.socket] = {}
        self._live_lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(parse_addr(addr), self)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> WebhookServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="webhook-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, cut open connections, wait for the workers."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        with self._live_lock:
            live = list(self._live.values())
        for sock in live:
            _cut(sock)
        self._pool.shutdown(wait=True)  # queued connections see _stopping and close at once
        self._httpd.server_close()

    def _track(self, slot: object, sock: socket.socket | None) -> None:
        """The socket a worker serves now (stop cuts it), None when done."""
        with self._live_lock:
            if sock is None:
                self._live.pop(slot, None)
            else:
                self._live[slot] = sock
        if sock is not None and self._stopping.is_set():
            _cut(sock)  # stop ran between the worker's check and this registration

    def answer(self, http: _RequestHandler, path: str, handler: Handler, body: bytes) -> None:
        """Decode, run the handler, answer; counted and timed under ``path``."""
        start = time.monotonic()
        try:
            request = decode_review(body)
        except ReviewError as e:
            http._refuse(path, 400, f"not an AdmissionReview request: {e}")
            return
        self.metrics.in_flight.inc()
        try:
            try:
                response = handler(request)
                result = "allowed" if response.allowed else "denied"
            except Exception as e:
                log.exception("webhook %s: %s %s %s/%s failed", path, request.operation, request.kind,
                              request.namespace, request.name)  # fmt: skip
                response, result = _errored(e), "error"
            encoded = json.dumps(review(request.api_version, request.uid, response)).encode()
        finally:
            self.metrics.in_flight.dec()
        self.metrics.requests.labels(webhook=path, result=result).inc()
        self.metrics.latency.labels(webhook=path).observe(time.monotonic() - start)
        http.send(200, encoded, "application/json")


def _length(header: str | None) -> int:
    try:
        return max(0, int(header or "0"))
    except ValueError:
        return 0


def _cut(sock: socket.socket) -> None:
    """Unblock whoever reads ``sock``."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _errored(e: Exception) -> AdmissionResponse:
    return errored(500, str(e) or type(e).__name__)
