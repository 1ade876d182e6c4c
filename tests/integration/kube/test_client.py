"""kube.client: an ApiClient from a kubeconfig file or KUBECONFIG against the real API server, a clear
error naming what was tried, and the shared token-bucket rate limiter throttling real requests."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kubernetes import client

from kube.client import KubeConfigError, RateLimiter, api_client

pytestmark = pytest.mark.apiserver


def test_kubeconfig_file_and_env(control_plane: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(control_plane.kubeconfig_path)
    api = api_client(path)
    try:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        assert isinstance(api.rate_limiter, RateLimiter) and api.rate_limiter.qps == 30
    finally:
        api.close()
    monkeypatch.setenv("KUBECONFIG", path)
    api = api_client()
    try:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
    finally:
        api.close()


def test_errors_name_what_was_tried(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(KubeConfigError, match=r"nope\.yaml"):
        api_client(missing)
    monkeypatch.setenv("KUBECONFIG", missing)
    with pytest.raises(KubeConfigError, match="KUBECONFIG"):
        api_client()
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError, match=r"KUBECONFIG not set.*in-cluster"):
        api_client()


def test_rate_limiter_token_bucket() -> None:
    now = [0.0]
    rl = RateLimiter(qps=2, burst=3, clock=lambda: now[0])
    assert [rl.try_acquire() for _ in range(4)] == [True, True, True, False]
    assert not rl.acquire(timeout=0.1)  # the next token is 0.5 s away
    now[0] = 1.0  # two tokens back
    assert rl.try_acquire() and rl.try_acquire() and not rl.try_acquire()
    now[0] = 100.0  # never more than the burst
    assert sum(rl.try_acquire() for _ in range(10)) == 3
    assert all(RateLimiter(qps=0, burst=1).try_acquire() for _ in range(100))  # qps <= 0: unlimited
    with pytest.raises(ValueError):
        RateLimiter(qps=1, burst=0)


def test_shared_limiter_throttles_real_requests(control_plane: Any) -> None:
    limiter = RateLimiter(qps=10, burst=1)
    apis = [api_client(str(control_plane.kubeconfig_path), limiter=limiter) for _ in range(2)]
    try:
        core = [client.CoreV1Api(a) for a in apis]
        t0 = time.monotonic()
        threads = [
            threading.Thread(target=c.read_namespace, args=("default",)) for c in core for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        # 6 requests through one bucket of burst 1 at 10/s: the last waits ~0.5 s.
        assert time.monotonic() - t0 >= 0.45
        assert all(a.rate_limiter is limiter for a in apis)
    finally:
        for a in apis:
            a.close()
