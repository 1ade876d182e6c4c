"""The koordlet's optional C accelerators (``agent/system/_cgparse.c``: the per-tick cgroup parsers and the
metric cache's window sum): the module, or None when it was not built (no compiler at install time) or
``KOORD_PURE_PYTHON=1`` turns it off. Every user keeps a Python path giving the same answers.

Imports: standard library and the optional ``agent.system._cgparse``.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["cgparse"]


def _load() -> ModuleType | None:
    if os.environ.get("KOORD_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from agent.system import _cgparse
    except ImportError:
        return None
    return _cgparse


cgparse: ModuleType | None = _load()
