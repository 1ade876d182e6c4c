"""Upstream's slo-controller-config webhook checks that the manager's own parser does not make.

See docs/rules/manager.md#configmap-slo-controller-config. They run on the user's documents as written
(``apis.sloconfig.decode_config_key``: no defaults, no merge), as upstream's checkers do, and never refuse
what upstream's webhook accepts:

- ``node_profile_problems``: node entries (``nodeConfigs`` of colocation-config, ``nodeStrategies`` of
  the four NodeSLO keys) need a non-empty ``nodeSelector``; with ``check_names`` (upstream's
  ``--node-strategy-name-need-check``, off by default) a non-empty, unique ``name``; and no two entries
  may match one node: neither one of the label sets built from the selectors (upstream's
  ``NodeSelectorOverlap``) nor one of the cluster's nodes (``ExistNodeConflict``, when given).
- ``net_qos_problems``: resource-qos-config's ``networkQOS`` requests of lsrClass/lsClass/beClass use one
  format per strategy, their integer percentages add up to at most 100 per direction, and their
  quantities to at most the strategy's known ``totalNetworkBandwidth`` of system-config.
- ``colocation_bound_problems``: the bounds upstream's webhook declares on colocation fields beyond the
  manager's (``resourceDiffThreshold`` <= 1, ``midStatic{CPU,Memory}ReservedPercent`` <= 100).

Every message is ``<key>: <field>: <value as JSON> <rule>``.
Imports: the standard library, apis.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from apis import constants as c
from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector
from apis.quantity import Quantity, QuantityError
from apis.sloconfig import ConfigKeyError

__all__ = [
    "colocation_bound_problems",
    "message",
    "net_qos_problems",
    "node_profile_problems",
    "shown",
]

# The list of node entries of each key upstream checks (host-application, cpu-normalization and
# resource-amplification have no upstream checker).
ENTRY_LISTS: Final = {
    c.COLOCATION_CONFIG_KEY: ("nodeConfigs", "node_configs"),
    c.RESOURCE_THRESHOLD_CONFIG_KEY: ("nodeStrategies", "node_strategies"),
    c.RESOURCE_QOS_CONFIG_KEY: ("nodeStrategies", "node_strategies"),
    c.CPU_BURST_CONFIG_KEY: ("nodeStrategies", "node_strategies"),
    c.SYSTEM_CONFIG_KEY: ("nodeStrategies", "node_strategies"),
}
# Upstream webhook bounds on colocation fields the manager's validity rule does not have:
# JSON name → (attribute, maximum).
COLOCATION_MAXIMA: Final = {
    "resourceDiffThreshold": ("resource_diff_threshold", 1),
    "midStaticCPUReservedPercent": ("mid_static_cpu_reserved_percent", 100),
    "midStaticMemoryReservedPercent": ("mid_static_memory_reserved_percent", 100),
}
NET_CLASSES: Final = (("lsrClass", "lsr_class"), ("lsClass", "ls_class"), ("beClass", "be_class"))
NET_REQUESTS: Final = (
    ("ingress", "ingressRequest", "ingress_request"),
    ("egress", "egressRequest", "egress_request"),
)
_MAX_SHOWN: Final = 200
MAX_VIRTUAL_NODES: Final = 1000


def _plain(value: Any) -> Any:
    """A float that is a whole number as the int it was written as (Go's JSON writes 2, not 2.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def shown(value: Any) -> str:
    """A value as compact JSON (strings quoted), shortened when long."""
    value = _plain(value)
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


def message(key: str, field: str, value: Any, rule: str) -> str:
    """``<key>: <field>: <value> <rule>``, the one form of every refusal."""
    return f"{key}: {field or '(document)'}: {shown(value)} {rule}"


# --- node entries ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Entry:
    path: str  # e.g. "nodeStrategies[1]"
    name: str
    selector: LabelSelector | None  # None: absent, null or unparsable


def _entries(key: str, doc: Any) -> list[_Entry]:
    list_name, attr = ENTRY_LISTS[key]
    return [
        _Entry(f"{list_name}[{i}]", entry.name or "", entry.node_selector)
        for i, entry in enumerate(getattr(doc, attr) or [])
    ]


def _label(entry: _Entry) -> str:
    return f"{entry.path} ({entry.name!r})" if entry.name else entry.path


def _virtual_nodes(selector: LabelSelector) -> list[dict[str, str]]:
    """Upstream's test label sets of one selector: every set carries ``matchLabels``; the i-th set
    takes, for each expression with values, its value ``i % len(values)``, for i below the product of
    those value counts (not every combination is built, as upstream). Only the first
    ``lcm(value counts)`` sets differ, so only those are built, and at most ``MAX_VIRTUAL_NODES`` (a
    ConfigMap could otherwise make the webhook build billions; checking fewer never refuses more)."""
    counts = [len(req.values) for req in selector.match_expressions if req.values]
    count = min(math.lcm(*counts) if counts else 1, MAX_VIRTUAL_NODES)
    nodes = [dict(selector.match_labels) for _ in range(count)]
    for req in selector.match_expressions:
        if req.values:
            for i, labels in enumerate(nodes):
                labels[req.key] = req.values[i % len(req.values)]
    return nodes


def node_profile_problems(
    key: str,
    doc: Any,
    decode_errors: Iterable[ConfigKeyError],
    *,
    nodes: Iterable[Mapping[str, Any]] = (),
    check_names: bool = False,
) -> list[str]:
    """Selector, name and overlap refusals of one key's node entries (empty for keys without entries)."""
    if key not in ENTRY_LISTS:
        return []
    entries = _entries(key, doc)
    # An unparsable selector is already refused by the manager's parser (and never matches).
    unparsable = {e.field.split(".nodeSelector", 1)[0] for e in decode_errors if ".nodeSelector" in e.field}
    problems: list[str] = []
    usable: list[_Entry] = []
    for entry in entries:
        if entry.path in unparsable:
            continue
        if entry.selector is None or entry.selector.is_empty():
            value = None if entry.selector is None else entry.selector.to_dict()
            problems.append(
                message(key, f"{entry.path}.nodeSelector", value,
                        "must not be empty: a node entry needs matchLabels or matchExpressions")
            )  # fmt: skip
        else:
            usable.append(entry)
    if check_names:
        problems += _name_problems(key, entries)
    seen: set[tuple[str, ...]] = set()
    problems += _overlaps(key, usable, seen)
    if len(usable) > 1:
        problems += _node_conflicts(key, usable, nodes, seen)
    return problems


def _name_problems(key: str, entries: list[_Entry]) -> list[str]:
    problems: list[str] = []
    first: dict[str, str] = {}
    for entry in entries:
        if not entry.name:
            problems.append(message(key, f"{entry.path}.name", entry.name, "must not be empty"))
        elif entry.name in first:
            problems.append(
                message(key, f"{entry.path}.name", entry.name, f"is already the name of {first[entry.name]}")
            )
        else:
            first[entry.name] = entry.path
    return problems


def _matching(entries: list[_Entry], labels: Mapping[str, str]) -> tuple[_Entry, ...]:
    return tuple(e for e in entries if e.selector is not None and e.selector.matches(labels))


def _overlap(key: str, matched: tuple[_Entry, ...], where: str) -> str:
    """The refusal of entries that all match one label set: named on the last of them."""
    last = matched[-1]
    assert last.selector is not None
    others = ", ".join(_label(e) for e in matched[:-1])
    rule = f"overlaps {others}: {where} matches them all"
    return message(key, f"{last.path}.nodeSelector", last.selector.to_dict(), rule)


def _overlaps(key: str, entries: list[_Entry], seen: set[tuple[str, ...]]) -> list[str]:
    """upstream ``NodeSelectorOverlap`` over the label sets built from every selector (``seen``: the
    sets of entries already refused, updated)."""
    problems: list[str] = []
    for entry in entries:
        assert entry.selector is not None
        for labels in _virtual_nodes(entry.selector):
            matched = _matching(entries, labels)
            paths = tuple(e.path for e in matched)
            if len(matched) > 1 and paths not in seen:
                seen.add(paths)
                problems.append(_overlap(key, matched, f"a node labelled {shown(labels)}"))
    return problems


def _node_conflicts(
    key: str, entries: list[_Entry], nodes: Iterable[Mapping[str, Any]], seen: set[tuple[str, ...]]
) -> list[str]:
    """upstream ``ExistNodeConflict``: one refusal per set of entries that match one existing node (the
    first such node named), unless that set is refused already."""
    problems: list[str] = []
    for node in nodes:
        meta = as_mapping(node.get("metadata"))
        labels = {str(k): v for k, v in as_mapping(meta.get("labels")).items() if isinstance(v, str)}
        matched = _matching(entries, labels)
        paths = tuple(e.path for e in matched)
        if len(matched) > 1 and paths not in seen:
            seen.add(paths)
            problems.append(_overlap(key, matched, f"the existing node {shown(meta.get('name'))}"))
    return problems


# --- resource-qos-config networkQOS ------------------------------------------------------------------
def _requests(strategy: Any) -> dict[str, dict[str, int | str]]:
    """direction → {JSON path: value} of the lsr/ls/be ingress and egress requests that are set."""
    out: dict[str, dict[str, int | str]] = {"ingress": {}, "egress": {}}
    if strategy is None:
        return out
    for class_name, class_attr in NET_CLASSES:
        qos = getattr(strategy, class_attr)
        net = None if qos is None else qos.network_qos
        if net is None:
            continue
        for direction, json_name, attr in NET_REQUESTS:
            value = getattr(net, attr)
            if value is not None:
                out[direction][f"{class_name}.networkQOS.{json_name}"] = value
    return out


def _quantity_value(text: str) -> int | None:
    try:
        return Quantity.parse(text).value()
    except QuantityError:
        return None  # the manager's parser refuses it


def _total_bandwidth(
    selector: LabelSelector | None, system: Any, node_entry: bool
) -> tuple[Quantity | None, str]:
    """upstream ``getTotalNetBandWidth`` and where it comes from: the system-config cluster total for the
    cluster strategy (and for node entries when system-config has no node strategies), else the total of
    the system-config node strategy with an equal selector. ``None`` when unknown or zero: not checked
    (upstream then refuses every request)."""
    source = f"{c.SYSTEM_CONFIG_KEY} clusterStrategy"
    if system is None:
        return None, source
    total: Quantity | None = None
    if not node_entry or not system.node_strategies:
        cluster = system.cluster_strategy
        total = None if cluster is None else cluster.total_network_bandwidth
    else:
        for i, entry in enumerate(system.node_strategies):
            if entry.node_selector is not None and entry.node_selector == selector:
                total = None if entry.strategy is None else entry.strategy.total_network_bandwidth
                source = f"{c.SYSTEM_CONFIG_KEY} nodeStrategies[{i}]"
                break
    return (total if total is not None and total.sign() > 0 else None), source


def _strategy_net_problems(
    key: str, path: str, strategy: Any, total: Quantity | None, source: str
) -> list[str]:
    requests = _requests(strategy)
    every = {**requests["ingress"], **requests["egress"]}
    if len({type(v) for v in every.values()}) > 1:
        rule = "mixes integer percentages and bandwidth quantities: only one format can be used"
        return [message(key, path, every, rule)]
    problems: list[str] = []
    for direction, values in requests.items():
        percents = sum(v for v in values.values() if isinstance(v, int))
        if percents > 100:
            rule = f"{direction} request percentages add up to {percents}, above 100"
            problems.append(message(key, path, values, rule))
        if total is None:
            continue
        amounts = [_quantity_value(v) for v in values.values() if isinstance(v, str)]
        used = sum(a for a in amounts if a is not None)
        if used > total.value():
            rule = (
                f"{direction} requests add up to {Quantity.from_int(used)}, above the totalNetworkBandwidth "
                f"{total} of {source}"
            )
            problems.append(message(key, path, values, rule))
    return problems


def net_qos_problems(key: str, doc: Any, system: Any) -> list[str]:
    """Refusals of resource-qos-config's networkQOS requests (``system``: system-config's document as
    written in the same ConfigMap, ``None`` when absent or undecodable)."""
    if key != c.RESOURCE_QOS_CONFIG_KEY:
        return []
    total, source = _total_bandwidth(None, system, node_entry=False)
    problems = _strategy_net_problems(key, "clusterStrategy", doc.cluster_strategy, total, source)
    for i, entry in enumerate(doc.node_strategies or []):
        total, source = _total_bandwidth(entry.node_selector, system, node_entry=True)
        problems += _strategy_net_problems(key, f"nodeStrategies[{i}]", entry.strategy, total, source)
    return problems


# --- colocation-config bounds ------------------------------------------------------------------------
def colocation_bound_problems(key: str, doc: Any) -> list[str]:
    """Upstream's maxima on colocation fields, in the cluster strategy and every ``nodeConfigs`` entry."""
    if key != c.COLOCATION_CONFIG_KEY:
        return []
    strategies = [("", doc.strategy)]
    strategies += [(f"nodeConfigs[{i}].", e.strategy) for i, e in enumerate(doc.node_configs or [])]
    problems: list[str] = []
    for prefix, strategy in strategies:
        for json_name, (attr, maximum) in COLOCATION_MAXIMA.items():
            value = getattr(strategy, attr)
            if value is not None and value > maximum:
                problems.append(message(key, f"{prefix}{json_name}", value, f"must be <= {maximum}"))
    return problems
