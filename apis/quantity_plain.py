"""Plain quantity text, checked many texts at a time: a report's quantities
(docs/rules/manager.md#metrichub-limits) are accepted by their shapes before any is parsed.

Role: ``all_plain(texts)`` says every text is plain — a sign, digits with an optional fraction, then a
suffix of Go's tables or an exponent of at most 18 digits (always within int64), at most
``PLAIN_MAX_CHARS`` characters — so ``apis.quantity.Quantity.parse`` accepts each.
Imports: standard library only (and the private helper ``apis._quantity_format``). Pure, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from apis import _quantity_format as _fmt

__all__ = ["PLAIN_MAX_CHARS", "all_plain"]

# Every plain text parses, so a report's quantities are checked by their shapes (every digit read as 0:
# few shapes recur, as "0000m" and "000000Ki"), each shape matched once and remembered.
_SUFFIX_ALTERNATIVES: Final = "|".join(
    re.escape(s)
    for s in sorted({*_fmt.DECIMAL_SUFFIXES, *_fmt.BINARY_SUFFIXES} - {""}, key=lambda s: (-len(s), s))
)
PLAIN_MAX_CHARS: Final = 64
_PLAIN: Final = re.compile(
    rf"(?=.{{1,{PLAIN_MAX_CHARS}}}\Z)[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:{_SUFFIX_ALTERNATIVES}|[eE][+-]?[0-9]{{1,18}})?",
    re.DOTALL,
)
_SHAPE: Final = str.maketrans("123456789", "000000000")
_PLAIN_SHAPES_MAX: Final = 4096
_plain_shapes: set[str] = set()  # shapes that matched _PLAIN; emptied when full


def all_plain(texts: Sequence[str]) -> bool:
    """True when every text in ``texts`` is plain quantity text (see ``_PLAIN``), so ``Quantity.parse``
    accepts each; False says only that one of them may not parse."""
    if not texts:
        return True
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:  # a text holding a newline would pass as two texts
        return False
    # _PLAIN sees only where digits are, never which: a text matches exactly when its shape does.
    shapes = set(joined.translate(_SHAPE).split("\n"))
    known = _plain_shapes
    if known.issuperset(shapes):
        return True
    for shape in shapes - known:
        if _PLAIN.fullmatch(shape) is None:
            return False
        if len(known) >= _PLAIN_SHAPES_MAX:  # bounded whatever shapes clients send
            known.clear()
        known.add(shape)
    return True
