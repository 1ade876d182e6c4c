"""Go integer arithmetic that Python spells differently: ``go_div`` truncates toward zero like Go's int64
``/`` (Python's ``//`` floors). One definition for every port of an upstream formula.
Imports: nothing.
"""

from __future__ import annotations

__all__ = ["go_div"]


def go_div(a: int, b: int) -> int:
    """Go's integer division ``a / b``: truncates toward zero (``ZeroDivisionError`` when ``b`` is 0)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q
