"""Per-node inputs taken from the Node object (docs/rules/scheduler.md#inputs-per-node): the threshold
profile (plugin args overridden by the ``scheduling.koordinator.sh/usage-thresholds`` annotation) and the
capacity used for percentages (``status.allocatable`` overridden by ``node.koordinator.sh/raw-allocatable``).

Annotations decode like Go's ``encoding/json`` (docs/rules/scheduler.md#annotations-decode-as-go-json): int64
fields accept only integer literals, struct field names match case-insensitively, bare numbers in resource
lists are quantity literals, a null quantity is 0; any decode error discards the whole annotation. Values are
in resource-vector order: cpu in milli-cores, everything else ``Value()``.
Imports: the standard library, apis (constants, duration, quantity), scheduler.framework.units,
scheduler.plugins.loadaware.args.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from apis import constants as c
from apis.duration import Duration, DurationError
from apis.quantity import Quantity, QuantityError
from scheduler.framework.units import resource_value
from scheduler.plugins.loadaware.args import LoadAwareSchedulingArgs

Vector = tuple[int, ...]


class GoJSONError(ValueError):
    """The text is not valid for the Go type it is decoded into."""


class _FloatLiteral(str):
    """A JSON number that is not an integer literal, kept as its text (Go never makes it an int64)."""

    __slots__ = ()


def _reject_constant(name: str) -> Any:
    raise GoJSONError(f"invalid JSON literal {name}")


def go_json_loads(text: str) -> Any:
    """``json.loads`` with Go's number rules: integer literals are ints, other numbers ``_FloatLiteral``;
    NaN/Infinity are errors."""
    try:
        return json.loads(text, parse_float=_FloatLiteral, parse_constant=_reject_constant)
    except (json.JSONDecodeError, RecursionError) as e:
        raise GoJSONError(str(e)) from None


def go_field(obj: Mapping[str, Any], name: str) -> Any:
    """The value of struct field ``name``: keys match case-insensitively, the last match wins."""
    found: Any = None
    folded = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == folded:
            found = value
    return found


def go_int64(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 63) <= value < (1 << 63):
        raise GoJSONError(f"cannot unmarshal {value!r} into int64")
    return value


def go_int_map(value: Any) -> dict[str, int]:
    """``map[string]int64``; null → empty."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise GoJSONError(f"cannot unmarshal {value!r} into a map")
    return {str(k): go_int64(v) for k, v in value.items()}


def go_string(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or isinstance(value, _FloatLiteral):
        raise GoJSONError(f"cannot unmarshal {value!r} into string")
    return value


def go_quantity(value: Any) -> Quantity:
    if isinstance(value, _FloatLiteral):
        value = str(value)
    if isinstance(value, dict | list):
        raise GoJSONError(f"cannot unmarshal {value!r} into a quantity")
    try:
        return Quantity.from_json(value)
    except QuantityError as e:
        raise GoJSONError(str(e)) from None


def to_vector(resources: Sequence[str], values: Mapping[str, int]) -> Vector:
    return tuple(values.get(r, 0) for r in resources)


# --- threshold profile --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThresholdProfile:
    """Thresholds for one node (percent, 0 = disabled), in resource-vector order. ``prod_set``: the prod
    vector has a value other than 0 (an all-zero vector such as ``{"cpu": 0}``, or one whose keys are all
    outside the resource vector, is empty: Prod pods then take the aggregated / usage thresholds; a
    negative value counts as set); ``aggregated`` is None when no aggregated profile applies."""

    usage: Vector
    prod: Vector
    prod_set: bool
    aggregated: Vector | None
    agg_type: str
    agg_duration: int


def _annotation(node: Mapping[str, Any], name: str) -> str | None:
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(name) if isinstance(annotations, Mapping) else None
    return value if isinstance(value, str) else None


def _custom_thresholds(text: str) -> tuple[dict[str, int], dict[str, int], tuple[dict[str, int], str, int]]:
    raw = go_json_loads(text)
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise GoJSONError("usage-thresholds: not an object")
    usage = go_int_map(go_field(raw, "usageThresholds"))
    prod = go_int_map(go_field(raw, "prodUsageThresholds"))
    agg_raw = go_field(raw, "aggregatedUsage")
    agg: tuple[dict[str, int], str, int] = ({}, "", 0)
    if agg_raw is not None:
        if not isinstance(agg_raw, Mapping):
            raise GoJSONError("aggregatedUsage: not an object")
        duration_raw = go_field(agg_raw, "usageAggregatedDuration")
        try:
            duration = 0 if duration_raw is None else Duration.parse(go_string(duration_raw)).nanoseconds
        except DurationError as e:
            raise GoJSONError(str(e)) from None
        agg = (
            go_int_map(go_field(agg_raw, "usageThresholds")),
            go_string(go_field(agg_raw, "usageAggregationType")),
            duration,
        )
    return usage, prod, agg


def node_profile(
    args: LoadAwareSchedulingArgs, resources: Sequence[str], node: Mapping[str, Any]
) -> ThresholdProfile:
    """Plugin thresholds, each section replaced whole by a non-empty annotation section
    (docs/rules/scheduler.md#inputs-per-node)."""
    usage, prod = args.usage_thresholds, args.prod_usage_thresholds
    aggregated: tuple[dict[str, int], str, int] | None = None
    if args.aggregated is not None and args.aggregated.filter_enabled:
        a = args.aggregated
        aggregated = (a.usage_thresholds, a.usage_aggregation_type, a.usage_aggregated_duration)
    text = _annotation(node, c.ANNOTATION_USAGE_THRESHOLDS)
    if text is not None:
        try:
            c_usage, c_prod, c_agg = _custom_thresholds(text)
        except GoJSONError:
            pass  # unparsable annotation: the plugin profile
        else:
            usage = c_usage or usage
            prod = c_prod or prod
            if c_agg[0] and c_agg[1]:
                aggregated = c_agg
    prod_vector = to_vector(resources, prod)
    return ThresholdProfile(
        usage=to_vector(resources, usage),
        prod=prod_vector,
        prod_set=any(v != 0 for v in prod_vector),
        aggregated=None if aggregated is None else to_vector(resources, aggregated[0]),
        agg_type="" if aggregated is None else aggregated[1],
        agg_duration=0 if aggregated is None else aggregated[2],
    )


# --- capacity ------------------------------------------------------------------------------------------


def _raw_allocatable(text: str) -> dict[str, Quantity]:
    raw = go_json_loads(text)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise GoJSONError("raw-allocatable: not an object")
    return {str(k): go_quantity(v) for k, v in raw.items()}


def node_capacity(resources: Sequence[str], node: Mapping[str, Any]) -> Vector:
    """``EstimateNode``: allocatable, with the resources of ``raw-allocatable`` replacing theirs."""
    allocatable = ((node.get("status") or {}).get("allocatable")) or {}
    values: dict[str, Quantity] = {}
    if isinstance(allocatable, Mapping):
        for name in resources:
            if name in allocatable:
                try:
                    values[name] = Quantity.from_json(allocatable[name])
                except QuantityError:
                    continue
    text = _annotation(node, c.ANNOTATION_NODE_RAW_ALLOCATABLE)
    if text is not None:
        with contextlib.suppress(GoJSONError):  # parse errors ignored: status.allocatable
            values.update(_raw_allocatable(text))
    return tuple(resource_value(r, values[r]) if r in values else 0 for r in resources)


_MISSING = object()


def content_key(resources: Sequence[str], node: Mapping[str, Any]) -> Hashable:
    """Every input ``node_capacity`` and ``node_profile`` read of ``node``: the typed allocatable values
    of the vector's resources and the raw-allocatable and usage-thresholds annotation texts, so equal
    keys give equal results (nodes of one shape share them). Raises TypeError when not hashable."""
    allocatable = ((node.get("status") or {}).get("allocatable")) or {}
    values: list[Hashable] = []
    if isinstance(allocatable, Mapping):
        for name in resources:
            v = allocatable.get(name, _MISSING)
            values.append(_MISSING if v is _MISSING else (type(v), v))
    else:
        values.append("not-a-map")
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    texts: list[str | None] = [None, None]
    if isinstance(annotations, Mapping):
        for k, name in enumerate((c.ANNOTATION_NODE_RAW_ALLOCATABLE, c.ANNOTATION_USAGE_THRESHOLDS)):
            text = annotations.get(name)
            texts[k] = text if isinstance(text, str) else None
    key = (tuple(values), texts[0], texts[1])
    hash(key)
    return key
