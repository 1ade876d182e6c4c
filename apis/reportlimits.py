"""The limits every NodeMetricReport must keep, stated once for the MetricHub that refuses a report
breaking them and for every consumer that decodes one (docs/rules/manager.md#metrichub-limits).

Role: the numbers (report size, update-time skew, JSON text size and depth, quantity length, node
name), the error that names which limit a report broke (`ReportError.reason`, the label of the hub's
refusal counter), and the bounded JSON reader that apis.convert uses for the free-form JSON fields. The
gRPC message-size limits of both ends of the MetricHub derive from these numbers.
Imports: the standard library and apis.nodemetric (NodeMetricError). Pure, no I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from apis.nodemetric import NodeMetricError

__all__ = [
    "CLIENT_MAX_RECEIVE_BYTES",
    "LIST_PAGE_BYTES",
    "MAX_FUTURE_SKEW_SECONDS",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_NODE_NAME_CHARS",
    "MAX_QUANTITY_CHARS",
    "MAX_REPORT_BYTES",
    "REASONS",
    "SERVER_MAX_RECEIVE_BYTES",
    "ReportError",
    "check_node_name",
    "check_update_time",
    "load_json",
]

MiB: Final = 1 << 20
# A report is at most this long on the wire (a koordlet's report with 110 pods is ~20 KB).
MAX_REPORT_BYTES: Final = MiB
# status.updateTime may be at most this far ahead of the hub's clock when the hub receives the report:
# a later time would keep a dead node's metric looking fresh to the scheduler.
MAX_FUTURE_SKEW_SECONDS: Final = 60
# Each free-form JSON text (devices_json, extensions_json): its length in characters and its nesting
# (objects and arrays inside each other; a flat list of device objects has depth 2).
MAX_JSON_BYTES: Final = 64 * 1024
MAX_JSON_DEPTH: Final = 32
# A quantity string ("2500m", "8Gi"): longer ones cost quadratic time to read exactly.
MAX_QUANTITY_CHARS: Final = 64
# A node name is a DNS-1123 subdomain, as Kubernetes requires of Node objects.
MAX_NODE_NAME_CHARS: Final = 253
# A paged List answer stays below this size unless one item alone is longer.
LIST_PAGE_BYTES: Final = 2 * MiB
# gRPC receive limits: the hub reads a Report message up to a report's bound (plus its framing);
# clients read a List page, a WatchBatch message (1 MiB, or one event) or one event of a largest report.
SERVER_MAX_RECEIVE_BYTES: Final = MAX_REPORT_BYTES + 64 * 1024
CLIENT_MAX_RECEIVE_BYTES: Final = 2 * LIST_PAGE_BYTES

# ReportError.reason values (the hub counts refusals by them).
TOO_LARGE: Final = "too_large"
MALFORMED: Final = "malformed"
NODE_NAME: Final = "node_name"
FUTURE_UPDATE_TIME: Final = "future_update_time"
JSON_TOO_LARGE: Final = "json_too_large"
JSON_TOO_DEEP: Final = "json_too_deep"
INVALID_FIELD: Final = "invalid_field"
REASONS: Final = (
    TOO_LARGE,
    MALFORMED,
    NODE_NAME,
    FUTURE_UPDATE_TIME,
    JSON_TOO_LARGE,
    JSON_TOO_DEEP,
    INVALID_FIELD,
)

_DNS1123_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NANOS: Final = 1_000_000_000


class ReportError(NodeMetricError):
    """A report that breaks a limit of this module (or holds an invalid field: `INVALID_FIELD`)."""

    def __init__(self, reason: str, path: str, message: str, value: object) -> None:
        super().__init__(path, message, value)
        self.reason = reason


def reason_of(e: NodeMetricError) -> str:
    """The refusal reason of a decoding error: a limit's, else `INVALID_FIELD`."""
    return e.reason if isinstance(e, ReportError) else INVALID_FIELD


def check_node_name(name: str) -> None:
    """Raises ReportError unless `name` is a DNS-1123 subdomain of at most 253 characters."""
    if not name:
        raise ReportError(NODE_NAME, "nodeName", "must not be empty", name)
    if len(name) > MAX_NODE_NAME_CHARS or not _DNS1123_SUBDOMAIN.fullmatch(name):
        limit = f"must be a DNS-1123 subdomain of at most {MAX_NODE_NAME_CHARS} characters"
        raise ReportError(NODE_NAME, "nodeName", limit, name[:80])


def check_update_time(update_ns: int, received_ns: int) -> None:
    """Raises ReportError when an update time lies more than MAX_FUTURE_SKEW_SECONDS after the time
    the hub received the report (both in nanoseconds since the epoch)."""
    if update_ns - received_ns > MAX_FUTURE_SKEW_SECONDS * _NANOS:
        ahead = (update_ns - received_ns) / _NANOS
        raise ReportError(
            FUTURE_UPDATE_TIME, "status.updateTime",
            f"{ahead:.0f}s after the hub received it (at most {MAX_FUTURE_SKEW_SECONDS}s allowed)", update_ns,
        )  # fmt: skip


def _depth(value: Any) -> int:
    """The nesting depth of decoded JSON (a scalar 0, [] 1, [{}] 2), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: Any = v.values()
        elif isinstance(v, list):
            children = v
        else:
            continue
        d += 1
        deepest = max(deepest, d)
        if d < MAX_JSON_DEPTH + 1:
            stack.extend((c, d) for c in children)
    return deepest


def load_json(text: str, path: str) -> Any:
    """JSON text as Python values; ReportError when it is longer than MAX_JSON_BYTES, nested deeper
    than MAX_JSON_DEPTH or not JSON at all (`INVALID_FIELD`)."""
    if len(text) > MAX_JSON_BYTES:
        raise ReportError(
            JSON_TOO_LARGE, path, f"JSON text of {len(text)} characters (at most {MAX_JSON_BYTES})", text[:80]
        )
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
        depth = MAX_JSON_DEPTH + 1
    except ValueError as e:
        raise ReportError(INVALID_FIELD, path, f"invalid JSON: {e}", text[:80]) from None
    else:
        # Fewer brackets than the limit cannot nest deeper: the common case skips the walk.
        brackets = text.count("[") + text.count("{")
        depth = _depth(value) if brackets > MAX_JSON_DEPTH else 0
    if depth > MAX_JSON_DEPTH:
        raise ReportError(JSON_TOO_DEEP, path, f"JSON nested deeper than {MAX_JSON_DEPTH}", text[:80])
    return value
