"""What NodePool and ScarceDevice share (docs/rules/scheduler-nodepool.md#asking-for-a-value): the values
of one node label key a pod asks for, their args' common fields, and the vectorised step both rules
end in: one boolean per distinct label value, gathered over the rows of the key's label column view.

A pod asks for value V of key K when its ``spec.nodeSelector`` has ``K: V``, or a term of its required
node affinity has a ``matchExpressions`` entry ``{key: K, operator: In, values: [V, ...]}`` (every term
counts: terms are ORed, so each may send the pod to its values); NodePool also counts the pod's own
label ``K: V``. Nothing else asks (NotIn, Exists, preferred terms do not name a value to take).
Imports: numpy, apis (jsonfields, labelselector), scheduler.framework, scheduler.plugins.nodeaffinity_terms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import numpy as np

from apis.jsonfields import as_mapping
from apis.labelselector import is_label_value, is_qualified_name
from scheduler.framework.interfaces import BoolArray, FilterResult, IntArray, Pod, uniform_scores
from scheduler.framework.snapshot import Snapshot
from scheduler.framework.status import MAX_NODE_SCORE, MIN_NODE_SCORE, Status
from scheduler.plugins.nodeaffinity_terms import IN, LabelColumn, as_list

HARD: Final = "Hard"
SOFT: Final = "Soft"
MODES: Final = (HARD, SOFT)


def asked_values(pod: Pod, key: str, *, own_label: bool = False) -> frozenset[str]:
    """The values of label ``key`` the pod asks for (see the module docstring); ``own_label`` counts
    the pod's own label too. A non-string nodeSelector value reads as "", as NodeAffinity reads it."""
    spec = as_mapping(pod.get("spec"))
    out: set[str] = set()
    selector = as_mapping(spec.get("nodeSelector"))
    if key in selector:
        v = selector[key]
        out.add(v if isinstance(v, str) else "")
    required = as_mapping(as_mapping(spec.get("affinity")).get("nodeAffinity"))
    required = as_mapping(required.get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in as_list(required.get("nodeSelectorTerms")):
        for expr in as_list(as_mapping(term).get("matchExpressions")):
            e = as_mapping(expr)
            if e.get("key") == key and e.get("operator") == IN:
                out.update(v for v in as_list(e.get("values")) if isinstance(v, str))
    if own_label:
        labels = as_mapping(as_mapping(pod.get("metadata")).get("labels"))
        v = labels.get(key)
        if isinstance(v, str):
            out.add(v)
    return frozenset(out)


def label_column(snapshot: Snapshot, owner: str, key: str) -> LabelColumn:
    """The rows' values of label ``key`` (a snapshot view owned by plugin ``owner``)."""
    return snapshot.view((owner, "label", key), lambda: LabelColumn(key))


def bad_values(column: LabelColumn, bad: Callable[[str], bool]) -> BoolArray | None:
    """Per code of ``column``, plus a last slot for rows without the label (never bad): whether its
    value ``v`` has ``bad(v)``; None when no value is bad, so the caller has nothing to do over the
    rows. One call of ``bad`` per distinct value; the caller then gathers a table typed as its result
    over the rows (one ``take``: several times faster than fancy indexing, and -1 reads the last slot)."""
    table = np.zeros(len(column.values) + 1, np.bool_)
    for c, v in enumerate(column.values):
        table[c] = bad(v)
    return table if table.any() else None


_REJECT_WHICH: Final = np.array([-1, 0], np.int32)  # FilterResult.which of a good (0) and a bad (1) value
_SCORES: Final = np.array([MAX_NODE_SCORE, MIN_NODE_SCORE], np.int64)


def filter_result(column: LabelColumn, bad: BoolArray | None, status: Status) -> FilterResult:
    """Rows whose value is bad get ``status``; the others pass."""
    if bad is None:
        return FilterResult.all_pass(len(column.codes))
    return FilterResult(_REJECT_WHICH.take(bad.view(np.int8)).take(column.codes), (status,))


def all_max(n: int) -> IntArray:
    """n scores of 100, shared and read-only (the runtime never modifies a Score's array)."""
    return uniform_scores(n, MAX_NODE_SCORE)


def scores_of(column: LabelColumn, bad: BoolArray | None) -> IntArray:
    """Every row's score: 0 where the value is bad (nodes to use last), 100 elsewhere."""
    if bad is None:
        return all_max(len(column.codes))
    return _SCORES.take(bad.view(np.int8)).take(column.codes)


def check_fields(args: Mapping[str, Any], known: frozenset[str]) -> None:
    if not isinstance(args, Mapping):
        raise ValueError(f"args={args!r}: must be an object")
    for field in args:
        if field not in known:
            raise ValueError(f"{field}={args[field]!r}: unknown field")


def label_arg(args: Mapping[str, Any], default: str) -> str:
    """``label``: a label key (a qualified name); absent or null is ``default``."""
    label = args.get("label")
    if label is None:
        return default
    if not isinstance(label, str) or not is_qualified_name(label):
        raise ValueError(f"label={label!r}: must be a valid label key ([prefix/]name)")
    return label


def mode_arg(args: Mapping[str, Any]) -> str:
    """``mode``: Hard (a Filter) or Soft (a Score); absent or null is Hard."""
    mode = args.get("mode")
    if mode is None:
        return HARD
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: must be Hard or Soft")
    return str(mode)


def values_arg(args: Mapping[str, Any], field: str) -> tuple[str, ...]:
    """A list of label values (absent or null: empty); each must be a valid label value, or no node
    could ever carry it."""
    raw = args.get(field)
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValueError(f"{field}={raw!r}: must be a list of strings")
    for k, v in enumerate(raw):
        if not isinstance(v, str):
            raise ValueError(f"{field}[{k}]={v!r}: must be a string")
        if not is_label_value(v):
            raise ValueError(f"{field}[{k}]={v!r}: must be a valid label value")
    return tuple(raw)
