"""Who may talk to the MetricHub: the hub's authorization rules over bearer-token identities.

Authentication (bearer tokens → `Identity`, the TokenReview/static/fixed/chain authenticators and
their caches) is kube.grpcauth.tokens, shared with the scheduler's shard arbiter; its names are
re-exported here for the hub's callers. This module keeps the hub's own policy.

Authorization (`Authorizer`):

* Report: the caller's node is established, in order, by (1) `extra["authentication.kubernetes.io/
  node-name"]` (set by newer API servers for pod-bound ServiceAccount tokens) — trusted only for an
  *agent* identity, since every pod on a node holds such a token; (2) the user name
  `system:node:<name>` (node credentials; in local mode a static token bound to a node); (3) for an
  agent identity (configured users/groups, by default the koordlet ServiceAccount) the pod the token is
  bound to: `extra[".../pod-name"]` (+ pod-uid) looked up through an injected `pod_node` callable
  (namespace, pod, uid) → spec.nodeName (cached). Otherwise the report is refused (PERMISSION_DENIED).
  Every report of a stream must be for that node; the first foreign one ends the stream.
* Watch / List: the identity must be a configured reader (users or groups); no node binding.

Imports: standard library, kube.grpcauth.tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kube.grpcauth.tokens import (
    MISS,
    SA_USER_PREFIX,
    Authenticator,
    AuthUnavailableError,
    ChainAuthenticator,
    DeniedError,
    FixedTokenAuthenticator,
    Identity,
    Miss,
    ReviewFunc,
    StaticTokenAuthenticator,
    TokenReviewAuthenticator,
    TTLCache,
    Verdict,
    bearer_token,
    identity_from_review,
    lookup,
    parse_token_file,
)

__all__ = [
    "DEFAULT_AGENT_USERS", "DEFAULT_READER_GROUPS", "DEFAULT_READER_USERS", "EXTRA_NODE_NAME",
    "EXTRA_POD_NAME", "EXTRA_POD_UID", "MISS", "NODE_USER_PREFIX", "SA_USER_PREFIX", "AuthUnavailableError",
    "Authenticator", "Authorizer", "ChainAuthenticator", "DeniedError", "FixedTokenAuthenticator",
    "Identity", "Miss", "PodNodeFunc", "ReviewFunc", "StaticTokenAuthenticator", "TokenReviewAuthenticator",
    "Verdict", "bearer_token", "identity_from_review", "lookup", "parse_token_file",
]  # fmt: skip

NODE_USER_PREFIX = "system:node:"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
DEFAULT_AGENT_USERS = frozenset({"system:serviceaccount:koordinator-system:koordlet"})
DEFAULT_READER_USERS = frozenset(
    {"system:serviceaccount:koordinator-system:koord-scheduler", "system:kube-scheduler"}
)
DEFAULT_READER_GROUPS = frozenset({"system:masters"})

# pod_node(namespace, pod, uid or None) → the pod's spec.nodeName, or None (no such pod / not scheduled).
PodNodeFunc = Callable[[str, str, str | None], str | None]


def _in(ident: Identity, users: frozenset[str], groups: frozenset[str]) -> bool:
    return ident.user in users or not groups.isdisjoint(ident.groups)


class Authorizer:
    """The hub's rules (see the module docstring). `pod_node` is needed only for pod-bound agent
    tokens on API servers that do not put the node name into the token's extra."""

    def __init__(
        self,
        *,
        agent_users: Iterable[str] = DEFAULT_AGENT_USERS,
        agent_groups: Iterable[str] = (),
        reader_users: Iterable[str] = DEFAULT_READER_USERS,
        reader_groups: Iterable[str] = DEFAULT_READER_GROUPS,
        pod_node: PodNodeFunc | None = None,
        pod_ttl: float = 300.0,
        pod_negative_ttl: float = 5.0,
        max_pods: int = 20_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.agent_users = frozenset(agent_users)
        self.agent_groups = frozenset(agent_groups)
        self.reader_users = frozenset(reader_users)
        self.reader_groups = frozenset(reader_groups)
        self._pod_node = pod_node
        self._pod_ttl = (pod_ttl, pod_negative_ttl)
        self._pods = TTLCache(max_pods, clock)

    def is_agent(self, ident: Identity) -> bool:
        return _in(ident, self.agent_users, self.agent_groups)

    def reader(self, ident: Identity) -> None:
        """Raises DeniedError unless ident may List/Watch."""
        if not _in(ident, self.reader_users, self.reader_groups):
            raise DeniedError(f"{ident.user!r} may not read the metric hub (not a configured reader)")

    def node_of(self, ident: Identity) -> str:
        """The node ident may report for; DeniedError when none can be established."""
        agent = self.is_agent(ident)
        if agent and (node := ident.first_extra(EXTRA_NODE_NAME)):
            return node
        if ident.user.startswith(NODE_USER_PREFIX) and len(ident.user) > len(NODE_USER_PREFIX):
            return ident.user[len(NODE_USER_PREFIX) :]
        if not agent:
            raise DeniedError(
                f"{ident.user!r} may not report: neither a node identity ({NODE_USER_PREFIX}<node>) "
                "nor a configured agent identity"
            )
        pod = ident.first_extra(EXTRA_POD_NAME)
        if pod is None:
            raise DeniedError(
                f"{ident.user!r}: cannot establish the caller's node: the token carries neither "
                f"{EXTRA_NODE_NAME} nor {EXTRA_POD_NAME} (use a pod-bound ServiceAccount token)"
            )
        if not ident.user.startswith(SA_USER_PREFIX) or self._pod_node is None:
            raise DeniedError(f"{ident.user!r}: cannot look up the node of pod {pod!r}")
        namespace = ident.user[len(SA_USER_PREFIX) :].split(":", 1)[0]
        uid = ident.first_extra(EXTRA_POD_UID)
        key = (namespace, pod, uid)
        hit, node = self._pods.get(key)
        if not hit:
            try:
                node = self._pod_node(namespace, pod, uid)
            except Exception as e:
                raise AuthUnavailableError(f"looking up pod {namespace}/{pod}: {e}") from e
            self._pods.put(key, node, self._pod_ttl[0] if node else self._pod_ttl[1])
        if not node:
            raise DeniedError(
                f"{ident.user!r}: the token's pod {namespace}/{pod} does not exist or is not on a node"
            )
        return str(node)
