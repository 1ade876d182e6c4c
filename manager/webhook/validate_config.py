"""The validating admission rule for the ``slo-controller-config`` ConfigMap, as a pure decision.

See docs/rules/manager.md#configmap-slo-controller-config. ``validate_slo_config(configmap, operation=,
old=)`` returns the refusal messages of a CREATE or UPDATE (empty: allowed). Only the ConfigMap named
``name`` in ``namespace`` (the manager's defaults) is checked; any other ConfigMap, DELETE and CONNECT are
allowed. As upstream, only the known keys that are non-empty and changed (every non-empty key on CREATE)
are checked, so a bad key already stored never blocks an edit of another one.

A checked key is refused for every problem the manager's own parser reports on it
(``apis.sloconfig.parse_slo_controller_config``, the one rule: a document that is not JSON or holds a
wrong JSON type, a node selector that does not parse, and every field the manager would otherwise replace
by its last good or default value, docs/configuration.md#invalid-values), and for upstream's webhook
checks the parser does not make (``manager.webhook.config_checks``). Each message names the key, the JSON
field and the value, in the manager's wording:
``resource-threshold-config: clusterStrategy.cpuSuppressThresholdPercent: 150 must be <= 100``.
Imports: the standard library, apis, manager.webhook.config_checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from apis import constants as c
from apis.jsonfields import as_mapping
from apis.sloconfig import ConfigKeyError, decode_config_key, parse_slo_controller_config
from manager.webhook.config_checks import (
    colocation_bound_problems,
    message,
    net_qos_problems,
    node_profile_problems,
)

__all__ = ["CHECKED_KEYS", "config_error_message", "validate_slo_config"]

# Every key the manager parses, in upstream's checker order, then the keys upstream does not check.
CHECKED_KEYS: Final = (
    c.COLOCATION_CONFIG_KEY,
    c.RESOURCE_THRESHOLD_CONFIG_KEY,
    c.RESOURCE_QOS_CONFIG_KEY,
    c.SYSTEM_CONFIG_KEY,
    c.CPU_BURST_CONFIG_KEY,
    c.HOST_APPLICATION_CONFIG_KEY,
    c.CPU_NORMALIZATION_CONFIG_KEY,
    c.RESOURCE_AMPLIFICATION_CONFIG_KEY,
)
CHECKED_OPERATIONS: Final = frozenset({"CREATE", "UPDATE"})


def config_error_message(err: ConfigKeyError) -> str:
    """A problem the manager's parser reports, as a refusal: key, field, value, the parser's rule."""
    return message(err.key, err.field, err.value, err.message)


def _data(configmap: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return {} if configmap is None else as_mapping(configmap.get("data"))


def _changed(key: str, data: Mapping[str, Any], old_data: Mapping[str, Any] | None) -> bool:
    """upstream ``IsCfgNotEmptyAndChanged``: set to a non-empty text that differs from the old one."""
    text = data.get(key)
    if text is None or text == "":
        return False
    return old_data is None or old_data.get(key) != text


def _document(data: Mapping[str, Any], key: str) -> tuple[Any | None, list[ConfigKeyError]]:
    text = data.get(key)
    if not isinstance(text, str) or text == "":
        return None, []
    return decode_config_key(key, text)


def validate_slo_config(
    configmap: Mapping[str, Any],
    *,
    operation: str,
    old: Mapping[str, Any] | None,
    name: str = c.SLO_CONTROLLER_CONFIG_NAME,
    namespace: str = c.DEFAULT_CONFIG_NAMESPACE,
    nodes: Iterable[Mapping[str, Any]] = (),
    check_node_strategy_names: bool = False,
) -> list[str]:
    """The refusal messages of ``operation`` (``CREATE``/``UPDATE``/``DELETE``/``CONNECT``) on
    ``configmap`` (``old``: the stored object on UPDATE); empty when allowed.

    ``configmap`` is the admitted object with ``metadata.namespace`` set (the caller fills it from the
    request when the object lacks it). ``nodes`` (Node objects; only their name and labels are read)
    enables upstream's check that no existing node matches two entries of one key.
    ``check_node_strategy_names`` is upstream's ``--node-strategy-name-need-check`` (off by default).
    """
    if operation.upper() not in CHECKED_OPERATIONS:
        return []
    meta = as_mapping(configmap.get("metadata"))
    if meta.get("name") != name or meta.get("namespace") != namespace:
        return []
    data = _data(configmap)
    old_data = _data(old) if operation.upper() == "UPDATE" and old is not None else None
    keys = [key for key in CHECKED_KEYS if _changed(key, data, old_data)]
    if not keys:
        return []
    _, errors = parse_slo_controller_config({key: data[key] for key in keys})
    problems = [config_error_message(err) for err in errors]
    system, _ = _document(data, c.SYSTEM_CONFIG_KEY)
    node_list = list(nodes)
    for key in keys:
        doc, decode_errors = _document(data, key)
        if doc is None:
            continue  # rejected whole: the parser's errors above say why
        problems += node_profile_problems(
            key, doc, decode_errors, nodes=node_list, check_names=check_node_strategy_names
        )
        problems += net_qos_problems(key, doc, system)
        problems += colocation_bound_problems(key, doc)
    return list(dict.fromkeys(problems))
