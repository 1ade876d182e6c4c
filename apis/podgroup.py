"""Gang scheduling's shared vocabulary: the PodGroup CRD (``scheduling.sigs.k8s.io/v1alpha1``), the
pod labels and annotations that declare a gang, and the annotations the scheduler writes at PreBind
(docs/rules/scheduler-coscheduling.md#declaring-a-gang,
docs/rules/scheduler-coscheduling.md#the-podgroup-crd).

Also Go's ``strconv.ParseInt(s, 10, 32)``, which the gang annotations are parsed with.
Imports: the standard library and apis (pod field access, rfc3339). Pure.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from apis.pod import metadata, pod_annotations, pod_labels, spec
from apis.rfc3339 import parse_rfc3339

# --- pod labels and annotations (docs/rules/scheduler-coscheduling.md#declaring-a-gang) ------------
LABEL_POD_GROUP: Final = "pod-group.scheduling.sigs.k8s.io"
LABEL_LIGHTWEIGHT_NAME: Final = "pod-group.scheduling.sigs.k8s.io/name"  # deprecated
LABEL_LIGHTWEIGHT_MIN_AVAILABLE: Final = "pod-group.scheduling.sigs.k8s.io/min-available"  # deprecated
ANNOTATION_GANG_PREFIX: Final = "gang.scheduling.koordinator.sh"
ANNOTATION_GANG_NAME: Final = ANNOTATION_GANG_PREFIX + "/name"
ANNOTATION_GANG_MIN_NUM: Final = ANNOTATION_GANG_PREFIX + "/min-available"
ANNOTATION_GANG_WAIT_TIME: Final = ANNOTATION_GANG_PREFIX + "/waiting-time"
ANNOTATION_GANG_TOTAL_NUM: Final = ANNOTATION_GANG_PREFIX + "/total-number"
ANNOTATION_GANG_MODE: Final = ANNOTATION_GANG_PREFIX + "/mode"
ANNOTATION_GANG_GROUPS: Final = ANNOTATION_GANG_PREFIX + "/groups"
ANNOTATION_GANG_TIMEOUT: Final = ANNOTATION_GANG_PREFIX + "/timeout"
ANNOTATION_GANG_MATCH_POLICY: Final = ANNOTATION_GANG_PREFIX + "/match-policy"
ANNOTATION_ALIAS_GANG_MATCH_POLICY: Final = "pod-group.scheduling.sigs.k8s.io/match-policy"
ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC: Final = ANNOTATION_GANG_PREFIX + "/network-topology-spec"

GANG_MODE_STRICT: Final = "Strict"
GANG_MODE_NON_STRICT: Final = "NonStrict"
MATCH_ONLY_WAITING: Final = "only-waiting"
MATCH_WAITING_AND_RUNNING: Final = "waiting-and-running"
MATCH_ONCE_SATISFIED: Final = "once-satisfied"
MATCH_POLICIES: Final = (MATCH_ONLY_WAITING, MATCH_WAITING_AND_RUNNING, MATCH_ONCE_SATISFIED)

# --- written by the scheduler at PreBind (docs/rules/scheduler-coscheduling.md#prebind) --------------
ANNOTATION_BIND_GANG_GROUP_ID: Final = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID: Final = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT: Final = "scheduling.koordinator.sh/bind-gang-member-count"
BIND_ANNOTATIONS: Final = (
    ANNOTATION_BIND_GANG_GROUP_ID,
    ANNOTATION_BIND_GANG_MEMBER_COUNT,
    DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID,
    DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT,
)

# --- PodGroup phases (docs/rules/scheduler-coscheduling.md#the-podgroup-crd) --------------------------
PHASE_PENDING: Final = "Pending"
PHASE_PRE_SCHEDULING: Final = "PreScheduling"
PHASE_SCHEDULING: Final = "Scheduling"
PHASE_SCHEDULED: Final = "Scheduled"
PHASE_RUNNING: Final = "Running"
PHASE_FINISHED: Final = "Finished"
PHASE_FAILED: Final = "Failed"
PHASE_UNKNOWN: Final = "Unknown"

# Go's zero time.Time: what an absent metav1.Time decodes to.
ZERO_TIME: Final = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)

_INT32: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


def go_parse_int32(text: str) -> int:
    """``strconv.ParseInt(text, 10, 32)``: optional sign, decimal digits, int32 range; ValueError
    otherwise (the empty string included)."""
    if not _INT32.fullmatch(text):
        raise ValueError(f'strconv.ParseInt: parsing "{text}": invalid syntax')
    value = int(text)
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f'strconv.ParseInt: parsing "{text}": value out of range')
    return value


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): v for k, v in value.items() if isinstance(v, str)}


def gang_name(pod: Mapping[str, Any]) -> str:
    """The pod's gang name: the PodGroup label, else the lightweight label, else the annotation; ""
    when the pod belongs to no gang."""
    labels = pod_labels(pod)
    for value in (labels.get(LABEL_POD_GROUP), labels.get(LABEL_LIGHTWEIGHT_NAME)):
        if isinstance(value, str) and value:
            return value
    value = pod_annotations(pod).get(ANNOTATION_GANG_NAME)
    return value if isinstance(value, str) else ""


def gang_id(pod: Mapping[str, Any]) -> str:
    """``<pod namespace>/<gang name>`` (only meaningful when gang_name is non-empty)."""
    return f"{metadata(pod).get('namespace') or ''}/{gang_name(pod)}"


def has_pod_group_label(pod: Mapping[str, Any]) -> bool:
    value = pod_labels(pod).get(LABEL_POD_GROUP)
    return isinstance(value, str) and value != ""


def node_name(pod: Mapping[str, Any]) -> str:
    value = spec(pod).get("nodeName")
    return value if isinstance(value, str) else ""


def uid(pod: Mapping[str, Any]) -> str:
    value = metadata(pod).get("uid")
    return value if isinstance(value, str) else ""


def parse_gang_groups(text: str) -> list[str]:
    """The groups annotation as a JSON array of strings; [] when empty or not such an array."""
    if not text:
        return []
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return []  # Go's decoder rejects the whole text: nothing decoded
    if not isinstance(value, list):
        return []
    # Go decodes what it can: an element that is not a string stays "" (and the error is only logged).
    return [v if isinstance(v, str) else "" for v in value]


def _no_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")  # NaN/Infinity are not JSON to Go


def match_policy_annotation(annotations: Mapping[str, str]) -> str:
    """The koordinator key, else its alias (read only when the first is empty)."""
    return annotations.get(ANNOTATION_GANG_MATCH_POLICY) or annotations.get(
        ANNOTATION_ALIAS_GANG_MATCH_POLICY, ""
    )


def time_or_zero(value: object) -> _dt.datetime:
    """A metav1.Time field: absent or malformed is Go's zero time."""
    try:
        return parse_rfc3339(value)
    except ValueError:
        return ZERO_TIME


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    phase: str = ""
    occupied_by: str = ""
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: _dt.datetime = ZERO_TIME


@dataclass(frozen=True, slots=True)
class PodGroup:
    """The fields of a PodGroup that gang scheduling reads."""

    namespace: str
    name: str
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: _dt.datetime = ZERO_TIME
    min_member: int = 0
    schedule_timeout_seconds: int | None = None
    status: PodGroupStatus = PodGroupStatus()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _int32(value: object, where: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"{where}={value!r}: expected an int32")
    return value


def parse_pod_group(obj: Mapping[str, Any], where: str = "podGroup") -> PodGroup:
    """A PodGroup from its JSON; ValueError naming the field for values of the wrong type."""
    if not isinstance(obj, Mapping):
        raise ValueError(f"{where}: expected a PodGroup object, got {obj!r:.80}")
    meta = metadata(obj)
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"{where}.metadata.name={name!r}: expected a non-empty string")
    namespace = meta.get("namespace") or ""
    if not isinstance(namespace, str):
        raise ValueError(f"{where}.metadata.namespace={namespace!r}: expected a string")
    pg_spec = spec(obj)
    raw_status = obj.get("status")
    st: Mapping[str, Any] = raw_status if isinstance(raw_status, Mapping) else {}
    phase = st.get("phase") or ""
    occupied = st.get("occupiedBy") or ""
    if not isinstance(phase, str) or not isinstance(occupied, str):
        raise ValueError(f"{where}.status: phase and occupiedBy must be strings")
    counts = {
        k: _int32(st.get(k), f"{where}.status.{k}", 0) or 0
        for k in ("scheduled", "running", "succeeded", "failed")
    }
    return PodGroup(
        namespace=namespace,
        name=name,
        annotations=_str_map(meta.get("annotations")),
        creation_timestamp=time_or_zero(meta.get("creationTimestamp")),
        min_member=_int32(pg_spec.get("minMember"), f"{where}.spec.minMember", 0) or 0,
        schedule_timeout_seconds=_int32(
            pg_spec.get("scheduleTimeoutSeconds"), f"{where}.spec.scheduleTimeoutSeconds", None
        ),
        status=PodGroupStatus(
            phase=phase,
            occupied_by=occupied,
            schedule_start_time=time_or_zero(st.get("scheduleStartTime")),
            **counts,
        ),
    )
