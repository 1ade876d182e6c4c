"""RFC 3339 times as Kubernetes writes them (metav1.Time): strict parsing of any offset and fraction
to an aware UTC datetime, and Go's JSON form (UTC, whole seconds). Imports: standard library only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))", re.ASCII
)


def parse_rfc3339(text: object) -> datetime:
    """An RFC 3339 time as an aware UTC datetime (fractions beyond microseconds are truncated);
    raises ValueError."""
    m = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError("expected an RFC 3339 time such as 2026-11-22T02:16:47Z")
    y, mo, d, h, mi, s = (int(g) for g in m.group(1, 2, 3, 4, 5, 6))
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    try:
        t = datetime(y, mo, d, h, mi, s, micro, tzinfo=UTC)
        if m.group(8):
            offset = timedelta(hours=int(m.group(9)), minutes=int(m.group(10)))
            t = t - offset if m.group(8) == "+" else t + offset
    except (ValueError, OverflowError) as e:
        raise ValueError(f"invalid time: {e}") from None
    return t


def format_rfc3339(t: datetime, what: str = "time") -> str:
    """Go's ``metav1.Time`` JSON: UTC, RFC 3339, whole seconds (``2026-11-22T02:16:47Z``)."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {t!r}")
    u = t.astimezone(UTC)  # strftime's %Y does not zero-pad years below 1000
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"
