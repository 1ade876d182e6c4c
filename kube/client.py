"""Building an authenticated kubernetes ApiClient (kubeconfig file, ``KUBECONFIG`` or in-cluster
service account) and a thread-safe client-side token-bucket rate limiter that every request of that
client goes through (the equivalent of client-go's QPS/Burst).

Imports: the kubernetes client and the standard library only.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes import config as _config

config: Any = _config  # the kubernetes client is treated as untyped

__all__ = ["KubeConfigError", "RateLimiter", "api_client"]


class KubeConfigError(RuntimeError):
    """No usable cluster configuration was found; the message names every source that was tried."""


class RateLimiter:
    """A token bucket: ``burst`` tokens at most, refilled at ``qps`` tokens per second. Safe to share
    between threads and between clients. ``qps <= 0`` disables limiting."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def try_acquire(self) -> bool:
        """Take one token if one is available now."""
        if self.qps <= 0:
            return True
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            return False

    def acquire(self, timeout: float | None = None) -> bool:
        """Wait for a token; False if none became available within ``timeout`` seconds (None: wait
        as long as it takes). Waiters reserve their token up front, so they are served in order."""
        if self.qps <= 0:
            return True
        with self._lock:
            now = self._clock()
            self._refill(now)
            wait = 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self.qps
            if timeout is not None and wait > timeout:
                return False
            self._tokens -= 1.0  # may go negative: a reservation that later callers queue behind
        if wait > 0:
            time.sleep(wait)
        return True


def _limit(api: Any, limiter: RateLimiter) -> None:
    """Route every request of ``api`` through ``limiter`` (watches too: only their start counts)."""
    rest = api.rest_client
    request = rest.request

    @functools.wraps(request)
    def limited(*args: Any, **kwargs: Any) -> Any:
        limiter.acquire()
        return request(*args, **kwargs)

    rest.request = limited
    api.rate_limiter = limiter


def api_client(
    kubeconfig: str | None = None,
    qps: float = 30,
    burst: int = 50,
    *,
    limiter: RateLimiter | None = None,
    connections: int = 32,
) -> Any:
    """A ``kubernetes.client.ApiClient`` from, in order: the ``kubeconfig`` file when given, else the
    ``KUBECONFIG`` environment variable, else the in-cluster service account. Requests are limited
    to ``qps``/``burst`` (or by a shared ``limiter``); the limiter is at ``api.rate_limiter``.
    ``connections`` sizes the HTTP connection pool: it must cover the threads that call at once
    (workers + informers), or surplus connections are dropped and every request pays a TLS handshake.
    Raises KubeConfigError naming what was tried."""
    conf = client.Configuration()
    path, label = (
        (kubeconfig, "kubeconfig file") if kubeconfig else (os.environ.get("KUBECONFIG"), "KUBECONFIG")
    )
    if path:
        # An explicitly named configuration that does not work is an error, never a silent fallback.
        try:
            config.load_kube_config(config_file=path, client_configuration=conf, persist_config=False)
        except Exception as e:  # ConfigException, OSError, YAML errors: all mean "not usable"
            raise KubeConfigError(f"no usable Kubernetes configuration: {label} {path!r}: {e}") from e
    else:
        try:
            config.load_incluster_config(client_configuration=conf)
        except Exception as e:
            raise KubeConfigError(
                "no usable Kubernetes configuration: no kubeconfig given, KUBECONFIG not set, "
                f"in-cluster service account: {e}"
            ) from e
    conf.connection_pool_maxsize = max(1, connections)
    api = client.ApiClient(conf)
    _limit(api, limiter if limiter is not None else RateLimiter(qps, burst))
    return api
