"""``koord simulate`` for kind ``NodeSLO`` (docs/simulate.md): which NodeSLO spec a node gets from a
``slo-controller-config``. The ConfigMap ``data`` is loaded as koord-manager loads it on a first load
(``apis.sloconfig.parse_slo_controller_config`` with no last good value: a key that cannot be decoded
counts as absent, an invalid field takes its default) and the spec is rendered by the NodeSLO
controller's own ``nodeslo_plan`` for a node that has no NodeSLO yet.

Result: ``spec`` (the NodeSLO ``.spec`` as written, upstream JSON names), ``configErrors`` (every problem
the manager would report: key, field, value, message, whether the whole key was rejected) and
``warning`` (a node-level problem, e.g. a bandwidth annotation that is not a quantity; ``""`` if none).
Imports: the standard library, ``apis.{objectcheck,sloconfig}`` and ``manager.controllers.specs``. Pure.
Bad input raises ``ValueError`` naming the field and its value (docs/simulate.md#input-errors).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from apis.objectcheck import as_node
from apis.sloconfig import parse_slo_controller_config
from manager.controllers.specs import nodeslo_plan

__all__ = ["config_data", "simulate"]


def config_data(scenario: Mapping[str, Any]) -> dict[str, str]:
    """The ConfigMap ``data`` of the scenario: each value a JSON string (an object or list given inline
    is taken as its JSON text, for hand-written scenarios)."""
    cm = scenario.get("configMap")
    if not isinstance(cm, Mapping):
        raise ValueError(f"configMap: expected an object with 'data', got {cm!r:.80}")
    data = cm.get("data")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"configMap.data: expected an object of JSON strings, got {data!r:.80}")
    out: dict[str, str] = {}
    for key, value in data.items():
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, dict | list):
            out[str(key)] = json.dumps(value)
        else:
            raise ValueError(f"configMap.data[{key!r}]: expected a JSON string, got {value!r:.80}")
    return out


def simulate(scenario: Mapping[str, Any]) -> dict[str, Any]:
    data = config_data(scenario)
    node = as_node(scenario.get("node"), "node")  # scenario JSON: the boundary
    cfg, errors = parse_slo_controller_config(data, None)
    plan = nodeslo_plan(cfg, node, None)
    return {
        "spec": plan.spec,
        "warning": plan.warning,
        "configErrors": [
            {"key": e.key, "field": e.field, "value": e.value, "message": e.message, "rejected": e.rejected}
            for e in errors
        ],
    }
