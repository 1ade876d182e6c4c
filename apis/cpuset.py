"""Cpuset strings (Linux cpulist, ``"0-5,8"``) as Kubernetes' ``cpuset.Parse`` reads them and the
canonical form koord writes (docs/rules/manager.md#the-node-reservation-annotation): the node reservation's
``reservedCPUs``, the pods' ``resource-status`` cpusets, the NodeResourceTopology share pools. One
implementation for the koordlet, the manager and the scheduler. Pure. Imports: the standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

MAX_CPU_ID: Final = 4096  # higher ids are rejected (docs/rules/manager.md#the-node-reservation-annotation)
_GO_ATOI: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


class CPUSetError(ValueError):
    """A cpuset string that does not parse; the message names the offending element."""


def _atoi(text: str, whole: str) -> int:
    if not _GO_ATOI.fullmatch(text):
        raise CPUSetError(f"invalid cpuset {whole!r}: {text!r} is not an integer")
    value = int(text)
    if not 0 <= value <= MAX_CPU_ID:
        raise CPUSetError(f"invalid cpuset {whole!r}: cpu id {value} out of range 0..{MAX_CPU_ID}")
    return value


def parse_cpuset(text: str) -> frozenset[int]:
    """The CPU ids of a cpuset string. ``""`` is the empty set; elements are ``N`` or ``A-B`` separated
    by commas, no spaces; ``A-B`` with ``A > B`` is empty; ids above 4096 are invalid (CPUSetError)."""
    if text == "":
        return frozenset()
    cpus: set[int] = set()
    for element in text.split(","):
        bounds = element.split("-", 1)
        if len(bounds) == 1:
            cpus.add(_atoi(bounds[0], text))
            continue
        start, end = _atoi(bounds[0], text), _atoi(bounds[1], text)
        cpus.update(range(start, end + 1))
    return frozenset(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Canonical cpuset string: ascending, runs of two or more consecutive ids as ``a-b``, joined by ``,``
    (e.g. ``0-3,8,10-11``); ``""`` when empty."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
