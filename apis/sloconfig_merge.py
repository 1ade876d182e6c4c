"""Per-key parsing and merging of ``slo-controller-config``, as pure functions.

See docs/configuration.md, "How a key is loaded" and "Node overrides and merge rules".
Each ``parse_*`` function takes the raw text of one ConfigMap key and returns ``(config, errors)``;
``config`` is ``None`` when the key must be rejected (the caller keeps its previous value). The merge
follows upstream: cluster = ``overlay(default, user cluster fields)``; each node entry =
``overlay(cluster, entry)``. Beyond upstream's type checks, merged strategies are validated against
the bounds declared on the typed fields (the manager's ``IsColocationStrategyValid`` for colocation,
the webhook's rules for the NodeSLO keys) field by field (docs/configuration.md, "Invalid values"):
an invalid cluster field takes its last good value (``previous``), or its default when there is none;
an invalid field of a node entry takes the cluster strategy's value; the valid fields still apply. A
document that is not JSON or holds a value of the wrong JSON type is rejected whole (upstream's
unmarshal failure), and a node selector that cannot be parsed never matches. Every problem is a
``ConfigKeyError`` naming key, JSON field path and value.
Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Final, TypeVar

from apis import constants as c
from apis.duration import Duration
from apis.gojson import (
    decode_into,
    overlay,
    validate,
)
from apis.gojson_base import FieldError, short_repr
from apis.gojson_repair import Repair, repair
from apis.nodemetric import AggregatePolicy
from apis.nodeslo_defaults import (
    default_cpu_burst_strategy,
    default_resource_threshold_strategy,
    default_system_strategy,
    manager_default_resource_qos_strategy,
)
from apis.sloconfig_types import (
    ColocationCfg,
    ColocationStrategy,
    CPUBurstCfg,
    CPUNormalizationCfg,
    CPUNormalizationStrategy,
    HostApplicationCfg,
    ResourceAmplificationCfg,
    ResourceAmplificationStrategy,
    ResourceQOSCfg,
    ResourceThresholdCfg,
    SystemCfg,
)

T = TypeVar("T")
DEFAULT_DURATIONS: Final = ("5m", "10m", "30m")


class ConfigKeyError(ValueError):
    """A problem in one ConfigMap key: ``key``, JSON ``field`` path (``""`` = whole document), ``value``.

    ``rejected`` is True when the whole key was refused (its previous value, or the default on first
    load, stays in force); False when only a node entry was replaced by the cluster strategy or ignored.
    """

    def __init__(
        self, key: str, field: str, value: Any, message: str, *, rejected: bool = True, consequence: str = ""
    ) -> None:
        self.key = key
        self.field = field
        self.value = value
        self.message = message
        self.rejected = rejected
        if not consequence:
            consequence = "key rejected, previous value kept" if rejected else "node entry ignored"
        shown = short_repr(value, 200)
        super().__init__(
            f"slo-controller-config key {key!r}, field {field or '(document)'}, value {shown}: "
            f"{message} ({consequence})"
        )


def merge_cfg(old: T, new: T | None) -> T:
    """Upstream ``util.MergeCfg``: the JSON overlay of ``new`` on ``old`` (see ``gojson.overlay``)."""
    return overlay(old, new)


_NEVER_MATCHES: Final = "this node selector never matches"


def _applied(value: Any) -> str:
    shown = "unset" if value is None else json.dumps(value, sort_keys=True, default=str)
    return shown if len(shown) <= 120 else shown[:117] + "..."


def _repaired(
    key: str, cfg: T, fallback: T | None, source: str, path: str = ""
) -> tuple[T, list[ConfigKeyError]]:
    """``repair`` reported as ConfigKeyErrors: ``source`` names what the fallback is."""
    fixed, repairs = repair(cfg, fallback, path)
    return fixed, [_repair_error(key, r, source) for r in repairs]


def _repair_error(key: str, r: Repair, source: str) -> ConfigKeyError:
    consequence = f"field falls back to the {source}: {_applied(r.applied)}"
    return ConfigKeyError(key, r.path, r.value, r.message, rejected=False, consequence=consequence)


def _key_errors(
    key: str, errs: list[FieldError], rejected: bool, consequence: str = ""
) -> list[ConfigKeyError]:
    return [
        ConfigKeyError(key, e.path, e.value, e.message, rejected=rejected, consequence=consequence)
        for e in errs
    ]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON literal {name}")


def load_json(key: str, text: str) -> Any:
    """Parse a key's JSON text strictly (no NaN/Infinity); raises ConfigKeyError on syntax errors."""
    if not isinstance(text, str):
        raise ConfigKeyError(key, "", text, "the value is not a string")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ConfigKeyError(key, "", text, f"invalid JSON: {exc}") from None


def _decode(key: str, text: str, target: T) -> tuple[T | None, list[ConfigKeyError]]:
    """Load and type-decode a document into ``target``; ``None`` plus errors if anything is fatal."""
    try:
        raw = load_json(key, text)
    except ConfigKeyError as exc:
        return None, [exc]
    result, errs = decode_into(target, raw)
    fatal = [e for e in errs if e.fatal]
    if fatal:
        return None, _key_errors(key, fatal, True)
    return result, _key_errors(key, errs, False, _NEVER_MATCHES)


# --- defaults ----------------------------------------------------------------------------------------
def default_colocation_strategy() -> ColocationStrategy:
    """``DefaultColocationStrategy`` (docs/configuration.md#colocation-config)."""
    return ColocationStrategy(
        enable=False,
        metric_aggregate_duration_seconds=300,
        metric_report_interval_seconds=60,
        metric_aggregate_policy=AggregatePolicy([Duration.parse(d) for d in DEFAULT_DURATIONS]),
        metric_memory_collect_policy="usageWithoutPageCache",
        cpu_reclaim_threshold_percent=60,
        cpu_calculate_policy="usage",
        memory_reclaim_threshold_percent=65,
        memory_calculate_policy="usage",
        degrade_time_minutes=15,
        update_time_threshold_seconds=300,
        resource_diff_threshold=0.1,
        mid_cpu_threshold_percent=100,
        mid_memory_threshold_percent=100,
        mid_unallocated_percent=0,
        mid_static_cpu_reserved_percent=0,
        mid_static_memory_reserved_percent=0,
    )


def default_colocation_cfg() -> ColocationCfg:
    return ColocationCfg(strategy=default_colocation_strategy())


def default_resource_threshold_cfg() -> ResourceThresholdCfg:
    return ResourceThresholdCfg(cluster_strategy=default_resource_threshold_strategy())


def default_resource_qos_cfg() -> ResourceQOSCfg:
    return ResourceQOSCfg(cluster_strategy=manager_default_resource_qos_strategy())


def default_cpu_burst_cfg() -> CPUBurstCfg:
    return CPUBurstCfg(cluster_strategy=default_cpu_burst_strategy())


def default_system_cfg() -> SystemCfg:
    return SystemCfg(cluster_strategy=default_system_strategy())


def default_host_application_cfg() -> HostApplicationCfg:
    return HostApplicationCfg()


def default_cpu_normalization_cfg() -> CPUNormalizationCfg:
    return CPUNormalizationCfg(strategy=CPUNormalizationStrategy(enable=False))


def default_resource_amplification_cfg() -> ResourceAmplificationCfg:
    return ResourceAmplificationCfg(strategy=ResourceAmplificationStrategy(enable=False))


NODE_SLO_DEFAULTS: Final = {
    c.RESOURCE_THRESHOLD_CONFIG_KEY: default_resource_threshold_cfg,
    c.RESOURCE_QOS_CONFIG_KEY: default_resource_qos_cfg,
    c.CPU_BURST_CONFIG_KEY: default_cpu_burst_cfg,
    c.SYSTEM_CONFIG_KEY: default_system_cfg,
}

# The document type each key decodes into (the user's text as written, before any merge).
KEY_DOCUMENTS: Final[dict[str, type[Any]]] = {
    c.COLOCATION_CONFIG_KEY: ColocationCfg,
    c.RESOURCE_THRESHOLD_CONFIG_KEY: ResourceThresholdCfg,
    c.RESOURCE_QOS_CONFIG_KEY: ResourceQOSCfg,
    c.CPU_BURST_CONFIG_KEY: CPUBurstCfg,
    c.SYSTEM_CONFIG_KEY: SystemCfg,
    c.HOST_APPLICATION_CONFIG_KEY: HostApplicationCfg,
    c.CPU_NORMALIZATION_CONFIG_KEY: CPUNormalizationCfg,
    c.RESOURCE_AMPLIFICATION_CONFIG_KEY: ResourceAmplificationCfg,
}


def decode_config_key(key: str, text: str) -> tuple[Any | None, list[ConfigKeyError]]:
    """The typed document of a known ``key`` exactly as written (no default, no merge, no repair): what
    every ``parse_*`` function starts from, with the same decode errors. ``None`` when the document is
    rejected whole; an unparsable node selector decodes as ``None`` with a non-fatal error."""
    return _decode(key, text, KEY_DOCUMENTS[key]())


# --- merging -----------------------------------------------------------------------------------------
def _merge_entries(
    key: str, cluster: Any, entries: list[Any] | None, list_name: str, pointer: bool
) -> tuple[list[Any] | None, list[ConfigKeyError]]:
    """overlay(cluster, entry) for each node entry; an invalid field takes the cluster's value."""
    if not entries:
        return None, []
    out: list[Any] = []
    errors: list[ConfigKeyError] = []
    for i, entry in enumerate(entries):
        if pointer and entry.strategy is None:
            out.append(replace(entry, strategy=cluster))  # no strategy fields: a copy of the cluster
            continue
        merged, errs = _repaired(
            key, overlay(cluster, entry.strategy), cluster, "cluster strategy", f"{list_name}[{i}]"
        )
        errors += errs
        out.append(replace(entry, strategy=merged))
    return out, errors


def _cluster(
    key: str, merged: T, previous: T | None, default: T, path: str = ""
) -> tuple[T | None, list[ConfigKeyError]]:
    """The merged cluster strategy with invalid fields at their last good (else default) values;
    ``None`` only if even that is invalid (a broken last good value: the key is rejected)."""
    source = "last good value" if previous is not None else "default"
    fixed, errors = _repaired(key, merged, previous if previous is not None else default, source, path)
    invalid = validate(fixed, path)
    if invalid:
        return None, errors + _key_errors(key, invalid, True)
    return fixed, errors


def merge_colocation_cfg(
    user: ColocationCfg, key: str = c.COLOCATION_CONFIG_KEY, previous: ColocationStrategy | None = None
) -> tuple[ColocationCfg | None, list[ConfigKeyError]]:
    """Merge with the defaults, repair invalid fields from ``previous`` (the last good cluster strategy)
    or the defaults (docs/configuration.md#colocation-config)."""
    default = default_colocation_strategy()
    cluster, errors = _cluster(key, overlay(default, user.strategy), previous, default)
    if cluster is None:
        return None, errors
    nodes, node_errors = _merge_entries(key, cluster, user.node_configs, "nodeConfigs", pointer=False)
    return ColocationCfg(strategy=cluster, node_configs=nodes), errors + node_errors


def parse_colocation_config(
    text: str, previous: ColocationStrategy | None = None
) -> tuple[ColocationCfg | None, list[ConfigKeyError]]:
    """Parse and merge ``colocation-config``; an empty text means the defaults.

    See docs/configuration.md#how-a-key-is-loaded.
    """
    key = c.COLOCATION_CONFIG_KEY
    if text == "":
        return default_colocation_cfg(), []
    user, errors = _decode(key, text, ColocationCfg())
    if user is None:
        return None, errors
    merged, merge_errors = merge_colocation_cfg(user, key, previous)
    return merged, errors + merge_errors


def parse_node_slo_config(
    key: str, text: str, previous: Any | None = None
) -> tuple[Any | None, list[ConfigKeyError]]:
    """Parse and merge one of the four NodeSLO keys (docs/configuration.md#how-a-key-is-loaded); ``""``
    is an error. ``previous``: the last good cluster strategy of the key (``None``: the default)."""
    default_cfg: Any = NODE_SLO_DEFAULTS[key]()
    user: Any
    user, errors = _decode(key, text, type(default_cfg)())
    if user is None:
        return None, errors
    merged = overlay(default_cfg.cluster_strategy, user.cluster_strategy)
    cluster, cluster_errors = _cluster(key, merged, previous, default_cfg.cluster_strategy, "clusterStrategy")
    if cluster is None:
        return None, errors + cluster_errors
    nodes, node_errors = _merge_entries(key, cluster, user.node_strategies, "nodeStrategies", pointer=True)
    cfg = replace(user, cluster_strategy=cluster, node_strategies=nodes)
    return cfg, errors + cluster_errors + node_errors


def parse_host_application_config(
    text: str, previous: HostApplicationCfg | None = None
) -> tuple[HostApplicationCfg | None, list[ConfigKeyError]]:
    """``host-application-config`` as-is (no default merge); an invalid field takes the value of the
    same field in ``previous`` (list entries matched by index), else it is unset."""
    key = c.HOST_APPLICATION_CONFIG_KEY
    cfg, errors = _decode(key, text, HostApplicationCfg())
    if cfg is None:
        return None, errors
    fixed, cfg_errors = _cluster(key, cfg, previous, HostApplicationCfg())
    return fixed, errors + cfg_errors


def _parse_inline_cfg(
    key: str, text: str, default_cfg: Any, previous: Any | None
) -> tuple[Any | None, list[ConfigKeyError]]:
    """Documents with the cluster strategy inline plus ``nodeConfigs`` (normalization, amplification)."""
    user, errors = _decode(key, text, type(default_cfg)())
    if user is None:
        return None, errors
    cluster, cluster_errors = _cluster(
        key, overlay(default_cfg.strategy, user.strategy), previous, default_cfg.strategy
    )
    if cluster is None:
        return None, errors + cluster_errors
    nodes, node_errors = _merge_entries(key, cluster, user.node_configs, "nodeConfigs", pointer=False)
    return replace(user, strategy=cluster, node_configs=nodes), errors + cluster_errors + node_errors


def parse_cpu_normalization_config(
    text: str, previous: CPUNormalizationStrategy | None = None
) -> tuple[CPUNormalizationCfg | None, list[ConfigKeyError]]:
    """``cpu-normalization-config``: overlay on ``{enable: false}``, node entries on the cluster."""
    key = c.CPU_NORMALIZATION_CONFIG_KEY
    cfg, errors = _parse_inline_cfg(key, text, default_cpu_normalization_cfg(), previous)
    return cfg, errors


def parse_resource_amplification_config(
    text: str, previous: ResourceAmplificationStrategy | None = None
) -> tuple[ResourceAmplificationCfg | None, list[ConfigKeyError]]:
    """``resource-amplification-config``: overlay on ``{enable: false}``; ratios below 1 fall back."""
    key = c.RESOURCE_AMPLIFICATION_CONFIG_KEY
    cfg, errors = _parse_inline_cfg(key, text, default_resource_amplification_cfg(), previous)
    return cfg, errors
