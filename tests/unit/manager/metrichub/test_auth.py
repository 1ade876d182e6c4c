"""Hub authentication and authorization rules: static token file, TokenReview cache, node binding."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kube.grpcauth.tokens import (
    AuthUnavailableError,
    DeniedError,
    Identity,
    StaticTokenAuthenticator,
    TokenReviewAuthenticator,
    parse_token_file,
)
from manager.metrichub.auth import EXTRA_NODE_NAME, EXTRA_POD_NAME, EXTRA_POD_UID, Authorizer

AGENT = "system:serviceaccount:koord:koordlet"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_token_file_formats() -> None:
    tokens = parse_token_file(
        "# comment\n"
        "t1,system:node:n1\n"
        "t2,sched,system:masters|readers\n"
        't3,admin,admin-uid,"system:masters,ops"\n'
        "\n"
    )
    assert tokens["t1"] == Identity("system:node:n1")
    assert tokens["t2"].groups == {"system:masters", "readers"}
    assert tokens["t3"] == Identity("admin", frozenset({"system:masters", "ops"}))
    with pytest.raises(ValueError, match="line 1"):
        parse_token_file("lonely\n")


def test_static_tokens_are_reloaded_when_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("t1,system:node:n1\n")
    clock = Clock()
    authn = StaticTokenAuthenticator(path, check_interval=1.0, clock=clock)
    assert authn.authenticate("t1") == Identity("system:node:n1")
    assert authn.authenticate("t2") is None
    path.write_text("t2,system:node:n2\n# longer now\n")
    os.utime(path, ns=(1, 1))
    assert authn.authenticate("t1") is not None  # not re-checked before check_interval
    clock.t += 1.5
    assert authn.authenticate("t1") is None
    assert authn.authenticate("t2") == Identity("system:node:n2")
    path.write_text("broken\n")
    os.utime(path, ns=(2, 2))
    clock.t += 1.5
    assert authn.authenticate("t2") is not None  # a broken file keeps the last good tokens


def test_a_missing_token_file_fails_at_start(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        StaticTokenAuthenticator(tmp_path / "nope")


class Reviewer:
    def __init__(self, answers: dict[str, Mapping[str, Any]]) -> None:
        self.answers = answers
        self.calls: list[str] = []
        self.fail = False

    def __call__(self, token: str) -> Mapping[str, Any]:
        self.calls.append(token)
        if self.fail:
            raise ConnectionError("api server down")
        return self.answers.get(token, {"authenticated": False, "error": "invalid"})


def _ok(user: str, **extra: list[str]) -> Mapping[str, Any]:
    return {"authenticated": True, "user": {"username": user, "groups": ["g"], "extra": extra}}


def test_tokenreview_results_are_cached_with_ttls() -> None:
    review = Reviewer({"good": _ok(AGENT, **{EXTRA_POD_NAME: ["p"]})})
    clock = Clock()
    authn = TokenReviewAuthenticator(review, ttl=60, negative_ttl=10, clock=clock)
    ident = authn.authenticate("good")
    assert ident is not None and ident.user == AGENT and ident.groups == {"g"}
    assert ident.first_extra(EXTRA_POD_NAME) == "p"
    assert authn.authenticate("bad") is None
    for _ in range(10):
        authn.authenticate("good"), authn.authenticate("bad")
    assert review.calls == ["good", "bad"]
    clock.t += 11  # the negative answer expired, the positive one not yet
    authn.authenticate("good"), authn.authenticate("bad")
    assert review.calls == ["good", "bad", "bad"]
    clock.t += 50
    authn.authenticate("good")
    assert review.calls[-1] == "good" and authn.reviews == 4


def test_tokenreview_cache_is_bounded_and_errors_are_not_cached() -> None:
    review = Reviewer({f"t{i}": _ok(f"u{i}") for i in range(10)})
    authn = TokenReviewAuthenticator(review, max_entries=3)
    for i in range(10):
        authn.authenticate(f"t{i}")
    assert len(authn._cache) == 3
    review.fail = True
    with pytest.raises(AuthUnavailableError, match="api server down"):
        authn.authenticate("t0")
    with pytest.raises(AuthUnavailableError):
        authn.authenticate("t0")
    assert authn.authenticate("t9") is not None  # still cached


def test_node_identity_rules() -> None:
    lookups: list[tuple[str, str, str | None]] = []

    def pod_node(ns: str, pod: str, uid: str | None) -> str | None:
        lookups.append((ns, pod, uid))
        return {"agent-a": "node-a"}.get(pod)

    authz = Authorizer(agent_users={AGENT}, agent_groups={"agents"}, pod_node=pod_node)
    # 1. the API server's node-name extra, for agents only
    assert authz.node_of(Identity(AGENT, extra={EXTRA_NODE_NAME: ("n9",)})) == "n9"
    with pytest.raises(DeniedError, match="agent"):
        authz.node_of(Identity("system:serviceaccount:x:y", extra={EXTRA_NODE_NAME: ("n9",)}))
    # 2. node credentials
    assert authz.node_of(Identity("system:node:n1")) == "n1"
    # 3. the pod the agent's token is bound to (looked up once, then cached)
    bound = Identity(AGENT, extra={EXTRA_POD_NAME: ("agent-a",), EXTRA_POD_UID: ("u1",)})
    assert authz.node_of(bound) == authz.node_of(bound) == "node-a"
    assert lookups == [("koord", "agent-a", "u1")]
    with pytest.raises(DeniedError, match="koord/gone"):
        authz.node_of(Identity(AGENT, extra={EXTRA_POD_NAME: ("gone",)}))
    with pytest.raises(DeniedError, match="pod-bound"):
        authz.node_of(Identity(AGENT))
    with pytest.raises(DeniedError, match="cannot look up"):
        Authorizer(agent_users={AGENT}).node_of(bound)
    assert authz.node_of(Identity("x", frozenset({"agents"}), {EXTRA_NODE_NAME: ("n2",)})) == "n2"


def test_pod_lookup_failure_is_unavailable_not_denied() -> None:
    def broken(ns: str, pod: str, uid: str | None) -> str | None:
        raise TimeoutError("slow api server")

    authz = Authorizer(agent_users={AGENT}, pod_node=broken)
    with pytest.raises(AuthUnavailableError, match="slow"):
        authz.node_of(Identity(AGENT, extra={EXTRA_POD_NAME: ("p",)}))


def test_readers() -> None:
    authz = Authorizer(reader_users={"sched"}, reader_groups={"system:masters"})
    authz.reader(Identity("sched"))
    authz.reader(Identity("admin", frozenset({"system:masters"})))
    with pytest.raises(DeniedError, match="reader"):
        authz.reader(Identity("system:node:n1"))
