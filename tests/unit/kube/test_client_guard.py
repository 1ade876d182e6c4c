"""kube.client's leader-election helpers: ``guard_writes`` refuses writes unless its check holds when
they are sent and sends allowed writes once (no urllib3 retries); reads pass untouched.
``dedicated_client`` shares server and credentials but not the pool, limiter or retries."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kube.client import WriteRefusedError, dedicated_client, guard_writes
from kube.ratelimit import RateLimiter


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        self.sent.append((method, kwargs))
        raise ConnectionError("not sent anywhere")  # a recorded request goes no further


def _api() -> Any:
    conf = client.Configuration()
    conf.host = "https://127.0.0.1:1"
    conf.api_key = {"authorization": "Bearer t"}
    return client.ApiClient(conf)


def test_writes_pass_only_while_allowed_and_are_sent_once() -> None:
    api = _api()
    rec = Recorder()
    api.rest_client.pool_manager.request = rec
    allowed = [False]
    guard_writes(api, lambda: allowed[0], why="not leading")
    core = client.CoreV1Api(api)
    try:
        with pytest.raises(ConnectionError):
            core.list_node()  # reads always go out
        with pytest.raises(ApiException) as refused:
            core.create_namespace({"metadata": {"name": "x"}})
        assert isinstance(refused.value, WriteRefusedError)
        assert refused.value.status == 0 and "not leading: POST" in str(refused.value.reason)
        assert [m for m, _ in rec.sent] == ["GET"]
        assert "retries" not in rec.sent[0][1]  # reads keep the client's retries
        allowed[0] = True
        for call in (
            lambda: core.create_namespace({"metadata": {"name": "x"}}),
            lambda: core.patch_node("n", {"metadata": {"labels": {"a": "b"}}}),
            lambda: core.delete_namespace("x"),
        ):
            with pytest.raises(ConnectionError):
                call()
        assert [(m, kw["retries"]) for m, kw in rec.sent[1:]] == [("POST", 0), ("PATCH", 0), ("DELETE", 0)]
    finally:
        api.close()


def test_a_dedicated_client_shares_credentials_not_pool_limiter_or_retries() -> None:
    api = _api()
    api.rate_limiter = RateLimiter(1, 1)
    own = dedicated_client(api)
    try:
        assert own.configuration is not api.configuration
        assert own.configuration.host == api.configuration.host
        assert own.configuration.api_key == {"authorization": "Bearer t"}
        assert own.configuration.retries == 0 and api.configuration.retries is None
        assert own.rest_client.pool_manager is not api.rest_client.pool_manager
        assert not hasattr(own, "rate_limiter")
    finally:
        own.close()
        api.close()
