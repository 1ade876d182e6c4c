"""Defensive reads of decoded JSON: an object field that is absent, ``null`` or of the wrong type reads
as an empty one, as Kubernetes' Go structs read it. One helper for every reader of API objects.
Imports: the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty, read-only one."""
    if type(value) is dict:  # the JSON case; the ABC check below costs ten times more
        return value
    if value is None:
        return EMPTY
    return value if isinstance(value, Mapping) else EMPTY
