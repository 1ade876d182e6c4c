"""Building an authenticated kubernetes ApiClient (kubeconfig file, ``KUBECONFIG`` or in-cluster
service account) and a thread-safe client-side token-bucket rate limiter that every request of that
client goes through (the equivalent of client-go's QPS/Burst).

Imports: the kubernetes client and the standard library only.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from kubernetes import client
from kubernetes import config as _config

from kube.errors import KubeConfigError
from kube.ratelimit import RateLimiter

config: Any = _config  # the kubernetes client is treated as untyped

__all__ = ["KubeConfigError", "RateLimiter", "api_client"]


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
