"""Building an authenticated kubernetes ApiClient (kubeconfig file, ``KUBECONFIG`` or in-cluster
service account) and a thread-safe client-side token-bucket rate limiter that every request of that
client goes through (the equivalent of client-go's QPS/Burst). For leader election
(docs/architecture.md#leader-election): ``dedicated_client`` (same server and credentials, its own
connection pool, no limiter, no transport retries) and ``guard_writes`` (a client whose writes are
refused unless a check passes, and sent once: never resent by urllib3 after that check).

Imports: the kubernetes client and the standard library only.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes import config as _config
from kubernetes.client.exceptions import ApiException

from kube.errors import KubeConfigError
from kube.ratelimit import RateLimiter

config: Any = _config  # the kubernetes client is treated as untyped

__all__ = [
    "KubeConfigError",
    "RateLimiter",
    "WriteRefusedError",
    "api_client",
    "dedicated_client",
    "guard_writes",
]

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class WriteRefusedError(ApiException):
    """A write ``guard_writes`` refused before sending it (this replica does not lead)."""

    def __init__(self, method: str, url: str, why: str) -> None:
        super().__init__(status=0, reason=f"{why}: {method} {url.split('?', 1)[0]} not sent")


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


def dedicated_client(api: Any, *, retries: int = 0, connections: int = 2) -> Any:
    """A new ApiClient on ``api``'s server and credentials with its own connection pool, no rate
    limiter and at most ``retries`` urllib3 retries: for requests that must fail by their own deadline
    instead of being resent later or queued behind other traffic (Lease renewals)."""
    conf = copy.copy(api.configuration)  # shallow: shares the credentials (and their refresh hook)
    conf.retries = retries
    conf.connection_pool_maxsize = max(1, connections)
    return client.ApiClient(conf)


def guard_writes(api: Any, allowed: Callable[[], bool], why: str = "not leading") -> None:
    """Refuse every request of ``api`` but GET/HEAD/OPTIONS unless ``allowed()`` holds at the moment it
    is sent (after the rate limiter), raising ``WriteRefusedError`` (an ApiException, status 0); and
    send an allowed write once (no urllib3 retries): a resend would go out after the check, maybe after
    the lease expired. Reads are untouched. ``allowed`` must be cheap: it runs on every write."""
    pool = api.rest_client.pool_manager
    request = pool.request

    @functools.wraps(request)
    def guarded(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method.upper() not in READ_METHODS:
            if not allowed():
                raise WriteRefusedError(method, url, why)
            kwargs["retries"] = 0
        return request(method, url, *args, **kwargs)

    pool.request = guarded
