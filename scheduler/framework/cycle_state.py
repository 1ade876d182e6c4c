"""CycleState: data plugins share during one pod's scheduling cycle, and the cycle's clock.
Imports: standard library only.
"""

from __future__ import annotations

import copy


class CycleState:
    """A per-cycle key/value store. `now` is the cycle's clock (epoch seconds): plugins read it
    instead of the wall clock, so a simulation is deterministic."""

    __slots__ = ("_data", "now")

    def __init__(self, now: float) -> None:
        self.now = now
        self._data: dict[str, object] = {}

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str) -> object:
        """Raises KeyError when the key was never written in this cycle."""
        return self._data[key]

    def get(self, key: str, default: object = None) -> object:
        return self._data.get(key, default)

    def clone(self) -> CycleState:
        """A copy whose values can be changed apart from this state's: a value with a ``clone()``
        method (kube's ``StateData.Clone``) is copied by it, any other with ``copy.copy``."""
        c = CycleState(self.now)
        c._data = {k: _clone(v) for k, v in self._data.items()}
        return c


def _clone(value: object) -> object:
    clone = getattr(value, "clone", None)
    return clone() if callable(clone) else copy.copy(value)
