"""The pod validating rule (colocation-profile part): upstream's cases and messages, word for word.

See docs/rules/manager.md#pod-qos-class-and-priority-class.
"""

from __future__ import annotations

from typing import Any

import pytest

from apis import constants as c
from apis.qos import (
    PRIORITY_BATCH_VALUE_MAX,
    PRIORITY_BATCH_VALUE_MIN,
    PRIORITY_FREE_VALUE_MAX,
    PRIORITY_MID_VALUE_MAX,
    PRIORITY_PROD_VALUE_MAX,
)
from manager.webhook.validate_pod import refusal_reason, validate_pod


def pod(
    labels: dict[str, str] | None = None,
    priority: int | None = None,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if priority is not None:
        spec["priority"] = priority
    if requests is not None or limits is not None:
        resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
        spec["containers"] = [{"name": "test-container-a", "resources": resources}]
    out: dict[str, Any] = {"metadata": {"labels": labels} if labels is not None else {}, "spec": spec}
    return out


def forbidden(qos: str, priority_class: str) -> str:
    return (
        f"Pod: Forbidden: koordinator.sh/qosClass={qos} and priorityClass={priority_class} "
        "cannot be used in combination"
    )


QOS = c.LABEL_POD_QOS
BATCH = {c.BATCH_CPU: "1", c.BATCH_MEMORY: "4Gi"}
ONE_CPU = {"cpu": "1"}

# (name, operation, new pod, old pod, expected messages): upstream's
# TestClusterColocationProfileValidatingPod
CASES: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, list[str]]] = [
    ("non-colocation empty pod", "CREATE", {}, None, []),
    (
        "validate immutable QoS",
        "UPDATE",
        pod({QOS: "LS"}),
        pod({QOS: "BE"}),
        ['labels.koordinator.sh/qosClass: Invalid value: "LS": field is immutable'],
    ),
    (
        "validate remove QoS",
        "UPDATE",
        pod(),
        pod({QOS: "BE"}),
        ['labels.koordinator.sh/qosClass: Invalid value: "": field is immutable'],
    ),
    (
        "validate defined QoS",
        "CREATE",
        pod({QOS: "BE"}, PRIORITY_BATCH_VALUE_MIN, BATCH, BATCH),
        None,
        [],
    ),
    (
        "forbidden not defined QoS",
        "CREATE",
        pod(priority=6666, requests=BATCH, limits=BATCH),
        None,
        [
            "labels.koordinator.sh/qosClass: Required value: must specify koordinator QoS BE with "
            "koordinator colocation resources"
        ],
    ),
    (
        "validate immutable priorityClass",
        "UPDATE",
        pod(priority=PRIORITY_PROD_VALUE_MAX),
        pod(priority=PRIORITY_BATCH_VALUE_MIN),
        ['spec.priority: Invalid value: "koord-prod": field is immutable'],
    ),
    (
        "validate remove priorityClass",
        "UPDATE",
        pod(),
        pod(priority=PRIORITY_BATCH_VALUE_MIN),
        ['spec.priority: Invalid value: "": field is immutable'],
    ),
    (
        "validate koordinator priority",
        "UPDATE",
        pod({c.LABEL_POD_PRIORITY: "8888"}),
        pod({c.LABEL_POD_PRIORITY: "9999"}),
        ['labels.koordinator.sh/priority: Invalid value: "8888": field is immutable'],
    ),
    (
        "validate remove koordinator priority",
        "UPDATE",
        pod(),
        pod({c.LABEL_POD_PRIORITY: "9999"}),
        ['labels.koordinator.sh/priority: Invalid value: "": field is immutable'],
    ),
    (
        "allowed QoS and priorityClass combination: BE And NonProd",
        "CREATE",
        pod({QOS: "BE"}, PRIORITY_BATCH_VALUE_MIN),
        None,
        [],
    ),
    (
        "allowed QoS and priorityClass combination: LSR And Prod",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_PROD_VALUE_MAX, ONE_CPU),
        None,
        [],
    ),
    (
        "forbidden QoS and priorityClass combination: BE And Prod",
        "CREATE",
        pod({QOS: "BE"}, PRIORITY_PROD_VALUE_MAX),
        None,
        [forbidden("BE", "koord-prod")],
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Batch",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_BATCH_VALUE_MAX, ONE_CPU),
        None,
        [forbidden("LSR", "koord-batch")],
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Mid",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_MID_VALUE_MAX, ONE_CPU),
        None,
        [forbidden("LSR", "koord-mid")],
    ),
    (
        "forbidden QoS and priorityClass combination: LSR And Free",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_FREE_VALUE_MAX, ONE_CPU),
        None,
        [forbidden("LSR", "koord-free")],
    ),
    (
        "validate resources - LS And Prod",
        "CREATE",
        pod(
            {QOS: "LS"}, PRIORITY_PROD_VALUE_MAX, {"cpu": "1", "memory": "4Gi"}, {"cpu": "1", "memory": "4Gi"}
        ),
        None,
        [],
    ),
    (
        "forbidden resources - LSR And Prod: unset CPUs",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_PROD_VALUE_MAX, {"memory": "0Gi"}, {"memory": "4Gi"}),
        None,
        [
            "pod.spec.containers[*].resources.requests: Required value: "
            "LSR Pod must declare the requested CPUs"
        ],
    ),
    (
        "forbidden resources - LSR And Prod: non-integer CPUs",
        "CREATE",
        pod({QOS: "LSR"}, PRIORITY_PROD_VALUE_MAX, {"cpu": "100m", "memory": "0Gi"}, {"cpu": "100m"}),
        None,
        [
            'pod.spec.containers[*].resources.requests: Invalid value: "100m": the requested CPUs of LSR Pod '
            "must be integer"
        ],
    ),
]


@pytest.mark.parametrize(
    ("operation", "new", "old", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_upstream_cases(
    operation: str, new: dict[str, Any], old: dict[str, Any] | None, want: list[str]
) -> None:
    assert validate_pod(new, operation=operation, old_pod=old) == want


def test_skip_validating_priority_allows_a_changed_priority_label() -> None:
    new, old = pod({c.LABEL_POD_PRIORITY: "8888"}), pod({c.LABEL_POD_PRIORITY: "9999"})
    assert validate_pod(new, operation="UPDATE", old_pod=old, skip_validating_priority=True) == []


def test_be_and_lsr_without_a_priority_class_are_refused() -> None:
    """PriorityNone is in both forbidden lists upstream: BE/LSR need a koord priority band or label."""
    assert validate_pod(pod({QOS: "BE"}), operation="CREATE", old_pod=None) == [forbidden("BE", "")]
    lsr = pod({QOS: "LSR"}, requests=ONE_CPU)
    assert validate_pod(lsr, operation="CREATE", old_pod=None) == [forbidden("LSR", "")]


def test_the_priority_class_label_wins_over_spec_priority() -> None:
    labelled = pod({QOS: "BE", c.LABEL_POD_PRIORITY_CLASS: "koord-batch"}, PRIORITY_PROD_VALUE_MAX)
    assert validate_pod(labelled, operation="CREATE", old_pod=None) == []
    unknown = pod({QOS: "BE", c.LABEL_POD_PRIORITY_CLASS: "gold"}, PRIORITY_BATCH_VALUE_MIN)
    assert validate_pod(unknown, operation="CREATE", old_pod=None) == [forbidden("BE", "")]


def test_unknown_qos_values_compare_as_none() -> None:
    """The raw QoS class of an unknown label value is none: changing one unknown value to another, or
    removing it, is allowed; LSE is checked like LSR for its CPUs (upstream's message names LSR)."""
    assert validate_pod(pod({QOS: "gold"}), operation="UPDATE", old_pod=pod({QOS: "silver"})) == []
    assert validate_pod(pod(), operation="UPDATE", old_pod=pod({QOS: "silver"})) == []
    lse = pod({QOS: "LSE"}, PRIORITY_PROD_VALUE_MAX, {"cpu": "1500m"})
    assert validate_pod(lse, operation="CREATE", old_pod=None) == [
        'pod.spec.containers[*].resources.requests: Invalid value: "1500m": the requested CPUs of LSR Pod '
        "must be integer"
    ]


def test_update_checks_the_new_pod_too_and_keeps_upstream_order() -> None:
    new = pod({QOS: "BE"}, PRIORITY_PROD_VALUE_MAX)
    old = pod({QOS: "LS"}, PRIORITY_PROD_VALUE_MAX)
    messages = validate_pod(new, operation="UPDATE", old_pod=old)
    assert messages == [
        'labels.koordinator.sh/qosClass: Invalid value: "BE": field is immutable',
        forbidden("BE", "koord-prod"),
    ]
    assert refusal_reason(messages) == f"[{messages[0]}, {messages[1]}]"


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_other_operations_are_allowed(operation: str) -> None:
    assert validate_pod(pod({QOS: "BE"}), operation=operation, old_pod=pod({QOS: "LS"})) == []


def test_operation_case_is_ignored() -> None:
    assert validate_pod(pod({QOS: "BE"}), operation="create", old_pod=None) != []


def test_init_containers_and_sidecars_count_as_kubernetes_sums_them() -> None:
    """Requests are the pod's effective requests: a sidecar's batch-cpu needs QoS BE too."""
    sidecar = {"name": "s", "restartPolicy": "Always", "resources": {"requests": {c.BATCH_CPU: "500"}}}
    p = pod({QOS: "LS"}, PRIORITY_PROD_VALUE_MAX)
    p["spec"]["initContainers"] = [sidecar]
    assert validate_pod(p, operation="CREATE", old_pod=None) == [
        "labels.koordinator.sh/qosClass: Required value: must specify koordinator QoS BE with "
        "koordinator colocation resources"
    ]


def test_refusal_reason_joins_like_an_aggregate() -> None:
    assert refusal_reason([]) == ""
    assert refusal_reason(["a"]) == "a"
    assert refusal_reason(["a", "b", "a"]) == "[a, b]"
