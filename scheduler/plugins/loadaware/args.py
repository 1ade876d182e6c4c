"""LoadAwareSchedulingArgs (docs/configuration.md#loadawarescheduling-args): decoded from the
scheduler-config v1 JSON names, with upstream's defaults (``SetDefaults_LoadAwareSchedulingArgs``) and
validation (``ValidateLoadAwareSchedulingArgs``).
Invalid args raise ArgsError naming the field and its value: the plugin is then not constructible.
Also the resource vector (the sorted resource names every per-node array is indexed by).
Imports: the standard library and apis (duration).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.duration import Duration, DurationError

DEFAULT_ESTIMATOR: Final = "defaultEstimator"
DEFAULT_NODE_METRIC_EXPIRATION_SECONDS: Final = 180
DEFAULT_RESOURCE_WEIGHTS: Final[Mapping[str, int]] = {"cpu": 1, "memory": 1}
DEFAULT_USAGE_THRESHOLDS: Final[Mapping[str, int]] = {"cpu": 65, "memory": 95}
DEFAULT_SCALING_FACTORS: Final[Mapping[str, int]] = {"cpu": 85, "memory": 70}
AGGREGATION_TYPES: Final = frozenset({"avg", "p50", "p90", "p95", "p99"})

_BOOL_FIELDS: Final = {
    "filterExpiredNodeMetrics": True,
    "enableScheduleWhenNodeMetricsExpired": False,
    "prodUsageIncludeSys": False,
    "scoreAccordingProdUsage": False,
    "allowCustomizeEstimation": False,
}
_MAP_FIELDS: Final = ("resourceWeights", "usageThresholds", "prodUsageThresholds", "estimatedScalingFactors")
_INT_FIELDS: Final = (
    "nodeMetricExpirationSeconds",
    "dominantResourceWeight",
    "estimatedSecondsAfterPodScheduled",
    "estimatedSecondsAfterInitialized",
)
_KNOWN: Final = frozenset(
    {*_BOOL_FIELDS, *_MAP_FIELDS, *_INT_FIELDS, "estimator", "aggregated", "supportedResources"}
    | {"apiVersion", "kind"}
)
_AGG_KNOWN: Final = frozenset(
    {
        "usageThresholds",
        "usageAggregationType",
        "usageAggregatedDuration",
        "scoreAggregationType",
        "scoreAggregatedDuration",
    }
)


class ArgsError(ValueError):
    """Invalid LoadAwareSchedulingArgs; the message names the field and the value."""

    def __init__(self, path: str, value: object, reason: str) -> None:
        self.path = path
        self.value = value
        super().__init__(f"LoadAwareSchedulingArgs: field {path}={value!r}: {reason}")


@dataclass(frozen=True, slots=True)
class AggregatedArgs:
    """``aggregated``: percentile thresholds for Filter and the aggregated usage Score reads.
    Durations are nanoseconds (0 = the longest window the NodeMetric reports)."""

    usage_thresholds: dict[str, int] = field(default_factory=dict)
    usage_aggregation_type: str = ""
    usage_aggregated_duration: int = 0
    score_aggregation_type: str = ""
    score_aggregated_duration: int = 0

    @property
    def filter_enabled(self) -> bool:
        """Upstream ``filterWithAggregation``: thresholds and a type."""
        return bool(self.usage_thresholds) and self.usage_aggregation_type != ""

    @property
    def score_enabled(self) -> bool:
        """Upstream ``scoreWithAggregation``: a score aggregation type."""
        return self.score_aggregation_type != ""


@dataclass(frozen=True, slots=True)
class LoadAwareSchedulingArgs:
    """Defaulted, validated plugin arguments (field names are the Go ones in snake case)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    enable_schedule_when_node_metrics_expired: bool = False
    resource_weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    dominant_resource_weight: int = 0
    usage_thresholds: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    prod_usage_thresholds: dict[str, int] = field(default_factory=dict)
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = DEFAULT_ESTIMATOR
    estimated_scaling_factors: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_SCALING_FACTORS))
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: AggregatedArgs | None = None
    supported_resources: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> LoadAwareSchedulingArgs:
        """Decode v1 JSON (absent or null fields take the defaults), default and validate."""
        return _decode(raw or {})

    @property
    def resources(self) -> tuple[str, ...]:
        """The resource vector: cpu, memory and every resource any map or supportedResources names."""
        names = {"cpu", "memory", *self.usage_thresholds, *self.prod_usage_thresholds}
        names.update(self.resource_weights, self.estimated_scaling_factors, self.supported_resources)
        if self.aggregated is not None:
            names.update(self.aggregated.usage_thresholds)
        return tuple(sorted(names))


# --- decoding ------------------------------------------------------------------------------------------


def _int(path: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgsError(path, value, "must be an integer")
    if not -(1 << 63) <= value < (1 << 63):
        raise ArgsError(path, value, "is out of the int64 range")
    return value


def _bool(path: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ArgsError(path, value, "must be a boolean")
    return value


def _str(path: str, value: object) -> str:
    if not isinstance(value, str):
        raise ArgsError(path, value, "must be a string")
    return value


def _int_map(path: str, value: object) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ArgsError(path, value, "must be an object of resource name to integer")
    return {str(k): _int(f"{path}[{k}]", v) for k, v in value.items()}


def _duration(path: str, value: object) -> int:
    if value is None:
        return 0
    try:
        return Duration.parse(_str(path, value)).nanoseconds
    except DurationError as e:
        raise ArgsError(path, value, f"is not a Go duration: {e}") from None


def _agg_type(path: str, value: object) -> str:
    text = "" if value is None else _str(path, value)
    if text and text not in AGGREGATION_TYPES:
        raise ArgsError(path, value, f"must be one of {sorted(AGGREGATION_TYPES)} or empty")
    return text


def _decode_aggregated(raw: object) -> AggregatedArgs | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ArgsError("aggregated", raw, "must be an object")
    for key in raw:
        if key not in _AGG_KNOWN:
            raise ArgsError(f"aggregated.{key}", raw[key], "unknown field")
    return AggregatedArgs(
        usage_thresholds=_int_map("aggregated.usageThresholds", raw.get("usageThresholds")),
        usage_aggregation_type=_agg_type("aggregated.usageAggregationType", raw.get("usageAggregationType")),
        usage_aggregated_duration=_duration(
            "aggregated.usageAggregatedDuration", raw.get("usageAggregatedDuration")
        ),
        score_aggregation_type=_agg_type("aggregated.scoreAggregationType", raw.get("scoreAggregationType")),
        score_aggregated_duration=_duration(
            "aggregated.scoreAggregatedDuration", raw.get("scoreAggregatedDuration")
        ),
    )


def _decode(raw: Mapping[str, Any]) -> LoadAwareSchedulingArgs:
    if not isinstance(raw, Mapping):
        raise ArgsError("args", raw, "must be an object")
    for key in raw:
        if key not in _KNOWN:
            raise ArgsError(str(key), raw[key], "unknown field")
    get = raw.get
    bools = {k: d if get(k) is None else _bool(k, get(k)) for k, d in _BOOL_FIELDS.items()}
    ints = {k: None if get(k) is None else _int(k, get(k)) for k in _INT_FIELDS}
    maps = {k: _int_map(k, get(k)) for k in _MAP_FIELDS}
    dominant = ints["dominantResourceWeight"] or 0
    weights = maps["resourceWeights"]
    if not weights and dominant == 0:
        weights = dict(DEFAULT_RESOURCE_WEIGHTS)
    thresholds = maps["usageThresholds"] or dict(DEFAULT_USAGE_THRESHOLDS)
    factors = dict(maps["estimatedScalingFactors"])
    for name, factor in DEFAULT_SCALING_FACTORS.items():
        factors.setdefault(name, factor)
    supported = get("supportedResources")
    if supported is None:
        supported = []
    if not isinstance(supported, list):
        raise ArgsError("supportedResources", supported, "must be a list of resource names")
    expiration = ints["nodeMetricExpirationSeconds"]
    args = LoadAwareSchedulingArgs(
        filter_expired_node_metrics=bools["filterExpiredNodeMetrics"],
        node_metric_expiration_seconds=(
            DEFAULT_NODE_METRIC_EXPIRATION_SECONDS if expiration is None else expiration
        ),
        enable_schedule_when_node_metrics_expired=bools["enableScheduleWhenNodeMetricsExpired"],
        resource_weights=weights,
        dominant_resource_weight=dominant,
        usage_thresholds=thresholds,
        prod_usage_thresholds=maps["prodUsageThresholds"],
        prod_usage_include_sys=bools["prodUsageIncludeSys"],
        score_according_prod_usage=bools["scoreAccordingProdUsage"],
        estimator=(_str("estimator", get("estimator")) if get("estimator") else "") or DEFAULT_ESTIMATOR,
        estimated_scaling_factors=factors,
        estimated_seconds_after_pod_scheduled=ints["estimatedSecondsAfterPodScheduled"],
        estimated_seconds_after_initialized=ints["estimatedSecondsAfterInitialized"],
        allow_customize_estimation=bools["allowCustomizeEstimation"],
        aggregated=_decode_aggregated(get("aggregated")),
        supported_resources=tuple(_str(f"supportedResources[{i}]", r) for i, r in enumerate(supported)),
    )
    validate(args)
    return args


# --- validation --------------------------------------------------------------------------------------


def _check_range(path: str, values: Mapping[str, int], low: int, high: int) -> None:
    for name, v in values.items():
        if not low <= v <= high:
            raise ArgsError(f"{path}[{name}]", v, f"must be between {low} and {high}")


def validate(args: LoadAwareSchedulingArgs) -> None:
    """Upstream validation; raises ArgsError on the first violation."""
    if args.node_metric_expiration_seconds <= 0:
        raise ArgsError("nodeMetricExpirationSeconds", args.node_metric_expiration_seconds, "must be > 0")
    _check_range("resourceWeights", args.resource_weights, 1, 100)
    if not 0 <= args.dominant_resource_weight <= 100:
        raise ArgsError("dominantResourceWeight", args.dominant_resource_weight, "must be between 0 and 100")
    _check_range("usageThresholds", args.usage_thresholds, 0, 100)
    _check_range("prodUsageThresholds", args.prod_usage_thresholds, 0, 100)
    _check_range("estimatedScalingFactors", args.estimated_scaling_factors, 1, 100)
    for name in sorted(args.resource_weights):
        if name not in args.estimated_scaling_factors:
            raise ArgsError(
                f"estimatedScalingFactors[{name}]",
                None,
                "missing: every resourceWeights resource needs a factor",
            )
    if args.aggregated is not None:
        _check_range("aggregated.usageThresholds", args.aggregated.usage_thresholds, 0, 100)
        for path, d in (
            ("aggregated.usageAggregatedDuration", args.aggregated.usage_aggregated_duration),
            ("aggregated.scoreAggregatedDuration", args.aggregated.score_aggregated_duration),
        ):
            if d < 0:
                raise ArgsError(path, str(Duration(d)), "must not be negative")
    if args.estimator != DEFAULT_ESTIMATOR:
        raise ArgsError("estimator", args.estimator, f"unknown estimator (known: {DEFAULT_ESTIMATOR})")
