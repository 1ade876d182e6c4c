"""The validating admission rule for Pods, colocation-profile part, as a pure decision.

See docs/rules/manager.md#pod-qos-class-and-priority-class. ``validate_pod(pod, operation=, old_pod=)``
returns upstream's refusal messages, in upstream's order and words (``field.Error`` strings), for a
CREATE or UPDATE (DELETE and CONNECT are allowed; the caller skips subresources such as ``pods/status``,
as upstream does):

1. UPDATE: the Koordinator QoS class (``koordinator.sh/qosClass``), the priority class and, unless
   ``skip_validating_priority`` (upstream's gate ``ColocationProfileSkipValidatingPriority``, off by
   default), the ``koordinator.sh/priority`` label are immutable;
2. a pod requesting ``kubernetes.io/batch-cpu`` or ``batch-memory`` must be QoS BE;
3. BE may not be combined with koord-prod or with no priority class; LSR not with koord-mid,
   koord-batch, koord-free or no priority class;
4. an LSR or LSE pod must request a whole number of CPUs.

``refusal_reason(messages)`` joins them as upstream's aggregate error does.
Imports: the standard library, apis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from apis import constants as c
from apis.pod import pod_labels, pod_requests
from apis.qos import PriorityClass, QoSClass, priority_class_raw, qos_class_raw
from apis.quantity import Quantity, QuantityError

__all__ = ["refusal_reason", "validate_pod"]

CHECKED_OPERATIONS: Final = frozenset({"CREATE", "UPDATE"})
QOS_PATH: Final = f"labels.{c.LABEL_POD_QOS}"
PRIORITY_CLASS_PATH: Final = "spec.priority"
PRIORITY_PATH: Final = f"labels.{c.LABEL_POD_PRIORITY}"
REQUESTS_PATH: Final = "pod.spec.containers[*].resources.requests"
# QoS class → the priority classes it may not be combined with (upstream's order of checks).
FORBIDDEN: Final[tuple[tuple[QoSClass, tuple[PriorityClass, ...]], ...]] = (
    (QoSClass.BE, (PriorityClass.NONE, PriorityClass.PROD)),
    (QoSClass.LSR, (PriorityClass.NONE, PriorityClass.MID, PriorityClass.BATCH, PriorityClass.FREE)),
)


def _quote(text: str) -> str:
    """Go ``%q`` of a string (label values and class names are plain ASCII, where the two agree)."""
    return json.dumps(text, ensure_ascii=False)


def _invalid(path: str, value: str, detail: str) -> str:
    return f"{path}: Invalid value: {_quote(value)}: {detail}"


def _immutable(path: str, new: str, old: str) -> list[str]:
    """``validation.ValidateImmutableField``."""
    return [] if new == old else [_invalid(path, new, "field is immutable")]


def _priority_label(pod: Mapping[str, Any]) -> str:
    value = pod_labels(pod).get(c.LABEL_POD_PRIORITY)
    return value if isinstance(value, str) else ""


def _is_zero(q: Quantity | None) -> bool:
    return q is None or q.is_zero()


def _required_qos(qos: QoSClass, requests: Mapping[str, Quantity]) -> list[str]:
    if (_is_zero(requests.get(c.BATCH_CPU)) and _is_zero(requests.get(c.BATCH_MEMORY))) or qos is QoSClass.BE:
        return []
    return [
        f"{QOS_PATH}: Required value: must specify koordinator QoS BE with koordinator colocation resources"
    ]


def _forbidden(qos: QoSClass, priority: PriorityClass) -> list[str]:
    for forbidden_qos, classes in FORBIDDEN:
        if qos is forbidden_qos and priority in classes:
            pair = f"{c.LABEL_POD_QOS}={qos.value} and priorityClass={priority.value}"
            return [f"Pod: Forbidden: {pair} cannot be used in combination"]
    return []


def _resources(qos: QoSClass, requests: Mapping[str, Quantity]) -> list[str]:
    if qos not in (QoSClass.LSR, QoSClass.LSE):
        return []
    cpu = requests.get(c.RESOURCE_CPU)
    if cpu is None or cpu.is_zero():
        return [f"{REQUESTS_PATH}: Required value: LSR Pod must declare the requested CPUs"]
    if cpu.value() * 1000 != cpu.milli_value():
        return [_invalid(REQUESTS_PATH, str(cpu), "the requested CPUs of LSR Pod must be integer")]
    return []


def validate_pod(
    pod: Mapping[str, Any],
    *,
    operation: str,
    old_pod: Mapping[str, Any] | None,
    skip_validating_priority: bool = False,
) -> list[str]:
    """The refusal messages of ``operation`` on ``pod`` (``old_pod``: the stored pod on UPDATE); empty
    when allowed. Identical messages are given once, as upstream's aggregate does."""
    op = operation.upper()
    if op not in CHECKED_OPERATIONS:
        return []
    qos = qos_class_raw(pod)
    problems: list[str] = []
    if op == "UPDATE" and old_pod is not None:
        problems += _immutable(QOS_PATH, qos.value, qos_class_raw(old_pod).value)
        problems += _immutable(
            PRIORITY_CLASS_PATH, priority_class_raw(pod).value, priority_class_raw(old_pod).value
        )
        if not skip_validating_priority:
            problems += _immutable(PRIORITY_PATH, _priority_label(pod), _priority_label(old_pod))
    try:
        requests = pod_requests(pod)
    except QuantityError as exc:  # the API server validates quantities first: only a malformed object
        return [*problems, f"pod.spec.containers[*].resources: Invalid value: {exc}"]
    problems += _required_qos(qos, requests)
    problems += _forbidden(qos, priority_class_raw(pod))
    problems += _resources(qos, requests)
    return list(dict.fromkeys(problems))


def refusal_reason(messages: Sequence[str]) -> str:
    """The admission reason upstream gives for these messages (``ErrorList.ToAggregate().Error()``): the
    message alone, or ``[a, b, ...]``; ``""`` when there is none."""
    unique = list(dict.fromkeys(messages))
    if len(unique) <= 1:
        return unique[0] if unique else ""
    return "[" + ", ".join(unique) + "]"
