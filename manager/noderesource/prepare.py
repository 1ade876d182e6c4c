"""Writing plugin results into a Node, and deciding whether the write is worth it (docs/rules/manager.md
"Writing to the Node" and "Churn guards"). Pure: Node JSON dicts in, new dicts out, the input never
mutated.

* ``prepare_node_status(node, items)`` → ``{"capacity", "allocatable", "annotations"}``: the new maps.
  A reset/None item is deleted; batch-cpu is multiplied by the cpu-normalization ratio when > 1
  (``MultiplyMilliQuant`` then ``Value()``, i.e. rounded up); when batch items are present the batch
  allocatable is recorded in ``node.koordinator.sh/originExtendedAllocatable`` and the ``koord-batch``
  allocations of ``node.koordinator.sh/thirdPartyAllocations`` are subtracted (floored at 0).
* ``prepare_node(node, items)``: a copy of the Node with those maps in place.
* ``need_sync(old, new, threshold)``: batch/mid allocatable appeared, vanished, or moved by more than
  ``old × threshold`` (milli units).
* ``disabled_reset()``: the result applied when colocation is disabled for the node.
Imports: the standard library, ``apis`` and ``manager.noderesource``. No I/O.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apis import constants as c
from apis.kubeobjects import Node
from apis.qos import PriorityClass
from apis.quantity import Format, Quantity
from apis.sloconfig import go_parse_float
from manager.noderesource.resources import (
    INT64_MAX,
    CalculateResult,
    ResourceItem,
    annotations_of,
    milli,
    nano,
    reset_result,
    value,
)

DISABLED_REASON: Final = "DisableInConfig"
DISABLED_MESSAGE: Final = f"node colocation is disabled in Config, reason: {DISABLED_REASON}"
BATCH_RESOURCES: Final = (c.BATCH_CPU, c.BATCH_MEMORY)
SYNC_RESOURCES: Final = (c.BATCH_CPU, c.BATCH_MEMORY, c.MID_CPU, c.MID_MEMORY)
_FORMATS: Final = {
    c.BATCH_CPU: Format.DECIMAL_SI,
    c.MID_CPU: Format.DECIMAL_SI,
    c.BATCH_MEMORY: Format.BINARY_SI,
    c.MID_MEMORY: Format.BINARY_SI,
}


def disabled_reset() -> CalculateResult[Any]:
    """Every batch and mid resource reset (removed), with upstream's message (docs/rules/manager.md,
    noderesource step 1)."""
    return reset_result(SYNC_RESOURCES, DISABLED_MESSAGE, DISABLED_REASON)


def quantity_text(name: str, v: int) -> str:
    """How the controller writes an integer amount: DecimalSI for cpu (``"12k"``), BinarySI for memory."""
    return str(Quantity.from_int(v, _FORMATS.get(name, Format.DECIMAL_SI)))


def cpu_normalization_ratio(node: Node) -> float | None:
    """Annotation ``node.koordinator.sh/cpu-normalization-ratio`` as a float (None: absent/unparsable)."""
    text = annotations_of(node).get(c.ANNOTATION_CPU_NORMALIZATION_RATIO)
    return go_parse_float(text) if isinstance(text, str) else None


def _normalized(v: int, ratio: float | None) -> int:
    """batch-cpu × ratio when ratio > 1: ``MultiplyMilliQuant`` (truncated milli) then ``Value()``."""
    if ratio is None or not ratio > 1.0:
        return v
    product = float(v * 1000) * ratio
    # a ratio as large as 1e308 overflows int64 (and float): saturate, as quantities do
    # (docs/upstream.md#quantity-limits)
    m = int(product) if product < INT64_MAX else INT64_MAX
    return -(-m // 1000)


def _status_map(node: Node, key: str) -> dict[str, Any]:
    status = node.get("status")
    m = status.get(key) if isinstance(status, Mapping) else None
    return dict(m) if isinstance(m, Mapping) else {}


def _int_value(raw: object) -> int | None:
    """``Value()`` of a quantity from a Node's resource map (None when absent or malformed)."""
    if raw is None:
        return None
    try:
        return value(nano(raw))
    except ValueError:
        return None


@functools.lru_cache(maxsize=1024)
def third_party_batch(text: str) -> tuple[int, int]:
    """Σ ``resources`` (batch-cpu, batch-memory) of ``koord-batch`` allocations in a
    ``thirdPartyAllocations`` annotation; an undecodable annotation counts as none."""
    try:
        doc = json.loads(text)
        allocs = doc.get("allocations") if isinstance(doc, dict) else None
        cpu = mem = 0
        for a in allocs if isinstance(allocs, list) else ():
            if not isinstance(a, dict) or a.get("priority") != PriorityClass.BATCH.value:
                continue
            res = a.get("resources")
            if res is None:
                continue
            if not isinstance(res, dict):
                return 0, 0
            cpu += nano(res[c.BATCH_CPU]) if c.BATCH_CPU in res else 0
            mem += nano(res[c.BATCH_MEMORY]) if c.BATCH_MEMORY in res else 0
    except (ValueError, AttributeError, RecursionError):  # RecursionError: JSON nested too deep to parse
        return 0, 0
    return value(cpu), value(mem)


def _origin_annotation(old: object, cpu: int, memory: int) -> str:
    """``originExtendedAllocatable`` with the batch values set (other recorded resources kept)."""
    resources: dict[str, Any] = {}
    if isinstance(old, str):
        try:
            doc = json.loads(old)
            if isinstance(doc, dict) and isinstance(doc.get("resources"), dict):
                resources = dict(doc["resources"])
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deep to parse
            resources = {}
    resources[c.BATCH_CPU] = quantity_text(c.BATCH_CPU, max(cpu, 0))
    resources[c.BATCH_MEMORY] = quantity_text(c.BATCH_MEMORY, max(memory, 0))
    return json.dumps({"resources": resources}, sort_keys=True, separators=(",", ":"))


def prepare_node_status(
    node: Node,
    items: Iterable[ResourceItem],
    cpu_normalization: float | None = None,
) -> dict[str, dict[str, Any]]:
    """The Node's new ``status.capacity``, ``status.allocatable`` and ``metadata.annotations`` after
    applying ``items`` (docs/rules/manager.md#writing-to-the-node). ``cpu_normalization`` overrides the
    ratio read from the node's ``cpu-normalization-ratio`` annotation."""
    capacity = _status_map(node, "capacity")
    allocatable = _status_map(node, "allocatable")
    annotations = dict(annotations_of(node))
    ratio = cpu_normalization if cpu_normalization is not None else cpu_normalization_ratio(node)
    batch_seen = False
    for item in items:
        batch_seen = batch_seen or item.name in BATCH_RESOURCES
        if item.value is None or item.reset:
            capacity.pop(item.name, None)
            allocatable.pop(item.name, None)
            continue
        v = _normalized(item.value, ratio) if item.name == c.BATCH_CPU else item.value
        capacity[item.name] = allocatable[item.name] = quantity_text(item.name, v)
    if batch_seen:
        cpu = _int_value(allocatable.get(c.BATCH_CPU))
        mem = _int_value(allocatable.get(c.BATCH_MEMORY))
        annotations[c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE] = _origin_annotation(
            annotations.get(c.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE),
            -1 if cpu is None else cpu,
            -1 if mem is None else mem,
        )
        text = annotations.get(c.ANNOTATION_THIRD_PARTY_ALLOCATIONS)
        if isinstance(text, str):
            used = dict(zip(BATCH_RESOURCES, third_party_batch(text), strict=True))
            for name, amount in ((c.BATCH_CPU, cpu), (c.BATCH_MEMORY, mem)):
                if amount is not None and used[name]:
                    capacity[name] = allocatable[name] = quantity_text(name, max(amount - used[name], 0))
    return {"capacity": capacity, "allocatable": allocatable, "annotations": annotations}


def prepare_node(
    node: Node,
    items: Iterable[ResourceItem],
    cpu_normalization: float | None = None,
    extra_annotations: Mapping[str, str] | None = None,
) -> Node:
    """A shallow copy of ``node`` with the prepared maps (and ``extra_annotations``, e.g. the explain
    annotations) in place; nested objects not touched are shared with the input."""
    prepared = prepare_node_status(node, items, cpu_normalization)
    meta = node.get("metadata")
    status = node.get("status")
    annotations = prepared["annotations"]
    if extra_annotations:
        annotations.update(extra_annotations)
    return {
        **node,
        "metadata": {**(meta if isinstance(meta, Mapping) else {}), "annotations": annotations},
        "status": {
            **(status if isinstance(status, Mapping) else {}),
            "capacity": prepared["capacity"],
            "allocatable": prepared["allocatable"],
        },
    }


def _milli_or_none(raw: object) -> int | None:
    return None if raw is None else milli(nano(raw))


def need_sync(old_node: Node, new_node: Node, diff_threshold: float) -> bool:
    """Whether batch/mid allocatable changed enough to write the Node: a resource exists in one and not
    the other, or ``|new − old| > old × diff_threshold`` in milli units (float64, as upstream). A
    malformed old/new quantity always syncs."""
    old = _status_map(old_node, "allocatable")
    new = _status_map(new_node, "allocatable")
    for name in SYNC_RESOURCES:
        try:
            o, n = _milli_or_none(old.get(name)), _milli_or_none(new.get(name))
        except ValueError:
            return True
        if (o is None) != (n is None):
            return True
        if o is not None and n is not None and float(abs(n - o)) > float(o) * diff_threshold:
            return True
    return False
