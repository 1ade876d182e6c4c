"""Snapshot units: cpu (and any resource named in ``MILLI_RESOURCES``) in milli-units (``MilliValue()``),
everything else ``Value()`` — the units of the snapshot's matrices and of every plugin's arithmetic.
Imports: apis.quantity.
"""

from __future__ import annotations

from collections.abc import Mapping

from apis.quantity import Quantity

MILLI_RESOURCES = frozenset({"cpu"})


def resource_value(name: str, q: Quantity) -> int:
    return q.milli_value() if name in MILLI_RESOURCES else q.value()


def to_values(resources: Mapping[str, Quantity]) -> dict[str, int]:
    return {n: resource_value(n, q) for n, q in resources.items()}
