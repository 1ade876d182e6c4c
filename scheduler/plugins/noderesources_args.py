"""Plugin args of the noderesources family, decoded from their JSON form with kube-scheduler's defaults
and validation (docs/rules/scheduler-basic.md#noderesources-plugin-args):

- ``NodeResourcesLeastAllocatedArgs`` / ``NodeResourcesMostAllocatedArgs`` (v1.20): ``resources``
  ``[{name, weight}]``, default cpu and memory with weight 1; each weight in 1..100.
- ``RequestedToCapacityRatioArgs`` (v1.20): ``shape`` ``[{utilization, score}]`` (required, utilization
  strictly increasing in 0..100, score in 0..10) and ``resources`` (default cpu and memory, weight ≥ 1).
- ``NodeResourcesFitArgs``: ``ignoredResources`` (label names), ``ignoredResourceGroups`` (label
  names without ``/``) from v1.20, and the later ``scoringStrategy`` ``{type, resources,
  requestedToCapacityRatio: {shape}}`` (default LeastAllocated over cpu and memory, weight 0 → 1,
  weights in 1..100).

Keys are matched as Go's JSON decoder does (exact first, then case-insensitively), so the v1beta1 and
v1 spellings, and the internal capitalised ones, are all accepted; unknown keys are ignored. Errors are
``ValueError`` naming the field path and value, followed by kube's own message.
Imports: standard library, apis.labelselector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis.labelselector import is_qualified_name

LEAST_ALLOCATED: Final = "LeastAllocated"
MOST_ALLOCATED: Final = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO: Final = "RequestedToCapacityRatio"
STRATEGY_TYPES: Final = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
DEFAULT_RESOURCES: Final = (("cpu", 1), ("memory", 1))
MAX_CUSTOM_PRIORITY_SCORE: Final = 10  # a shape point's score range; scaled to MaxNodeScore (100)
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Strategy:
    """A scoring rule and its inputs: ``resources`` as ``(name, weight)`` in first-appearance order
    with a repeated name's last weight (kube keeps them in a map); ``shape`` the broken-linear
    function's points ``(utilization, score × 10)`` for RequestedToCapacityRatio."""

    type: str
    resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ()


def field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` as Go's JSON decoder finds it: the exact key, else a case-insensitive match."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == low:
            return v
    return None


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{path}={value!r}: must be an object")
    return value


def _list(value: Any, path: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise ValueError(f"{path}={value!r}: must be a list")
    return value


def _int(value: Any, path: str, lo: int, hi: int) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{path}={value!r}: must be an integer")
    if not lo <= value <= hi:
        raise ValueError(f"{path}={value}: does not fit the field's integer type")
    return value


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{path}={value!r}: must be a string")
    return value


def parse_resources(raw: Any, path: str) -> list[tuple[str, int]]:
    """``[{name, weight}]`` as written (no defaults, no validation)."""
    out = []
    for i, r in enumerate(_list(raw, path)):
        m = _mapping(r, f"{path}[{i}]")
        out.append(
            (
                _str(field(m, "name"), f"{path}[{i}].name"),
                _int(field(m, "weight"), f"{path}[{i}].weight", INT64_MIN, INT64_MAX),
            )
        )
    return out


def parse_shape(raw: Any, path: str) -> list[tuple[int, int]]:
    """``[{utilization, score}]`` as written (int32 each)."""
    out = []
    for i, p in enumerate(_list(raw, path)):
        m = _mapping(p, f"{path}[{i}]")
        u = _int(field(m, "utilization"), f"{path}[{i}].utilization", INT32_MIN, INT32_MAX)
        s = _int(field(m, "score"), f"{path}[{i}].score", INT32_MIN, INT32_MAX)
        out.append((u, s))
    return out


def as_weight_map(resources: Sequence[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    """A Go ``map[name]weight`` built in order: a repeated name keeps its first place, its last weight."""
    weights: dict[str, int] = {}
    for name, w in resources:
        weights[name] = w
    return tuple(weights.items())


def scaled_shape(shape: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    return tuple((u, s * (100 // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape)


# --- v1.20 separate plugins ---------------------------------------------------------------------------
def allocated_strategy(args: Mapping[str, Any], kind: str) -> Strategy:
    """NodeResourcesLeastAllocatedArgs / NodeResourcesMostAllocatedArgs (``ValidateNodeResources*Args``)."""
    resources = parse_resources(field(_mapping(args, "args"), "resources"), "resources") or list(
        DEFAULT_RESOURCES
    )
    for i, (name, w) in enumerate(resources):
        if w <= 0:
            raise ValueError(
                f"resources[{i}].weight={w}: resource Weight of {name} should be a positive value, got {w}"
            )
        if w > 100:
            raise ValueError(
                f"resources[{i}].weight={w}: resource Weight of {name} should be less than 100, got {w}"
            )
    return Strategy(kind, as_weight_map(resources))


def validate_shape_v1beta1(shape: Sequence[tuple[int, int]]) -> None:
    """``validateFunctionShape`` of v1.20: the first failing rule, in kube's order and words."""
    if not shape:
        raise ValueError("shape=[]: at least one point must be specified")
    for i in range(1, len(shape)):
        if shape[i - 1][0] >= shape[i][0]:
            raise ValueError(
                f"shape[{i}].utilization={shape[i][0]}: utilization values must be sorted. "
                f"Utilization[{i - 1}]=={shape[i - 1][0]} >= Utilization[{i}]=={shape[i][0]}"
            )
    for i, (u, s) in enumerate(shape):
        if u < 0:
            raise ValueError(
                f"shape[{i}].utilization={u}: utilization values must not be less than 0. "
                f"Utilization[{i}]=={u}"
            )
        if u > 100:
            raise ValueError(
                f"shape[{i}].utilization={u}: utilization values must not be greater than 100. "
                f"Utilization[{i}]=={u}"
            )
        if s < 0:
            raise ValueError(f"shape[{i}].score={s}: score values must not be less than 0. Score[{i}]=={s}")
        if s > MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(
                f"shape[{i}].score={s}: score values must not be greater than 10. Score[{i}]=={s}"
            )


def requested_to_capacity_ratio_strategy(args: Mapping[str, Any]) -> Strategy:
    """RequestedToCapacityRatioArgs (``ValidateRequestedToCapacityRatioArgs``)."""
    m = _mapping(args, "args")
    shape = parse_shape(field(m, "shape"), "shape")
    resources = parse_resources(field(m, "resources"), "resources") or list(DEFAULT_RESOURCES)
    validate_shape_v1beta1(shape)
    for i, (name, w) in enumerate(resources):
        if w < 1:
            raise ValueError(f"resources[{i}].weight={w}: resource {name} weight {w} must not be less than 1")
    return Strategy(REQUESTED_TO_CAPACITY_RATIO, as_weight_map(resources), scaled_shape(shape))


# --- NodeResourcesFit -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FitArgs:
    ignored_resources: frozenset[str] = frozenset()
    ignored_groups: frozenset[str] = frozenset()
    strategy: Strategy = Strategy(LEAST_ALLOCATED)


def _label_names(raw: Any, path: str, groups: bool) -> frozenset[str]:
    out = set()
    for i, v in enumerate(_list(raw, path)):
        name = _str(v, f"{path}[{i}]")
        if groups and "/" in name:
            raise ValueError(f"{path}[{i}]={name!r}: resource group name can't contain '/'")
        if not is_qualified_name(name):
            raise ValueError(f"{path}[{i}]={name!r}: must be a valid label name (a qualified name)")
        out.add(name)
    return frozenset(out)


def validate_shape_v1(shape: Sequence[tuple[int, int]], path: str) -> None:
    """``validateFunctionShape`` of the scoringStrategy (later versions' words)."""
    if not shape:
        raise ValueError(f"{path}: Required value: at least one point must be specified")
    for i in range(1, len(shape)):
        if shape[i - 1][0] >= shape[i][0]:
            raise ValueError(
                f"{path}[{i}].utilization={shape[i][0]}: "
                "utilization values must be sorted in increasing order"
            )
    for i, (u, s) in enumerate(shape):
        if not 0 <= u <= 100:
            raise ValueError(f"{path}[{i}].utilization={u}: not in valid range [0, 100]")
        if not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"{path}[{i}].score={s}: not in valid range [0, 10]")


def scoring_strategy(raw: Any) -> Strategy:
    """``scoringStrategy`` with its defaults (absent: LeastAllocated; no resources: cpu and memory;
    weight 0 → 1) and validation."""
    if raw is None:
        return Strategy(LEAST_ALLOCATED)
    m = _mapping(raw, "scoringStrategy")
    kind = _str(field(m, "type"), "scoringStrategy.type")
    if kind not in STRATEGY_TYPES:
        supported = ", ".join(f'"{t}"' for t in STRATEGY_TYPES)
        raise ValueError(
            f'scoringStrategy.type="{kind}": Unsupported value: "{kind}": supported values: {supported}'
        )
    resources = parse_resources(field(m, "resources"), "scoringStrategy.resources") or list(DEFAULT_RESOURCES)
    resources = [(name, w or 1) for name, w in resources]
    for i, (name, w) in enumerate(resources):
        if not 0 < w <= 100:
            raise ValueError(
                f"scoringStrategy.resources[{i}].weight={w}: "
                f"resource weight of {name} not in valid range (0, 100]"
            )
    shape: list[tuple[int, int]] = []
    ratio = field(m, "requestedToCapacityRatio")
    if ratio is not None:
        shape = parse_shape(
            field(_mapping(ratio, "scoringStrategy.requestedToCapacityRatio"), "shape"),
            "scoringStrategy.shape",
        )
        validate_shape_v1(shape, "scoringStrategy.shape")
    elif kind == REQUESTED_TO_CAPACITY_RATIO:
        raise ValueError(
            "scoringStrategy.requestedToCapacityRatio=null: "
            "Required value: the shape of type RequestedToCapacityRatio"
        )
    return Strategy(
        kind, as_weight_map(resources), scaled_shape(shape) if kind == REQUESTED_TO_CAPACITY_RATIO else ()
    )


def fit_args(args: Mapping[str, Any]) -> FitArgs:
    """NodeResourcesFitArgs (``validateFitArgs`` of v1.20 plus the scoringStrategy's)."""
    m = _mapping(args, "args")
    return FitArgs(
        _label_names(field(m, "ignoredResources"), "ignoredResources", groups=False),
        _label_names(field(m, "ignoredResourceGroups"), "ignoredResourceGroups", groups=True),
        scoring_strategy(field(m, "scoringStrategy")),
    )
