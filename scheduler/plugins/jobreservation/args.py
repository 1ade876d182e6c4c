"""JobReservationArgs (docs/rules/scheduler-jobreservation.md#plugin-arguments): decoded from the plugin's
JSON args with their defaults and validation; an invalid value raises ValueError naming the field and the
value, and the plugin is then not constructible.
Imports: the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Self

DEFAULT_SESSION_PERIOD: Final = 1.0  # seconds: Volcano's default schedule period
MAX_SESSION_PERIOD: Final = 3600.0
_KNOWN: Final = frozenset({"sessionPeriodSeconds", "apiVersion", "kind"})


class ArgsError(ValueError):
    """Invalid JobReservationArgs; the message names the field and the value."""

    def __init__(self, path: str, value: object, reason: str) -> None:
        self.path = path
        self.value = value
        super().__init__(f"JobReservationArgs: {path}={value!r}: {reason}")


@dataclass(frozen=True, slots=True)
class JobReservationArgs:
    session_period_seconds: float = DEFAULT_SESSION_PERIOD

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> Self:
        """Absent (or null) fields take the default; `sessionPeriodSeconds` must be a number in
        (0, 3600]; unknown fields are refused."""
        raw: Mapping[str, Any] = args or {}
        if not isinstance(raw, Mapping):
            raise ArgsError("args", raw, "must be an object")
        for key in raw:
            if key not in _KNOWN:
                raise ArgsError(str(key), raw[key], "unknown field")
        period = raw.get("sessionPeriodSeconds")
        if period is None:
            return cls()
        if isinstance(period, bool) or not isinstance(period, int | float):
            raise ArgsError("sessionPeriodSeconds", period, "must be a number of seconds")
        if not math.isfinite(period) or not 0 < period <= MAX_SESSION_PERIOD:
            raise ArgsError("sessionPeriodSeconds", period, "must be in the range (0, 3600]")
        return cls(float(period))

    def to_json(self) -> dict[str, Any]:
        return {"sessionPeriodSeconds": self.session_period_seconds}
