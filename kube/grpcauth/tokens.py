"""Bearer-token authentication for gRPC services (docs/shards.md#security; the MetricHub's,
docs/rules/manager.md#metrichub-limits): a token maps to an `Identity` (user name, groups, extra).

* `TokenReviewAuthenticator` asks the API server (authentication.k8s.io/v1 TokenReview) through an
  injected `review` callable (kube.grpcauth.kubeauth builds one from a kubernetes ApiClient) and caches
  answers: positive ones for `ttl` (default 120 s, kube-apiserver's webhook cache default; 5,000
  callers then cost ~42 reviews/s instead of 1,000) in an LRU of `max_entries` tokens, negative ones
  for `negative_ttl` (10 s) in an LRU of their own (`max_negative_entries`), so a flood of invalid
  tokens never pushes a valid one out. Tokens are kept only as SHA-256 digests.
* `StaticTokenAuthenticator` reads a token file for local mode: CSV lines `token,user[,group1|group2]`,
  or kube-apiserver's --token-auth-file form `token,user,uid[,"group1,group2"]`; `#` starts a comment.
  The file is re-read when its mtime/size changes (checked at most every `check_interval` seconds).
* `FixedTokenAuthenticator` (tokens known at start) and `ChainAuthenticator` (the first that knows).

Every authenticator also answers `lookup(token)` without blocking: the identity, None (known invalid)
or MISS (only a TokenReview can tell); a server answers from it at once and sends only misses to a
blocking review (kube.grpcauth.gate). `TTLCache` is the bounded expiring LRU these caches (and the
MetricHub's pod → node cache) are made of.

Imports: standard library only.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "MISS", "SA_USER_PREFIX", "AuthUnavailableError", "Authenticator", "ChainAuthenticator", "DeniedError",
    "FixedTokenAuthenticator", "Identity", "Miss", "ReviewFunc", "StaticTokenAuthenticator", "TTLCache",
    "TokenReviewAuthenticator", "Verdict", "bearer_token", "identity_from_review", "lookup",
    "parse_token_file", "service_account_user",
]  # fmt: skip

log = logging.getLogger(__name__)

SA_USER_PREFIX = "system:serviceaccount:"

# review(token) → TokenReview status as a dict ({"authenticated": bool, "user": {...}, "error": str}).
ReviewFunc = Callable[[str], Mapping[str, Any]]


def service_account_user(namespace: str, name: str) -> str:
    """The user name the API server gives a ServiceAccount's tokens."""
    return f"{SA_USER_PREFIX}{namespace}:{name}"


class AuthUnavailableError(RuntimeError):
    """The authenticator could not decide (e.g. the API server is unreachable): retry later."""


class DeniedError(PermissionError):
    """The authenticated caller may not do this; the message says why."""


@dataclass(frozen=True)
class Identity:
    user: str
    groups: frozenset[str] = frozenset()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def first_extra(self, key: str) -> str | None:
        values = self.extra.get(key, ())
        return values[0] if values else None


class Miss:
    """The type of MISS: a cache cannot tell whether a token is valid."""

    def __repr__(self) -> str:
        return "MISS"


MISS = Miss()
Verdict = Identity | None | Miss


class Authenticator(Protocol):
    def authenticate(self, token: str) -> Identity | None:
        """The identity behind token, None when the token is not valid; AuthUnavailableError when
        the answer cannot be known now."""
        ...


def lookup(auth: Authenticator, token: str) -> Verdict:
    """`auth.lookup(token)` (never blocks), or MISS for an authenticator without one."""
    fn: Callable[[str], Verdict] | None = getattr(auth, "lookup", None)
    return MISS if fn is None else fn(token)


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The token of the first ``authorization`` metadata entry when it is ``Bearer <token>``, else ""."""
    for key, value in metadata or ():
        if key == "authorization":
            scheme, _, rest = str(value).partition(" ")
            return rest.strip() if scheme.lower() == "bearer" else ""
    return ""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class TTLCache:
    """A bounded LRU map with a per-entry expiry. Thread-safe."""

    def __init__(self, max_entries: int, clock: Callable[[], float]) -> None:
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        self._max = max(1, max_entries)
        self._clock = clock
        self._lock = threading.Lock()

    def get(self, key: Any) -> tuple[bool, Any]:
        with self._lock:
            hit = self._data.get(key)
            if hit is None:
                return False, None
            if hit[0] <= self._clock():
                del self._data[key]
                return False, None
            self._data.move_to_end(key)
            return True, hit[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        with self._lock:
            self._data[key] = (self._clock() + ttl, value)
            self._data.move_to_end(key)
            while len(self._data) > self._max:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


def identity_from_review(status: Mapping[str, Any]) -> Identity | None:
    """The Identity of an authenticated TokenReview status, None when not authenticated."""
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    name = user.get("username") or ""
    if not name:
        return None
    extra = {str(k): tuple(str(x) for x in (v or ())) for k, v in (user.get("extra") or {}).items()}
    return Identity(user=name, groups=frozenset(user.get("groups") or ()), extra=extra)


class TokenReviewAuthenticator:
    """Authenticates with TokenReview (see the module docstring), caching answers."""

    def __init__(
        self,
        review: ReviewFunc,
        *,
        ttl: float = 120.0,
        negative_ttl: float = 10.0,
        max_entries: int = 20_000,
        max_negative_entries: int = 4_096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._cache = TTLCache(max_entries, clock)
        self._negative = TTLCache(max_negative_entries, clock)
        self.reviews = 0  # TokenReviews sent (for metrics and tests)

    def lookup(self, token: str) -> Verdict:
        key = _digest(token)
        hit, value = self._cache.get(key)
        if hit:
            return value  # type: ignore[no-any-return]
        return None if self._negative.get(key)[0] else MISS

    def authenticate(self, token: str) -> Identity | None:
        known = self.lookup(token)
        if not isinstance(known, Miss):
            return known
        try:
            status = self._review(token)
        except Exception as e:  # the API server's or the client's failure: not a verdict on the token
            raise AuthUnavailableError(f"TokenReview failed: {e}") from e
        self.reviews += 1
        ident = identity_from_review(status)
        if ident is None:
            self._negative.put(_digest(token), None, self._negative_ttl)
        else:
            self._cache.put(_digest(token), ident, self._ttl)
        return ident


def parse_token_file(text: str) -> dict[str, Identity]:
    """token → Identity from a static token file (formats in the module docstring)."""
    tokens: dict[str, Identity] = {}
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for lineno, row in enumerate(csv.reader(lines), 1):
        row = [c.strip() for c in row]
        if len(row) < 2 or not row[0] or not row[1]:
            raise ValueError(f"token file line {lineno}: want token,user[,groups]")
        if len(row) == 3:
            groups = [g for g in row[2].split("|") if g]
        else:  # kube-apiserver: token,user,uid[,"g1,g2"]
            groups = [g for g in (row[3].split(",") if len(row) > 3 else []) if g]
        tokens[row[0]] = Identity(user=row[1], groups=frozenset(g.strip() for g in groups))
    return tokens


class StaticTokenAuthenticator:
    """Tokens from a file, reloaded when the file changes; a broken file keeps the last good tokens."""

    def __init__(
        self,
        path: Path | str,
        *,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._check_interval = check_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens: dict[bytes, Identity] = {}
        self._stamp: tuple[int, int] | None = None
        self._next_check = 0.0
        self._reload(force=True)

    def _reload(self, force: bool = False) -> None:
        try:
            st = os.stat(self.path)
        except OSError as e:
            if force:
                raise
            log.warning("static token file %s: %s (keeping %d tokens)", self.path, e, len(self._tokens))
            return
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        try:
            parsed = parse_token_file(self.path.read_text())
        except (OSError, ValueError) as e:
            if force:
                raise
            log.warning("static token file %s: %s (keeping the last good tokens)", self.path, e)
            return
        self._tokens = {_digest(t): ident for t, ident in parsed.items()}
        self._stamp = stamp
        log.info("static token file %s: %d tokens", self.path, len(parsed))

    def lookup(self, token: str) -> Verdict:
        return self.authenticate(token)

    def authenticate(self, token: str) -> Identity | None:
        now = self._clock()
        if now >= self._next_check:
            with self._lock:
                if now >= self._next_check:
                    self._next_check = now + self._check_interval
                    self._reload()
        return self._tokens.get(_digest(token))


class FixedTokenAuthenticator:
    """Tokens known at start (e.g. the random token koord-manager gives its embedded scheduler)."""

    def __init__(self, tokens: Mapping[str, Identity]) -> None:
        self._tokens = {_digest(t): ident for t, ident in tokens.items()}

    def lookup(self, token: str) -> Verdict:
        return self.authenticate(token)

    def authenticate(self, token: str) -> Identity | None:
        return self._tokens.get(_digest(token))


class ChainAuthenticator:
    """The first authenticator that knows the token wins; None when none does."""

    def __init__(self, *authenticators: Authenticator) -> None:
        self._chain = authenticators

    def lookup(self, token: str) -> Verdict:
        """An identity when one authenticator knows the token; MISS when none does and one cannot tell."""
        verdict: Verdict = None
        for auth in self._chain:
            known = lookup(auth, token)
            if isinstance(known, Identity):
                return known
            if known is MISS:
                verdict = MISS
        return verdict

    def authenticate(self, token: str) -> Identity | None:
        for auth in self._chain:
            ident = auth.authenticate(token)
            if ident is not None:
                return ident
        return None
