"""Tests for apis.qos: QoS classes, Kubernetes QoS, priority classes, sub/eviction priority
(docs/upstream.md#qos-and-priority-classes)."""

from __future__ import annotations

from typing import Any

import pytest

from apis import constants as c
from apis.qos import (
    PRIORITY_BANDS,
    KubeQoSClass,
    PriorityClass,
    QoSClass,
    compute_kube_qos_class,
    eviction_priority,
    kube_qos_class,
    parse_go_int,
    priority_class_by_name,
    priority_class_by_value,
    priority_class_raw,
    priority_class_with_default,
    priority_class_with_qos,
    priority_value_with_default,
    qos_class_by_name,
    qos_class_raw,
    qos_class_with_default,
    qos_class_with_kube_qos,
    sub_priority,
    translate_resource_name,
)

Res = dict[str, str]


def ctr(requests: Res | None = None, limits: Res | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": "c", "image": "x", "resources": resources, **extra}


def make_pod(
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority: int | None = None,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    qos_status: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": containers if containers is not None else [ctr()]}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if priority is not None:
        spec["priority"] = priority
    pod: dict[str, Any] = {"metadata": meta, "spec": spec}
    if qos_status is not None:
        pod["status"] = {"qosClass": qos_status}
    return pod


GUARANTEED_CTR = ctr({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
BURSTABLE_CTR = ctr({"cpu": "500m"}, {"cpu": "1"})
BE_CTR = ctr()


# --- enums -----------------------------------------------------------------------------------------


def test_enum_values() -> None:
    assert [q.value for q in QoSClass] == ["LSE", "LSR", "LS", "BE", "SYSTEM", ""]
    assert [p.value for p in PriorityClass] == ["koord-prod", "koord-mid", "koord-batch", "koord-free", ""]
    assert [k.value for k in KubeQoSClass] == ["Guaranteed", "Burstable", "BestEffort"]
    assert QoSClass.LS == "LS" and str(PriorityClass.BATCH) == "koord-batch"


@pytest.mark.parametrize(
    ("cls", "low", "high", "default"),
    [
        (PriorityClass.PROD, 9000, 9999, 9500),
        (PriorityClass.MID, 7000, 7999, 7500),
        (PriorityClass.BATCH, 5000, 5999, 5500),
        (PriorityClass.FREE, 3000, 3999, 3500),
        (PriorityClass.NONE, None, None, 0),
    ],
)
def test_priority_bands(cls: PriorityClass, low: int | None, high: int | None, default: int) -> None:
    assert cls.min_value == low
    assert cls.max_value == high
    assert cls.default_value == default
    if low is not None and high is not None:
        assert PRIORITY_BANDS[cls] == (low, high)


# --- raw QoS label (docs/upstream.md#qos-and-priority-classes) ----------------------------------------------


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, QoSClass.NONE),
        ({}, QoSClass.NONE),
        ({"other": "LS"}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: "LSE"}, QoSClass.LSE),
        ({c.LABEL_POD_QOS: "LSR"}, QoSClass.LSR),
        ({c.LABEL_POD_QOS: "LS"}, QoSClass.LS),
        ({c.LABEL_POD_QOS: "BE"}, QoSClass.BE),
        ({c.LABEL_POD_QOS: "SYSTEM"}, QoSClass.SYSTEM),
        ({c.LABEL_POD_QOS: ""}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: "be"}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: "Ls"}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: "System"}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: " LS"}, QoSClass.NONE),
        ({c.LABEL_POD_QOS: "GUARANTEED"}, QoSClass.NONE),
    ],
)
def test_qos_class_raw(labels: dict[str, str] | None, expected: QoSClass) -> None:
    assert qos_class_raw(make_pod(labels=labels, containers=[GUARANTEED_CTR])) is expected


def test_qos_class_by_name_rejects_non_strings() -> None:
    assert qos_class_by_name(None) is QoSClass.NONE
    assert qos_class_by_name(1) is QoSClass.NONE
    assert qos_class_by_name("LSR") is QoSClass.LSR


def test_qos_raw_tolerates_null_metadata() -> None:
    assert qos_class_raw({}) is QoSClass.NONE
    assert qos_class_raw({"metadata": {"labels": None}}) is QoSClass.NONE


# --- Kubernetes QoS --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param([BE_CTR], None, KubeQoSClass.BEST_EFFORT, id="no-resources"),
        pytest.param([ctr({}, {})], None, KubeQoSClass.BEST_EFFORT, id="empty-maps"),
        pytest.param([ctr({"cpu": "0", "memory": "0"})], None, KubeQoSClass.BEST_EFFORT, id="zero-requests"),
        pytest.param(
            [ctr({"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"})],
            None,
            KubeQoSClass.BEST_EFFORT,
            id="extended-resources-only",
        ),
        pytest.param(
            [ctr({"ephemeral-storage": "1Gi"}, {"ephemeral-storage": "1Gi"})],
            None,
            KubeQoSClass.BEST_EFFORT,
            id="ephemeral-storage-only",
        ),
        pytest.param([GUARANTEED_CTR], None, KubeQoSClass.GUARANTEED, id="equal-requests-limits"),
        pytest.param(
            [ctr({"cpu": "1000m", "memory": "1024Mi"}, {"cpu": "1", "memory": "1Gi"})],
            None,
            KubeQoSClass.GUARANTEED,
            id="equal-by-value-different-spelling",
        ),
        pytest.param(
            [ctr(None, {"cpu": "1", "memory": "1Gi"})],
            None,
            KubeQoSClass.GUARANTEED,
            id="limits-only-defaulted-like-apiserver",
        ),
        pytest.param(
            [ctr({"cpu": "1"}, {"cpu": "1", "memory": "1Gi"})],
            None,
            KubeQoSClass.GUARANTEED,
            id="memory-request-defaulted",
        ),
        pytest.param(
            [ctr({"cpu": "0"}, {"cpu": "1", "memory": "1Gi"})],
            None,
            KubeQoSClass.BURSTABLE,
            id="explicit-zero-request-not-defaulted",
        ),
        pytest.param(
            [GUARANTEED_CTR, ctr({"cpu": "2", "memory": "2Gi"}, {"cpu": "2", "memory": "2Gi"})],
            None,
            KubeQoSClass.GUARANTEED,
            id="two-guaranteed-containers",
        ),
        pytest.param([BURSTABLE_CTR], None, KubeQoSClass.BURSTABLE, id="request-below-limit"),
        pytest.param([ctr({"memory": "1Gi"})], None, KubeQoSClass.BURSTABLE, id="request-only"),
        pytest.param(
            [ctr({"cpu": "1"}, {"cpu": "1"})], None, KubeQoSClass.BURSTABLE, id="cpu-only-guaranteed-like"
        ),
        pytest.param([GUARANTEED_CTR, BE_CTR], None, KubeQoSClass.BURSTABLE, id="one-container-without"),
        pytest.param(
            [GUARANTEED_CTR],
            [BE_CTR],
            KubeQoSClass.BURSTABLE,
            id="init-container-without-resources",
        ),
        pytest.param(
            [GUARANTEED_CTR],
            [ctr({"cpu": "2", "memory": "2Gi"}, {"cpu": "2", "memory": "2Gi"})],
            KubeQoSClass.GUARANTEED,
            id="guaranteed-init-container",
        ),
        pytest.param(
            [GUARANTEED_CTR],
            [ctr({"cpu": "100m", "memory": "1Gi"}, {"cpu": "200m", "memory": "1Gi"})],
            KubeQoSClass.BURSTABLE,
            id="burstable-init-container",
        ),
        pytest.param(
            [BE_CTR],
            [ctr({"memory": "64Mi"})],
            KubeQoSClass.BURSTABLE,
            id="only-init-container-has-request",
        ),
        pytest.param(
            [GUARANTEED_CTR],
            [
                ctr(
                    {"cpu": "1", "memory": "1Gi"},
                    {"cpu": "1", "memory": "1Gi"},
                    restartPolicy="Always",
                )
            ],
            KubeQoSClass.GUARANTEED,
            id="guaranteed-sidecar",
        ),
        pytest.param(
            [ctr({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, {"cpu": "1", "memory": "1Gi"})],
            None,
            KubeQoSClass.GUARANTEED,
            id="extended-request-ignored",
        ),
        # GetPodQOS compares pod-wide sums, not each container (the API server would reject a
        # request above its limit, so this shape only exists in un-validated input).
        pytest.param(
            [
                ctr({"cpu": "1", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}),
                ctr({"cpu": "2", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
            ],
            None,
            KubeQoSClass.GUARANTEED,
            id="sum-compare-quirk",
        ),
    ],
)
def test_compute_kube_qos_class(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]] | None, expected: KubeQoSClass
) -> None:
    pod = make_pod(containers=containers, init_containers=init_containers)
    assert compute_kube_qos_class(pod) is expected
    assert kube_qos_class(pod) is expected


@pytest.mark.parametrize(
    ("status_value", "expected"),
    [
        ("BestEffort", KubeQoSClass.BEST_EFFORT),
        ("Burstable", KubeQoSClass.BURSTABLE),
        ("Guaranteed", KubeQoSClass.GUARANTEED),
        ("", KubeQoSClass.GUARANTEED),  # empty → computed from the spec
        ("Bogus", KubeQoSClass.GUARANTEED),  # unknown → computed from the spec
    ],
)
def test_status_qos_class_takes_precedence(status_value: str, expected: KubeQoSClass) -> None:
    pod = make_pod(containers=[GUARANTEED_CTR], qos_status=status_value)
    assert kube_qos_class(pod) is expected


def test_numeric_quantities_accepted() -> None:
    pod = make_pod(containers=[{"name": "c", "resources": {"requests": {"cpu": 1}, "limits": {"cpu": 2}}}])
    assert kube_qos_class(pod) is KubeQoSClass.BURSTABLE


# --- QoS with default (docs/upstream.md#qos-and-priority-classes) -------------------------------------------


@pytest.mark.parametrize(
    ("kube", "expected"),
    [
        (KubeQoSClass.GUARANTEED, QoSClass.LSR),
        (KubeQoSClass.BURSTABLE, QoSClass.LS),
        (KubeQoSClass.BEST_EFFORT, QoSClass.BE),
    ],
)
def test_qos_class_with_kube_qos(kube: KubeQoSClass, expected: QoSClass) -> None:
    assert qos_class_with_kube_qos(kube) is expected


@pytest.mark.parametrize(
    ("labels", "containers", "qos_status", "expected"),
    [
        pytest.param(None, [GUARANTEED_CTR], None, QoSClass.LSR, id="guaranteed-computed"),
        pytest.param(None, [BURSTABLE_CTR], None, QoSClass.LS, id="burstable-computed"),
        pytest.param(None, [BE_CTR], None, QoSClass.BE, id="besteffort-computed"),
        pytest.param(None, [BE_CTR], "Guaranteed", QoSClass.LSR, id="status-wins"),
        pytest.param({c.LABEL_POD_QOS: "BE"}, [GUARANTEED_CTR], None, QoSClass.BE, id="label-wins"),
        pytest.param({c.LABEL_POD_QOS: "LSE"}, [BE_CTR], None, QoSClass.LSE, id="label-lse"),
        pytest.param({c.LABEL_POD_QOS: "SYSTEM"}, [BE_CTR], None, QoSClass.SYSTEM, id="label-system"),
        pytest.param({c.LABEL_POD_QOS: "bad"}, [BURSTABLE_CTR], None, QoSClass.LS, id="invalid-label"),
        pytest.param({c.LABEL_POD_QOS: "lsr"}, [BE_CTR], None, QoSClass.BE, id="lowercase-label"),
        pytest.param({c.LABEL_POD_QOS: ""}, [GUARANTEED_CTR], None, QoSClass.LSR, id="empty-label"),
    ],
)
def test_qos_class_with_default(
    labels: dict[str, str] | None,
    containers: list[dict[str, Any]],
    qos_status: str | None,
    expected: QoSClass,
) -> None:
    pod = make_pod(labels=labels, containers=containers, qos_status=qos_status)
    assert qos_class_with_default(pod) is expected


# --- priority classes (docs/upstream.md#qos-and-priority-classes) -------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, PriorityClass.NONE),
        (0, PriorityClass.NONE),
        (-1, PriorityClass.NONE),
        (2999, PriorityClass.NONE),
        (3000, PriorityClass.FREE),
        (3500, PriorityClass.FREE),
        (3999, PriorityClass.FREE),
        (4000, PriorityClass.NONE),
        (4999, PriorityClass.NONE),
        (5000, PriorityClass.BATCH),
        (5999, PriorityClass.BATCH),
        (6000, PriorityClass.NONE),
        (6999, PriorityClass.NONE),
        (7000, PriorityClass.MID),
        (7099, PriorityClass.MID),
        (7999, PriorityClass.MID),
        (8000, PriorityClass.NONE),
        (8999, PriorityClass.NONE),
        (9000, PriorityClass.PROD),
        (9999, PriorityClass.PROD),
        (10000, PriorityClass.NONE),
        (2000000000, PriorityClass.NONE),
    ],
)
def test_priority_class_by_value(value: int | None, expected: PriorityClass) -> None:
    assert priority_class_by_value(value) is expected


def test_priority_class_by_name_is_case_sensitive() -> None:
    assert priority_class_by_name("koord-mid") is PriorityClass.MID
    assert priority_class_by_name("Koord-Mid") is PriorityClass.NONE
    assert priority_class_by_name("KOORD-PROD") is PriorityClass.NONE
    assert priority_class_by_name("prod") is PriorityClass.NONE
    assert priority_class_by_name(None) is PriorityClass.NONE


@pytest.mark.parametrize(
    ("qos", "expected"),
    [
        (QoSClass.SYSTEM, PriorityClass.PROD),
        (QoSClass.LSE, PriorityClass.PROD),
        (QoSClass.LSR, PriorityClass.PROD),
        (QoSClass.LS, PriorityClass.PROD),
        (QoSClass.BE, PriorityClass.BATCH),
        (QoSClass.NONE, PriorityClass.NONE),
    ],
)
def test_priority_class_with_qos(qos: QoSClass, expected: PriorityClass) -> None:
    assert priority_class_with_qos(qos) is expected


PC = c.LABEL_POD_PRIORITY_CLASS
QOS = c.LABEL_POD_QOS


@pytest.mark.parametrize(
    ("labels", "priority", "containers", "raw", "expected"),
    [
        # consequences stated in docs/upstream.md#qos-and-priority-classes
        pytest.param(None, 0, [BE_CTR], PriorityClass.NONE, PriorityClass.BATCH, id="be-priority-0"),
        pytest.param(None, None, [BE_CTR], PriorityClass.NONE, PriorityClass.BATCH, id="be-no-priority"),
        pytest.param(None, 0, [BURSTABLE_CTR], PriorityClass.NONE, PriorityClass.PROD, id="burstable"),
        pytest.param(None, 0, [GUARANTEED_CTR], PriorityClass.NONE, PriorityClass.PROD, id="guaranteed"),
        # step 1: the label wins over everything
        pytest.param(
            {PC: "koord-batch"}, 9500, [GUARANTEED_CTR], "koord-batch", "koord-batch", id="label-wins"
        ),
        pytest.param({PC: "koord-free"}, None, [BE_CTR], "koord-free", "koord-free", id="label-free"),
        pytest.param({PC: "koord-mid"}, 5500, [BE_CTR], "koord-mid", "koord-mid", id="label-mid"),
        pytest.param({PC: "koord-prod"}, 3000, [BE_CTR], "koord-prod", "koord-prod", id="label-prod"),
        # an invalid label yields none and skips spec.priority; QoS decides
        pytest.param({PC: "Koord-Batch"}, 5500, [GUARANTEED_CTR], "", "koord-prod", id="label-case"),
        pytest.param({PC: "batch"}, 5500, [BE_CTR], "", "koord-batch", id="label-invalid-be"),
        pytest.param({PC: ""}, 7500, [BURSTABLE_CTR], "", "koord-prod", id="label-empty"),
        # step 2: spec.priority in a band
        pytest.param(None, 7000, [GUARANTEED_CTR], "koord-mid", "koord-mid", id="priority-mid"),
        pytest.param(None, 5999, [GUARANTEED_CTR], "koord-batch", "koord-batch", id="priority-batch"),
        pytest.param(None, 3999, [GUARANTEED_CTR], "koord-free", "koord-free", id="priority-free"),
        pytest.param(None, 9000, [BE_CTR], "koord-prod", "koord-prod", id="priority-prod-be"),
        pytest.param({"x": "y"}, 5000, [BURSTABLE_CTR], "koord-batch", "koord-batch", id="other-labels"),
        # out of every band → QoS with default
        pytest.param(None, 8500, [BE_CTR], "", "koord-batch", id="out-of-range-be"),
        pytest.param(None, 100000, [BURSTABLE_CTR], "", "koord-prod", id="out-of-range-burstable"),
        pytest.param(None, -5, [GUARANTEED_CTR], "", "koord-prod", id="negative"),
        # QoS label drives step 3
        pytest.param({QOS: "BE"}, 0, [GUARANTEED_CTR], "", "koord-batch", id="qos-label-be"),
        pytest.param({QOS: "LSE"}, 0, [BE_CTR], "", "koord-prod", id="qos-label-lse"),
        pytest.param({QOS: "SYSTEM"}, None, [BE_CTR], "", "koord-prod", id="qos-label-system"),
        pytest.param({QOS: "BE", PC: "koord-mid"}, 0, [BE_CTR], "koord-mid", "koord-mid", id="pc-over-qos"),
    ],
)
def test_priority_class_with_default(
    labels: dict[str, str] | None,
    priority: int | None,
    containers: list[dict[str, Any]],
    raw: str,
    expected: str,
) -> None:
    pod = make_pod(labels=labels, priority=priority, containers=containers)
    assert priority_class_raw(pod) is PriorityClass(raw)
    assert priority_class_with_default(pod) is PriorityClass(expected)


@pytest.mark.parametrize(
    ("labels", "priority", "containers", "expected"),
    [
        pytest.param(None, 9100, [BE_CTR], 9100, id="explicit-in-band"),
        pytest.param(None, 123, [BE_CTR], 123, id="explicit-out-of-band"),
        pytest.param(None, -7, [BE_CTR], -7, id="explicit-negative"),
        pytest.param({PC: "koord-mid"}, 5100, [BE_CTR], 5100, id="explicit-beats-label"),
        pytest.param(None, 0, [BE_CTR], 5500, id="zero-be"),
        pytest.param(None, None, [BURSTABLE_CTR], 9500, id="none-burstable"),
        pytest.param(None, 0, [GUARANTEED_CTR], 9500, id="zero-guaranteed"),
        pytest.param({PC: "koord-mid"}, 0, [BE_CTR], 7500, id="zero-label-mid"),
        pytest.param({PC: "koord-free"}, None, [BE_CTR], 3500, id="none-label-free"),
        pytest.param({PC: "koord-batch"}, None, [GUARANTEED_CTR], 5500, id="none-label-batch"),
    ],
)
def test_priority_value_with_default(
    labels: dict[str, str] | None, priority: int | None, containers: list[dict[str, Any]], expected: int
) -> None:
    pod = make_pod(labels=labels, priority=priority, containers=containers)
    assert priority_value_with_default(pod) == expected


def test_non_integer_priority_is_ignored() -> None:
    pod = make_pod(containers=[BE_CTR])
    pod["spec"]["priority"] = "9500"
    assert priority_class_with_default(pod) is PriorityClass.BATCH
    pod["spec"]["priority"] = True
    assert priority_value_with_default(pod) == 5500


# --- sub-priority and eviction priority ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bits", "expected"),
    [
        ("0", 64, 0),
        ("42", 64, 42),
        ("+42", 64, 42),
        ("-42", 64, -42),
        ("007", 64, 7),
        ("9223372036854775807", 64, 9223372036854775807),
        ("-9223372036854775808", 64, -9223372036854775808),
        ("9223372036854775808", 64, None),
        ("2147483647", 32, 2147483647),
        ("-2147483648", 32, -2147483648),
        ("2147483648", 32, None),
        ("-2147483649", 32, None),
        ("", 64, None),
        ("+", 64, None),
        ("-", 64, None),
        (" 1", 64, None),
        ("1 ", 64, None),
        ("1_000", 64, None),
        ("0x10", 64, None),
        ("1.5", 64, None),
        ("1e3", 64, None),
        ("١٢", 64, None),  # non-ASCII digits
        (None, 64, None),
        (12, 64, None),
    ],
)
def test_parse_go_int(text: Any, bits: int, expected: int | None) -> None:
    assert parse_go_int(text, bits) == expected


@pytest.mark.parametrize(
    ("label", "priority", "containers", "expected"),
    [
        pytest.param("100", 5500, [BE_CTR], 100, id="plain"),
        pytest.param("-3", 5500, [BE_CTR], -3, id="negative"),
        pytest.param("+8", 5500, [BE_CTR], 8, id="plus-sign"),
        pytest.param("0", 5500, [BE_CTR], 0, id="zero"),
        pytest.param(None, 5100, [BE_CTR], 5100, id="missing-uses-priority"),
        pytest.param(None, None, [BE_CTR], 5500, id="missing-uses-default-batch"),
        pytest.param(None, 0, [GUARANTEED_CTR], 9500, id="missing-uses-default-prod"),
        pytest.param("0x10", 5100, [BE_CTR], 5100, id="hex-is-unparsable"),
        pytest.param("abc", None, [BURSTABLE_CTR], 9500, id="garbage"),
        pytest.param("", 7100, [BE_CTR], 7100, id="empty"),
        pytest.param("99999999999999999999", 7100, [BE_CTR], 7100, id="overflow"),
    ],
)
def test_sub_priority(
    label: str | None, priority: int | None, containers: list[dict[str, Any]], expected: int
) -> None:
    labels = {} if label is None else {c.LABEL_POD_PRIORITY: label}
    pod = make_pod(labels=labels, priority=priority, containers=containers)
    assert sub_priority(pod) == expected


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (None, 0),
        ("5", 5),
        ("-5", -5),
        ("+5", 5),
        ("2147483647", 2147483647),
        ("-2147483648", -2147483648),
        ("2147483648", 0),
        ("-2147483649", 0),
        ("", 0),
        ("abc", 0),
        ("1.0", 0),
        (" 3", 0),
        ("0x1", 0),
    ],
)
def test_eviction_priority(annotation: str | None, expected: int) -> None:
    annotations = None if annotation is None else {c.ANNOTATION_EVICTION_PRIORITY: annotation}
    assert eviction_priority(make_pod(annotations=annotations)) == expected


def test_eviction_priority_without_metadata() -> None:
    assert eviction_priority({}) == 0


# --- resource names (docs/upstream.md#qos-and-priority-classes) ---------------------------------------------


@pytest.mark.parametrize(
    ("cls", "name", "expected"),
    [
        (PriorityClass.PROD, "cpu", "cpu"),
        (PriorityClass.PROD, "memory", "memory"),
        (PriorityClass.PROD, "nvidia.com/gpu", "nvidia.com/gpu"),
        (PriorityClass.NONE, "cpu", "cpu"),
        (PriorityClass.NONE, "memory", "memory"),
        (PriorityClass.BATCH, "cpu", c.BATCH_CPU),
        (PriorityClass.BATCH, "memory", c.BATCH_MEMORY),
        (PriorityClass.BATCH, "ephemeral-storage", ""),
        (PriorityClass.MID, "cpu", c.MID_CPU),
        (PriorityClass.MID, "memory", c.MID_MEMORY),
        (PriorityClass.MID, "nvidia.com/gpu", ""),
        (PriorityClass.FREE, "cpu", ""),
        (PriorityClass.FREE, "memory", ""),
    ],
)
def test_translate_resource_name(cls: PriorityClass, name: str, expected: str) -> None:
    assert translate_resource_name(cls, name) == expected
    assert c.BATCH_CPU == "kubernetes.io/batch-cpu" and c.MID_MEMORY == "kubernetes.io/mid-memory"
