"""The ``slo-controller-config`` ConfigMap: load every key with keep-last-good, and per-node results.

``parse_slo_controller_config(data, previous)`` turns ConfigMap ``data`` (``None`` when the ConfigMap is
missing) into an immutable ``SLOControllerConfig`` plus a list of ``ConfigKeyError``. Each key is handled
independently (docs/configuration.md#how-a-key-is-loaded,
docs/rules/manager.md#a-bad-configmap-key-never-stops-the-manager): a key that cannot be decoded keeps
``previous``'s value (or its default on first load); within a decoded key an invalid field takes its last good
value from ``previous`` (or its default) while the valid fields apply
(docs/configuration.md, "Invalid values"). Colocation additionally tracks upstream's cache flags:
``colocation_error`` (errorStatus) and ``colocation_available`` (false after a failed first load, until
a valid update). Unknown keys are kept as raw JSON text. ``decode_config_key`` gives one key's document as
written, before any merge (the admission webhook's upstream checks read it,
docs/rules/manager.md#configmap-slo-controller-config). Per node: ``node_colocation_strategy``
(docs/configuration.md#node-overrides-and-merge-rules), ``node_slo_spec``
(docs/rules/manager.md#nodeslo-one-nodeslo-per-node) and ``node_metric_collect_policy``
(docs/rules/manager.md#nodemetric-one-nodemetric-per-node).
Imports: the standard library and ``apis`` modules. Pure, no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from apis import constants as c
from apis.gojson import (
    decode_into,
    overlay,
    validate,
)
from apis.labelselector import selector_matches
from apis.nodemetric import AggregatePolicy, MemoryCollectPolicy, NodeMetricCollectPolicy
from apis.nodeslo import NodeSLOSpec
from apis.quantity import Quantity, QuantityError
from apis.sloconfig_merge import (
    NODE_SLO_DEFAULTS,
    ConfigKeyError,
    decode_config_key,
    default_colocation_cfg,
    default_colocation_strategy,
    default_cpu_burst_cfg,
    default_cpu_normalization_cfg,
    default_host_application_cfg,
    default_resource_amplification_cfg,
    default_resource_qos_cfg,
    default_resource_threshold_cfg,
    default_system_cfg,
    load_json,
    merge_cfg,
    parse_colocation_config,
    parse_cpu_normalization_config,
    parse_host_application_config,
    parse_node_slo_config,
    parse_resource_amplification_config,
)
from apis.sloconfig_types import (
    ColocationCfg,
    ColocationStrategy,
    CPUBurstCfg,
    CPUNormalizationCfg,
    HostApplicationCfg,
    ResourceAmplificationCfg,
    ResourceQOSCfg,
    ResourceThresholdCfg,
    SystemCfg,
)

__all__ = [
    "ConfigKeyError",
    "SLOControllerConfig",
    "decode_config_key",
    "default_colocation_strategy",
    "default_node_metric_collect_policy",
    "default_slo_controller_config",
    "go_parse_float",
    "merge_cfg",
    "node_colocation_enabled",
    "node_colocation_strategy",
    "node_metric_collect_policy",
    "node_slo_spec",
    "parse_slo_controller_config",
    "ratio_label_percent",
]

KNOWN_KEYS: Final = frozenset(
    {
        c.COLOCATION_CONFIG_KEY,
        c.RESOURCE_THRESHOLD_CONFIG_KEY,
        c.RESOURCE_QOS_CONFIG_KEY,
        c.CPU_BURST_CONFIG_KEY,
        c.SYSTEM_CONFIG_KEY,
        c.HOST_APPLICATION_CONFIG_KEY,
        c.CPU_NORMALIZATION_CONFIG_KEY,
        c.RESOURCE_AMPLIFICATION_CONFIG_KEY,
    }
)
# node label (float ratio) → colocation field it overrides, as int64(v*100)
RATIO_LABELS: Final = (
    (c.LABEL_CPU_RECLAIM_RATIO, "cpu_reclaim_threshold_percent"),
    (c.LABEL_MEMORY_RECLAIM_RATIO, "memory_reclaim_threshold_percent"),
    (c.LABEL_MID_STATIC_CPU_RESERVED_RATIO, "mid_static_cpu_reserved_percent"),
    (c.LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "mid_static_memory_reserved_percent"),
)
_DECIMAL_FLOAT: Final = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT: Final = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+")
_SPECIAL_FLOATS: Final = {"inf": math.inf, "infinity": math.inf, "nan": math.nan}


@dataclass(frozen=True)
class SLOControllerConfig:
    """Every key of the ConfigMap, merged as the manager caches it.

    See docs/configuration.md#how-a-key-is-loaded.
    """

    colocation: ColocationCfg = field(default_factory=default_colocation_cfg)
    colocation_available: bool = True
    colocation_error: bool = False
    resource_threshold: ResourceThresholdCfg = field(default_factory=default_resource_threshold_cfg)
    resource_qos: ResourceQOSCfg = field(default_factory=default_resource_qos_cfg)
    cpu_burst: CPUBurstCfg = field(default_factory=default_cpu_burst_cfg)
    system: SystemCfg = field(default_factory=default_system_cfg)
    host_application: HostApplicationCfg = field(default_factory=default_host_application_cfg)
    cpu_normalization: CPUNormalizationCfg = field(default_factory=default_cpu_normalization_cfg)
    resource_amplification: ResourceAmplificationCfg = field(
        default_factory=default_resource_amplification_cfg
    )
    extensions: Mapping[str, str] = field(default_factory=dict)


_SLO_ATTRS: Final = {
    c.RESOURCE_THRESHOLD_CONFIG_KEY: "resource_threshold",
    c.RESOURCE_QOS_CONFIG_KEY: "resource_qos",
    c.CPU_BURST_CONFIG_KEY: "cpu_burst",
    c.SYSTEM_CONFIG_KEY: "system",
}


def default_slo_controller_config() -> SLOControllerConfig:
    """Every key at its default (what a valid empty ConfigMap gives)."""
    return SLOControllerConfig()


def parse_slo_controller_config(
    data: Mapping[str, str] | None, previous: SLOControllerConfig | None = None
) -> tuple[SLOControllerConfig, list[ConfigKeyError]]:
    """Load ConfigMap ``data`` (``None``: the ConfigMap does not exist) on top of ``previous``.

    Never raises for bad content: every problem is returned as a ConfigKeyError.
    """
    # missing ConfigMap: defaults, colocation flagged as error (docs/configuration.md#how-a-key-is-loaded)
    if data is None:
        return replace(default_slo_controller_config(), colocation_error=True), []
    base = previous if previous is not None else SLOControllerConfig(colocation_available=False)
    errors: list[ConfigKeyError] = []
    changes: dict[str, Any] = {}

    text = data.get(c.COLOCATION_CONFIG_KEY, "")
    last_good = (
        previous.colocation.strategy if previous is not None and previous.colocation_available else None
    )
    colocation, errs = parse_colocation_config(text, last_good)
    errors += errs
    if colocation is None:
        changes["colocation_error"] = True  # keep the cached config; availability unchanged
    else:
        changes.update(colocation=colocation, colocation_available=True, colocation_error=False)

    for key, attr in _SLO_ATTRS.items():
        if key not in data:
            changes[attr] = NODE_SLO_DEFAULTS[key]()
            continue
        last = getattr(previous, attr).cluster_strategy if previous is not None else None
        cfg, errs = parse_node_slo_config(key, data[key], last)
        errors += errs
        changes[attr] = cfg if cfg is not None else getattr(previous, attr, NODE_SLO_DEFAULTS[key]())

    others: tuple[tuple[str, str, Any, Any], ...] = (
        (c.HOST_APPLICATION_CONFIG_KEY, "host_application", parse_host_application_config,
         None if previous is None else previous.host_application),
        (c.CPU_NORMALIZATION_CONFIG_KEY, "cpu_normalization", parse_cpu_normalization_config,
         None if previous is None else previous.cpu_normalization.strategy),
        (c.RESOURCE_AMPLIFICATION_CONFIG_KEY, "resource_amplification", parse_resource_amplification_config,
         None if previous is None else previous.resource_amplification.strategy),
    )  # fmt: skip
    defaults = SLOControllerConfig()
    for key, attr, parse, last in others:
        if key not in data:
            changes[attr] = getattr(defaults, attr)
            continue
        parsed, errs = parse(data[key], last)
        errors += errs
        changes[attr] = parsed if parsed is not None else getattr(base, attr)

    changes["extensions"] = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    return replace(base, **changes), errors


# --- per node ------------------------------------------------------------------------------------------
def go_parse_float(text: str) -> float | None:
    """Go ``strconv.ParseFloat(s, 64)`` accepting decimal, hex and inf/nan forms; ``None`` if rejected."""
    special = _SPECIAL_FLOATS.get(text.lstrip("+-").lower())
    if special is not None:
        return -special if text.startswith("-") else special
    try:
        if _DECIMAL_FLOAT.fullmatch(text):
            value = float(text)
        elif _HEX_FLOAT.fullmatch(text):
            value = float.fromhex(text)
        else:
            return None
    except (ValueError, OverflowError):
        return None
    return None if math.isinf(value) else value


def ratio_label_percent(text: str) -> int | None:
    """A reclaim/reserved ratio label as a percent: ``int64(v*100)`` truncated ("0.29" → 28).

    Negative, unparsable, NaN and infinite values (and ones overflowing int64) are ignored (``None``).
    """
    value = go_parse_float(text)
    if value is None or math.isnan(value) or value < 0:
        return None
    percent = value * 100
    if not math.isfinite(percent) or percent >= 2.0**63:
        return None
    return int(percent)


def node_colocation_strategy(
    cfg: SLOControllerConfig | ColocationCfg, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> ColocationStrategy:
    """``GetNodeColocationStrategy``: cluster, first matching nodeConfig, annotation, then ratio labels."""
    colocation = cfg.colocation if isinstance(cfg, SLOControllerConfig) else cfg
    strategy = colocation.strategy
    for node_cfg in colocation.node_configs or []:
        if selector_matches(node_cfg.node_selector, labels):
            strategy = overlay(strategy, node_cfg.strategy)
            break
    text = annotations.get(c.ANNOTATION_NODE_COLOCATION_STRATEGY)
    if text is not None:
        try:
            on_node, errs = decode_into(ColocationStrategy(), load_json("", text))
        except ConfigKeyError:
            errs, on_node = [], None
        if on_node is not None and not any(e.fatal for e in errs):
            strategy = overlay(strategy, on_node)
    changes: dict[str, Any] = {}
    for label, attr in RATIO_LABELS:
        if label in labels:
            percent = ratio_label_percent(labels[label])
            if percent is not None:
                changes[attr] = percent
    return replace(strategy, **changes) if changes else strategy


def node_colocation_enabled(
    cfg: SLOControllerConfig | ColocationCfg, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> bool:
    """Colocation is on for a node only if the cluster ``enable`` and the node's merged ``enable`` are
    both true: a node cannot enable it while the cluster has it off (an upstream quirk,
    docs/rules/manager.md#colocation-cannot-be-enabled-on-one-node-alone)."""
    colocation = cfg.colocation if isinstance(cfg, SLOControllerConfig) else cfg
    if colocation.strategy.enable is not True:
        return False
    return node_colocation_strategy(colocation, labels, annotations).enable is True


def default_node_metric_collect_policy() -> NodeMetricCollectPolicy:
    """300 s / 60 s / [5m, 10m, 30m] / usageWithoutPageCache (docs/configuration.md#colocation-config)."""
    return _collect_policy(default_colocation_strategy())


def node_metric_collect_policy(strategy: ColocationStrategy | None) -> NodeMetricCollectPolicy:
    """The NodeMetric ``spec.metricCollectPolicy`` of a node's merged colocation strategy.

    See docs/rules/manager.md#nodemetric-one-nodemetric-per-node. Taken from the strategy only when it is
    valid and ``enable`` is true, else the defaults.
    """
    if strategy is None or strategy.enable is not True or validate(strategy):
        return default_node_metric_collect_policy()
    return _collect_policy(strategy)


def _collect_policy(strategy: ColocationStrategy) -> NodeMetricCollectPolicy:
    """The strategy's metric fields (copied: the policy is mutable). A memory collect policy that is no
    ``MemoryCollectPolicy`` value is left unset: the koordlet then reports usage without page cache,
    as upstream's does for any unknown policy."""
    aggregate = strategy.metric_aggregate_policy
    memory = strategy.metric_memory_collect_policy
    if memory == "":  # "" means unset: the default policy
        memory = default_colocation_strategy().metric_memory_collect_policy
    known = {m.value for m in MemoryCollectPolicy}
    return NodeMetricCollectPolicy(
        aggregate_duration_seconds=strategy.metric_aggregate_duration_seconds,
        report_interval_seconds=strategy.metric_report_interval_seconds,
        node_aggregate_policy=None if aggregate is None else AggregatePolicy(list(aggregate.durations)),
        node_memory_collect_policy=MemoryCollectPolicy(memory) if memory in known else None,
    )


def _pick(cfg: Any, labels: Mapping[str, str]) -> Any:
    """The first node strategy whose selector matches, else the cluster strategy."""
    for entry in cfg.node_strategies or []:
        if selector_matches(entry.node_selector, labels):
            return entry.strategy
    return cfg.cluster_strategy


def node_slo_spec(
    cfg: SLOControllerConfig,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    old_extensions: Mapping[str, Any] | None = None,
) -> NodeSLOSpec:
    """``getNodeSLOSpec``: the NodeSLO spec the manager writes for a node.

    See docs/rules/manager.md#nodeslo-one-nodeslo-per-node.

    ``extensions`` starts from the old spec's (no extension plugin is registered: ``{}`` otherwise).
    A ``node.koordinator.sh/network-bandwidth`` annotation that is not a quantity drops systemStrategy.
    """
    system = _pick(cfg.system, labels)
    bandwidth = annotations.get(c.ANNOTATION_NETWORK_BANDWIDTH)
    if bandwidth is not None and system is not None:
        try:
            system = replace(system, total_network_bandwidth=Quantity.parse(bandwidth))
        except QuantityError:
            system = None
    apps = cfg.host_application.applications
    for node_cfg in cfg.host_application.node_configs or []:
        if selector_matches(node_cfg.node_selector, labels):
            apps = node_cfg.applications
            break
    return NodeSLOSpec(
        resource_used_threshold_with_be=_pick(cfg.resource_threshold, labels),
        resource_qos_strategy=_pick(cfg.resource_qos, labels),
        cpu_burst_strategy=_pick(cfg.cpu_burst, labels),
        system_strategy=system,
        extensions=dict(old_extensions or {}),
        host_applications=list(apps) if apps else None,
    )
