"""The koordlet's optional C extension ``agent.system._cgparse`` (``agent/system/_cgparse.c``: the per-tick
cgroup parsers of ``agent.system.readers`` and the metric cache's window sum): the module, or None when it
was not built (no compiler at install time) or ``KOORD_PURE_PYTHON=1`` turns it off. Every user keeps a
Python path giving the same answers: the strict parsers, and the Python window sum.

Imports: standard library and the optional ``agent.system._cgparse``.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["ACCELERATED", "cgparse"]


def _load() -> ModuleType | None:
    if os.environ.get("KOORD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from agent.system import _cgparse
    except ImportError:
        return None
    return _cgparse


cgparse: ModuleType | None = _load()

ACCELERATED = cgparse is not None
"""True when the C extension is in use."""
