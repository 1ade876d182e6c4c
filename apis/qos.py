"""Koordinator QoS classes, priority classes and their derivation from a Pod.

See docs/upstream.md#qos-and-priority-classes.
Pods are plain camelCase JSON mappings. Covers the raw/with-default QoS lookups, the Kubernetes QoS
class (``status.qosClass`` or computed like Kubernetes' ``GetPodQOS``), priority classes and values,
sub-priority, eviction priority and the batch/mid resource-name translation.
Imports: the standard library, ``apis.constants``, ``apis.pod`` and ``apis.quantity``. Pure, no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any, Final

from apis import constants as c
from apis.pod import (
    container_limits,
    container_requests,
    containers,
    init_containers,
    pod_annotations,
    pod_labels,
    spec,
    status,
)
from apis.quantity import Quantity


class QoSClass(enum.StrEnum):
    """Value of the ``koordinator.sh/qosClass`` pod label."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""


class KubeQoSClass(enum.StrEnum):
    """Kubernetes' pod QoS class (``status.qosClass``)."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class PriorityClass(enum.StrEnum):
    """Koordinator priority class, from the label or from ``spec.priority`` bands.

    See docs/upstream.md#qos-and-priority-classes.
    """

    PROD = "koord-prod"
    MID = "koord-mid"
    BATCH = "koord-batch"
    FREE = "koord-free"
    NONE = ""

    @property
    def min_value(self) -> int | None:
        """Lowest ``spec.priority`` of the band (None for NONE)."""
        band = PRIORITY_BANDS.get(self)
        return None if band is None else band[0]

    @property
    def max_value(self) -> int | None:
        """Highest ``spec.priority`` of the band, inclusive (None for NONE)."""
        band = PRIORITY_BANDS.get(self)
        return None if band is None else band[1]

    @property
    def default_value(self) -> int:
        """Priority value used when only the class is known (0 for NONE)."""
        return PRIORITY_DEFAULT_VALUES[self]


PRIORITY_PROD_VALUE_MIN: Final = 9000
PRIORITY_PROD_VALUE_MAX: Final = 9999
PRIORITY_MID_VALUE_MIN: Final = 7000
PRIORITY_MID_VALUE_MAX: Final = 7999
PRIORITY_BATCH_VALUE_MIN: Final = 5000
PRIORITY_BATCH_VALUE_MAX: Final = 5999
PRIORITY_FREE_VALUE_MIN: Final = 3000
PRIORITY_FREE_VALUE_MAX: Final = 3999

#: Inclusive ``spec.priority`` bands, checked in this order.
PRIORITY_BANDS: Final[Mapping[PriorityClass, tuple[int, int]]] = {
    PriorityClass.PROD: (PRIORITY_PROD_VALUE_MIN, PRIORITY_PROD_VALUE_MAX),
    PriorityClass.MID: (PRIORITY_MID_VALUE_MIN, PRIORITY_MID_VALUE_MAX),
    PriorityClass.BATCH: (PRIORITY_BATCH_VALUE_MIN, PRIORITY_BATCH_VALUE_MAX),
    PriorityClass.FREE: (PRIORITY_FREE_VALUE_MIN, PRIORITY_FREE_VALUE_MAX),
}

PRIORITY_DEFAULT_VALUES: Final[Mapping[PriorityClass, int]] = {
    PriorityClass.PROD: 9500,
    PriorityClass.MID: 7500,
    PriorityClass.BATCH: 5500,
    PriorityClass.FREE: 3500,
    PriorityClass.NONE: 0,
}

#: Koordinator QoS assumed for an unlabelled Guaranteed pod (upstream ``QoSClassForGuaranteed``).
QOS_CLASS_FOR_GUARANTEED: Final = QoSClass.LSR

#: The only resources Kubernetes looks at when computing the pod QoS class.
_QOS_RESOURCES: Final = (c.RESOURCE_CPU, c.RESOURCE_MEMORY)

_VALID_QOS: Final = frozenset(q.value for q in QoSClass if q is not QoSClass.NONE)
_VALID_PRIORITY: Final = frozenset(p.value for p in PriorityClass if p is not PriorityClass.NONE)
_VALID_KUBE_QOS: Final = frozenset(k.value for k in KubeQoSClass)

# Go strconv.Atoi / ParseInt(s, 10, n): optional sign, ASCII digits only (no spaces, no underscores).
_GO_DECIMAL: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


# --- Koordinator QoS -------------------------------------------------------------------------------


def qos_class_by_name(name: Any) -> QoSClass:
    """The QoS class with exactly that name (case-sensitive); anything else → NONE."""
    return QoSClass(name) if isinstance(name, str) and name in _VALID_QOS else QoSClass.NONE


def qos_class_raw(pod: Mapping[str, Any]) -> QoSClass:
    """The ``koordinator.sh/qosClass`` label only; absent or invalid → NONE (``GetPodQoSClassRaw``)."""
    return qos_class_by_name(pod_labels(pod).get(c.LABEL_POD_QOS))


def qos_class_with_kube_qos(kube_qos: KubeQoSClass) -> QoSClass:
    """Default Koordinator QoS for a Kubernetes class: Guaranteed → LSR, Burstable → LS, BestEffort → BE."""
    if kube_qos is KubeQoSClass.GUARANTEED:
        return QOS_CLASS_FOR_GUARANTEED
    if kube_qos is KubeQoSClass.BURSTABLE:
        return QoSClass.LS
    return QoSClass.BE


def qos_class_with_default(pod: Mapping[str, Any]) -> QoSClass:
    """The raw label, or when it yields NONE the class derived from the Kubernetes QoS.

    See docs/upstream.md#qos-and-priority-classes.
    """
    raw = qos_class_raw(pod)
    if raw is not QoSClass.NONE:
        return raw
    return qos_class_with_kube_qos(kube_qos_class(pod))


# --- Kubernetes QoS --------------------------------------------------------------------------------


def kube_qos_class(pod: Mapping[str, Any]) -> KubeQoSClass:
    """``status.qosClass`` when set, else ``compute_kube_qos_class(pod)``.

    A status value that is not one of the three classes (never written by an API server) is ignored and
    the class is computed from the spec instead.
    """
    value = status(pod).get("qosClass")
    if isinstance(value, str) and value in _VALID_KUBE_QOS:
        return KubeQoSClass(value)
    return compute_kube_qos_class(pod)


def compute_kube_qos_class(pod: Mapping[str, Any]) -> KubeQoSClass:
    """The Kubernetes QoS class from the containers' and init containers' cpu/memory (``ComputePodQOS``).

    Only positive quantities count. BestEffort when no container has a cpu/memory request or limit;
    Guaranteed when every container has positive cpu and memory limits and the pod-wide sums of
    requests equal the sums of limits for the same resources; otherwise Burstable.

    Request defaulting: ``GetPodQOS`` itself does not default, it relies on the API server having run
    ``SetDefaults_Pod`` (a container's missing request for a resource with a limit becomes that limit)
    before any pod is stored. Every pod read from the API server is therefore already defaulted, and the
    Kubernetes class of a pod written with limits only is Guaranteed. We apply the same per-container
    defaulting here, for the QoS computation only, so a not-yet-defaulted pod (a manifest, a test
    fixture) gets the class the API server would assign; on defaulted pods it is a no-op. This is
    unrelated to the resource sums of ``apis.pod.pod_requests``, which never default
    (docs/rules/scheduler.md#effective-requests-and-limits).
    An explicit request (even ``"0"``) is kept as written.
    """
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    for container in [*containers(pod), *init_containers(pod)]:
        container_reqs = container_requests(container, _QOS_RESOURCES)
        container_lims = container_limits(container, _QOS_RESOURCES)
        for name, lim in container_lims.items():
            container_reqs.setdefault(name, lim)  # API-server defaulting, see docstring
        for name, req in container_reqs.items():
            if req.sign() > 0:
                requests[name] = requests[name] + req if name in requests else req
        limits_found: set[str] = set()
        for name, lim in container_lims.items():
            if lim.sign() > 0:
                limits_found.add(name)
                limits[name] = limits[name] + lim if name in limits else lim
        if not limits_found.issuperset(_QOS_RESOURCES):
            guaranteed = False

    if not requests and not limits:
        return KubeQoSClass.BEST_EFFORT
    if guaranteed:
        for name, req in requests.items():
            limit = limits.get(name)
            if limit is None or limit != req:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return KubeQoSClass.GUARANTEED
    return KubeQoSClass.BURSTABLE


# --- priority classes ------------------------------------------------------------------------------


def priority_class_by_name(name: Any) -> PriorityClass:
    """The priority class with exactly that name (case-sensitive); anything else → NONE."""
    return PriorityClass(name) if isinstance(name, str) and name in _VALID_PRIORITY else PriorityClass.NONE


def priority_class_by_value(value: int | None) -> PriorityClass:
    """The class whose inclusive band contains ``value``; None or outside every band → NONE."""
    if value is None:
        return PriorityClass.NONE
    for cls, (low, high) in PRIORITY_BANDS.items():
        if low <= value <= high:
            return cls
    return PriorityClass.NONE


def pod_priority(pod: Mapping[str, Any]) -> int | None:
    """``spec.priority`` when it is set to an integer, else None."""
    value = spec(pod).get("priority")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def priority_class_raw(pod: Mapping[str, Any]) -> PriorityClass:
    """The ``koordinator.sh/priority-class`` label when present (invalid → NONE, ``spec.priority`` is
    then not consulted), else the band of ``spec.priority``: the first two rules of
    docs/upstream.md#qos-and-priority-classes."""
    labels = pod_labels(pod)
    if c.LABEL_POD_PRIORITY_CLASS in labels:
        return priority_class_by_name(labels[c.LABEL_POD_PRIORITY_CLASS])
    return priority_class_by_value(pod_priority(pod))


def priority_class_with_qos(qos: QoSClass) -> PriorityClass:
    """Default priority class for a QoS class: SYSTEM/LSE/LSR/LS → prod, BE → batch, none → none."""
    if qos in (QoSClass.SYSTEM, QoSClass.LSE, QoSClass.LSR, QoSClass.LS):
        return PriorityClass.PROD
    if qos is QoSClass.BE:
        return PriorityClass.BATCH
    return PriorityClass.NONE


def priority_class_with_default(pod: Mapping[str, Any]) -> PriorityClass:
    """Label, then ``spec.priority`` band, then derived from the QoS with default.

    See docs/upstream.md#qos-and-priority-classes. So an unlabelled BestEffort pod with priority 0 is
    koord-batch and an unlabelled Burstable/Guaranteed pod is koord-prod.
    """
    raw = priority_class_raw(pod)
    if raw is not PriorityClass.NONE:
        return raw
    return priority_class_with_qos(qos_class_with_default(pod))


def priority_value_with_default(pod: Mapping[str, Any]) -> int:
    """``spec.priority`` when set and non-zero, else the default value of the derived class."""
    value = pod_priority(pod)
    if value:
        return value
    return priority_class_with_default(pod).default_value


# --- sub-priority and eviction priority ------------------------------------------------------------


def parse_go_int(text: Any, bits: int = 64) -> int | None:
    """Go ``strconv.ParseInt(text, 10, bits)``: optional sign, ASCII decimal digits, within range.

    Returns None where Go returns an error (empty, spaces, underscores, ``0x`` prefixes, overflow).
    """
    if not isinstance(text, str) or _GO_DECIMAL.fullmatch(text) is None:
        return None
    value = int(text, 10)
    bound = 1 << (bits - 1)
    return value if -bound <= value < bound else None


def sub_priority(pod: Mapping[str, Any]) -> int:
    """The ``koordinator.sh/priority`` label as the evictors read it: decimal ``Atoi``; a missing or
    unparsable value defaults to ``priority_value_with_default(pod)``."""
    parsed = parse_go_int(pod_labels(pod).get(c.LABEL_POD_PRIORITY), 64)
    return priority_value_with_default(pod) if parsed is None else parsed


def eviction_priority(pod: Mapping[str, Any]) -> int:
    """The ``koordinator.sh/eviction-priority`` annotation: int32 base 10, may be negative; absent or
    unparsable (including out of int32 range) → 0. Lower is evicted first."""
    parsed = parse_go_int(pod_annotations(pod).get(c.ANNOTATION_EVICTION_PRIORITY), 32)
    return 0 if parsed is None else parsed


# --- resource names --------------------------------------------------------------------------------

_RESOURCE_NAME_MAP: Final[Mapping[PriorityClass, Mapping[str, str]]] = {
    PriorityClass.BATCH: {c.RESOURCE_CPU: c.BATCH_CPU, c.RESOURCE_MEMORY: c.BATCH_MEMORY},
    PriorityClass.MID: {c.RESOURCE_CPU: c.MID_CPU, c.RESOURCE_MEMORY: c.MID_MEMORY},
}


def translate_resource_name(priority_class: PriorityClass, name: str) -> str:
    """The resource a pod of ``priority_class`` consumes for the native resource ``name``.

    See docs/upstream.md#qos-and-priority-classes. prod/none → ``name`` unchanged; batch →
    ``kubernetes.io/batch-{cpu,memory}``; mid → ``kubernetes.io/mid-{cpu,memory}``; free → ``""``. As
    upstream, batch/mid map only cpu and memory: any other name translates to ``""`` (no such resource).
    """
    if priority_class in (PriorityClass.PROD, PriorityClass.NONE):
        return name
    return _RESOURCE_NAME_MAP.get(priority_class, {}).get(name, "")
