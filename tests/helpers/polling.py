"""Polling with a deadline, for every test layer: ``wait_for`` fails the test with what it waited for,
``eventually`` answers True or False for the test to assert. A folder's own defaults (timeout, interval)
stay in the folder's helper module, which wraps these.

Imports: standard library only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["eventually", "wait_for"]

T = TypeVar("T")


def wait_for(cond: Callable[[], T], timeout: float, interval: float = 0.1, what: str = "") -> T:
    """Poll ``cond`` until it returns something truthy, which is returned; after ``timeout`` seconds an
    AssertionError names ``what`` (or ``cond``) and the last falsy answer."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what or cond}: last {got!r}")
        time.sleep(interval)


def eventually(cond: Callable[[], object], timeout: float = 5.0, interval: float = 0.005) -> bool:
    """Whether ``cond`` turns truthy within ``timeout`` seconds (polled every ``interval``, asked once
    more at the deadline so a slow last poll still counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(interval)
    return bool(cond())
