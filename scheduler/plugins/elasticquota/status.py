"""The ElasticQuota status controller's computation (docs/rules/scheduler-elasticquota.md#status-controller):
the annotations and ``status.used`` the scheduler writes for one quota from the manager's state, and the
merge patch to send when the object differs (None when nothing changed).
Imports: the standard library, apis (elasticquota, quantity) and this package. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from apis.elasticquota import (
    ANNOTATION_ALLOCATED,
    ANNOTATION_CHILD_REQUEST,
    ANNOTATION_GUARANTEED,
    ANNOTATION_NON_PREEMPTIBLE_REQUEST,
    ANNOTATION_NON_PREEMPTIBLE_USED,
    ANNOTATION_REQUEST,
    ANNOTATION_RUNTIME,
)
from apis.quantity import Quantity, QuantityError, parse_resource_list
from scheduler.plugins.elasticquota import resources as r
from scheduler.plugins.elasticquota.quotainfo import QuotaInfo


def _json(d: Mapping[str, int]) -> str:
    return json.dumps(r.to_json(d), sort_keys=True, separators=(",", ":"))


def desired(info: QuotaInfo) -> tuple[dict[str, str], dict[str, str]]:
    """(the status annotations, ``status.used``) the quota should carry."""
    annotations = {
        ANNOTATION_RUNTIME: _json(info.masked_runtime()),
        ANNOTATION_REQUEST: _json(info.request),
        ANNOTATION_CHILD_REQUEST: _json(info.child_request),
        ANNOTATION_GUARANTEED: _json(info.guaranteed),
        ANNOTATION_ALLOCATED: _json(info.allocated),
        ANNOTATION_NON_PREEMPTIBLE_REQUEST: _json(info.np_request),
        ANNOTATION_NON_PREEMPTIBLE_USED: _json(info.np_used),
    }
    return annotations, r.to_json(info.used)


def _same_lists(a: object, b: Mapping[str, str]) -> bool:
    """Equal as ResourceLists, zero amounts ignored."""
    try:
        left = parse_resource_list(a) if isinstance(a, Mapping) else {}
    except QuantityError:
        return False
    right = {n: Quantity.parse(v) for n, v in b.items()}
    keys = {n for n, q in left.items() if not q.is_zero()} | {n for n, q in right.items() if not q.is_zero()}
    return all(left.get(n, Quantity.from_int(0)) == right.get(n, Quantity.from_int(0)) for n in keys)


def status_patch(obj: Mapping[str, Any], info: QuotaInfo) -> dict[str, Any] | None:
    """The merge patch bringing ``obj`` (the ElasticQuota as read) to the manager's state, or None."""
    annotations, used = desired(info)
    meta = obj.get("metadata")
    current = meta.get("annotations") if isinstance(meta, Mapping) else None
    current = current if isinstance(current, Mapping) else {}
    changed = {k: v for k, v in annotations.items() if current.get(k) != v}
    status = obj.get("status")
    cur_used = status.get("used") if isinstance(status, Mapping) else None
    patch: dict[str, Any] = {}
    if changed:
        patch["metadata"] = {"annotations": changed}
    if not _same_lists(cur_used, used):
        patch["status"] = {"used": used}
    return patch or None
