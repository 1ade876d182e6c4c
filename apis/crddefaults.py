"""What the API server stores for an object of a CRD: the schema's ``default`` values filled in, as
Kubernetes' structural defaulting does (a missing property of an object that is present gets its
default; absent or null objects stay absent; map values and list items are defaulted through
``additionalProperties`` / ``items``).

Used to compare a rendered NodeSLO spec with the stored one without counting the server's defaults
(e.g. networkQOS ``ingressLimit: 100``) as a difference. Imports: the standard library and
``apis.crds``. Pure, no I/O.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from apis.crds import node_slo_spec_schema

__all__ = ["nodeslo_spec_with_defaults", "with_defaults"]


def with_defaults(value: Any, schema: dict[str, Any]) -> Any:
    """``value`` with every missing property that has a ``default`` in ``schema`` filled in (a copy)."""
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            out[key] = with_defaults(item, sub) if sub is not None else copy.deepcopy(item)
        for key, sub in props.items():
            if key not in out and isinstance(sub, dict) and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
        return out
    if isinstance(value, list):
        items = schema.get("items")
        return [with_defaults(v, items) if isinstance(items, dict) else copy.deepcopy(v) for v in value]
    return value


@cache
def _spec_schema() -> dict[str, Any]:
    return node_slo_spec_schema()


def nodeslo_spec_with_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """A NodeSLO ``.spec`` as the API server stores it."""
    out: dict[str, Any] = with_defaults(spec, _spec_schema())
    return out
