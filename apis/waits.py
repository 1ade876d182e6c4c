"""Bounded waits: every wait, sleep, timeout or time offset that koord computes from configuration (flags,
the ``slo-controller-config`` ConfigMap, NodeSLO and NodeMetric specs, scheduler and plugin arguments)
goes through ``clamp_seconds`` (docs/configuration.md#duration-limits).

Python refuses waits beyond ``threading.TIMEOUT_MAX`` (about 292 years) and datetimes past year 9999 with
``OverflowError``, and a NaN timeout with ``ValueError``: an absurd interval in a spec would otherwise
crash the loop that waits on it, on every start. Clamped values keep the loop alive and behave like
"practically never" where a huge value meant that.

Imports: the standard library only. Pure apart from one warning per clamped name (logging).
"""

from __future__ import annotations

import logging
import threading
from typing import Final

__all__ = ["MAX_WAIT_SECONDS", "clamp_seconds"]

log = logging.getLogger(__name__)

MAX_WAIT_SECONDS: Final = 30 * 24 * 3600.0
"""30 days: longer than any interval, cool-down or degrade time that means something, and far inside both
``threading.TIMEOUT_MAX`` and the datetime range."""

_warned: set[str] = set()
_warned_lock = threading.Lock()


def clamp_seconds(value: float, name: str) -> float:
    """``value`` seconds clamped to ``[0, MAX_WAIT_SECONDS]``; NaN counts as the maximum (never a busy loop).

    Going below zero is routine (a deadline already passed: wait 0) and silent; going beyond the maximum,
    or NaN, logs one warning per ``name`` (the flag or field it came from) for the life of the process.
    """
    if value < 0:
        return 0.0
    if value <= MAX_WAIT_SECONDS:  # False for NaN too
        return float(value)
    with _warned_lock:
        first = name not in _warned
        _warned.add(name)
    if first:
        if isinstance(value, int) and value.bit_length() > 64:  # beyond what a float prints
            shown = f"about 2^{value.bit_length()}"
        else:
            shown = f"{value:.6g}"
        log.warning(
            "%s: %s s is beyond the longest wait koord allows; using %.0f s",
            name,
            shown,
            MAX_WAIT_SECONDS,
        )
    return MAX_WAIT_SECONDS
