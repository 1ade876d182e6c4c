"""The partition of pending pods over a shard group's members: rendezvous (highest-random-weight)
hashing of the pod UID (docs/shards.md#partition). Every member scores ``blake2b(member + "/" + uid)``
and the highest score owns the pod, so a member joining takes ~1/N of the pods from the others and a
member leaving hands only its own pods to the rest: nothing else moves. The hash is stable across
processes and hosts (never Python's salted ``hash``), so every shard computes the same owner.
Pure functions; imports: the standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

__all__ = ["owner", "owns", "partition", "weight"]


def weight(member: str, uid: str) -> int:
    """The member's rendezvous score for ``uid``: the first 8 bytes of blake2b over ``member/uid``."""
    digest = hashlib.blake2b(f"{member}/{uid}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(uid: str, members: Sequence[str]) -> str | None:
    """The member owning ``uid``: highest score, ties (astronomically rare) to the smaller name so the
    answer does not depend on the members' order. None when there are no members."""
    best: str | None = None
    best_w = -1
    for m in members:
        w = weight(m, uid)
        if w > best_w or (w == best_w and best is not None and m < best):
            best, best_w = m, w
    return best


def owns(identity: str, uid: str, members: Sequence[str]) -> bool:
    """Whether ``identity`` owns ``uid`` among ``members``. A shard that is not (or not yet) among the
    members it sees owns nothing: the live members share its pods (docs/shards.md#partition). A lone
    member owns everything without hashing (docs/shards.md#one-member)."""
    if identity not in members:
        return False
    if len(members) == 1:
        return True
    return owner(uid, members) == identity


def partition(uids: Iterable[str], members: Sequence[str]) -> dict[str, list[str]]:
    """Every member's UIDs (members without any still appear, with an empty list)."""
    out: dict[str, list[str]] = {m: [] for m in members}
    for uid in uids:
        o = owner(uid, members)
        if o is not None:
            out[o].append(uid)
    return out
