"""One HTTP port per daemon for Kubernetes probes and Prometheus: ``/metrics``, ``/healthz``, ``/readyz``.

``/healthz`` (liveness) and ``/readyz`` (readiness) each run their named checks; every check returns
``(ok, detail)``. A failing check answers 503 with one line per check, so ``kubectl describe`` and a human
with curl see why. ``?verbose`` lists passing checks too (as kube-apiserver does).
Shared by the koordlet and koord-manager. Imports: standard library, prometheus_client.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Check", "ProbeServer", "parse_addr"]

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


def parse_addr(addr: str, default_host: str = "0.0.0.0") -> tuple[str, int]:
    """``:9316`` / ``127.0.0.1:9316`` → (host, port); ``ValueError`` naming the value otherwise."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        raise ValueError(f"address {addr!r}: expected [host]:port")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"address {addr!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"address {addr!r}: port {number} out of range")
    return (host.strip("[]") or default_host), number


class ProbeServer:
    """A threaded HTTP server on ``addr`` (port 0 picks a free one; see ``port``)."""

    def __init__(
        self,
        addr: str,
        registry: CollectorRegistry,
        liveness: Mapping[str, Check] | None = None,
        readiness: Mapping[str, Check] | None = None,
    ) -> None:
        self.registry = registry
        self.liveness = dict(liveness or {})
        self.readiness = dict(readiness or {})
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/metrics":
                    self._send(200, generate_latest(server.registry), CONTENT_TYPE_LATEST)
                elif url.path in ("/healthz", "/livez"):
                    self._checks(server.liveness, "verbose" in url.query)
                elif url.path == "/readyz":
                    self._checks(server.readiness, "verbose" in url.query)
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _checks(self, checks: Mapping[str, Check], verbose: bool) -> None:
                lines: list[str] = []
                healthy = True
                for name, check in checks.items():
                    try:
                        ok, detail = check()
                    except Exception as e:  # a crashing check is a failing check, never a 500
                        ok, detail = False, f"check raised {e!r}"
                    healthy = healthy and ok
                    if verbose or not ok:
                        lines.append(f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}: {detail}")
                lines.append("ok" if healthy else "not ok")
                self._send(200 if healthy else 503, ("\n".join(lines) + "\n").encode(), "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        host, port = parse_addr(addr)
        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> ProbeServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        # shutdown() waits for serve_forever: only call it when the loop was started.
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
            self._thread = None
        self._httpd.server_close()
