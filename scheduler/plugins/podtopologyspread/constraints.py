"""PodTopologySpread's constraints and args (docs/rules/scheduler-spread.md#podtopologyspread-args):
a pod's ``topologySpreadConstraints`` of one action with their selectors compiled, the default
constraints (System: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway; List: the args'),
applied to a pod without constraints of its own that a Service/RC/RS/StatefulSet selects, and
``PodTopologySpreadArgs`` decoded with kube-scheduler v1.20's defaults and validation. Also Go's
``math.Log`` (the scoring weight), bit for bit.
Imports: standard library, apis (jsonfields, kubeobjects, labelselector), scheduler.framework.listers.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from apis.jsonfields import as_mapping
from apis.kubeobjects import Pod
from apis.labelselector import LabelSelector, LabelSelectorError, is_qualified_name
from scheduler.framework.listers import ClusterObjects, Requirements, canonical, selector_requirements

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"
SYSTEM_DEFAULTING: Final = "System"
LIST_DEFAULTING: Final = "List"
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

#: A compiled selector: requirements ANDed (empty: every pod), or None (an unset selector: no pod).
Selector = Requirements | None


@dataclass(frozen=True, slots=True)
class Constraint:
    """One constraint with its selector compiled."""

    max_skew: int
    topology_key: str
    selector: Selector


@dataclass(frozen=True, slots=True)
class DefaultConstraint:
    """A constraint of the args: no selector (each pod's is deduced)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str


SYSTEM_DEFAULT_CONSTRAINTS: Final = (
    DefaultConstraint(3, LABEL_HOSTNAME, SCHEDULE_ANYWAY),
    DefaultConstraint(5, LABEL_ZONE, SCHEDULE_ANYWAY),
)


def compile_selector(raw: Any) -> Selector:
    """``metav1.LabelSelectorAsSelector``; raises LabelSelectorError for an invalid selector."""
    if raw is None:
        return None
    return canonical(selector_requirements(LabelSelector.from_dict(raw)))


def _max_skew(raw: Any) -> int:
    """An int32 maxSkew (the API server admits only positive ones)."""
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != int(raw):
        return 0
    v = int(raw)
    return v if INT32_MIN <= v <= INT32_MAX else 0


def pod_constraints(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    raw = as_mapping(pod.get("spec")).get("topologySpreadConstraints")
    return [as_mapping(c) for c in raw] if isinstance(raw, list) else []


class ConstraintError(ValueError):
    """A constraint's selector LabelSelectorAsSelector refuses (the cycle fails with an error)."""


def of_action(raw: Sequence[Mapping[str, Any]], action: str) -> tuple[Constraint, ...]:
    """``filterTopologySpreadConstraints``: the pod's constraints of `action`, in order."""
    out = []
    for c in raw:
        if c.get("whenUnsatisfiable") != action:
            continue
        try:
            selector = compile_selector(c.get("labelSelector"))
        except LabelSelectorError as e:
            raise ConstraintError(str(e)) from e
        key = c.get("topologyKey")
        out.append(Constraint(_max_skew(c.get("maxSkew")), key if isinstance(key, str) else "", selector))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class SpreadArgs:
    """``PodTopologySpreadArgs`` after defaulting and validation; ``constraints`` are those in force
    (the system ones under System defaulting)."""

    defaulting_type: str = SYSTEM_DEFAULTING
    default_constraints: tuple[DefaultConstraint, ...] = ()

    @property
    def constraints(self) -> tuple[DefaultConstraint, ...]:
        if self.defaulting_type == SYSTEM_DEFAULTING:
            return SYSTEM_DEFAULT_CONSTRAINTS
        return self.default_constraints

    @classmethod
    def from_args(cls, args: Mapping[str, Any]) -> SpreadArgs:
        """Decodes v1beta1 (and later v1) args; raises ValueError naming the field and value."""
        raw_list = _lookup(args, "defaultConstraints")
        if raw_list is None:
            raw_list = []
        if not isinstance(raw_list, list):
            raise ValueError(f"defaultConstraints={raw_list!r}: must be a list")
        raw_type = _lookup(args, "defaultingType")
        if raw_type is None or raw_type == "":
            # v1beta1 with DefaultPodTopologySpread on (the v1.20 default): List when constraints are given
            raw_type = LIST_DEFAULTING if raw_list else SYSTEM_DEFAULTING
        if raw_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            raise ValueError(f'defaultingType={raw_type!r}: must be one of {{"System", "List"}}')
        if raw_type == SYSTEM_DEFAULTING and raw_list:
            raise ValueError("defaultingType='System': when .defaultConstraints are not empty")
        out: list[DefaultConstraint] = []
        for i, item in enumerate(raw_list):
            out.append(_default_constraint(item, f"defaultConstraints[{i}]", out))
        return cls(str(raw_type), tuple(out))


def _lookup(data: Mapping[str, Any], name: str) -> Any:
    """Go encoding/json key lookup: exact first, then case-insensitively."""
    if name in data:
        return data[name]
    return next((v for k, v in data.items() if isinstance(k, str) and k.lower() == name.lower()), None)


def _default_constraint(item: Any, path: str, before: Sequence[DefaultConstraint]) -> DefaultConstraint:
    if not isinstance(item, Mapping):
        raise ValueError(f"{path}={item!r}: must be an object")
    skew = _lookup(item, "maxSkew")
    skew = 0 if skew is None else skew
    if isinstance(skew, bool) or not isinstance(skew, int) or not INT32_MIN <= skew <= INT32_MAX:
        raise ValueError(f"{path}.maxSkew={skew!r}: must be an int32")
    if skew <= 0:
        raise ValueError(f"{path}.maxSkew={skew}: must be greater than zero")
    key = _lookup(item, "topologyKey")
    key = "" if key is None else key
    if not isinstance(key, str):
        raise ValueError(f"{path}.topologyKey={key!r}: must be a string")
    if not key:
        raise ValueError(f"{path}.topologyKey: Required value: can not be empty")
    if not is_qualified_name(key):
        raise ValueError(f"{path}.topologyKey={key!r}: must be a valid label name (a qualified name)")
    action = _lookup(item, "whenUnsatisfiable")
    action = "" if action is None else action
    if not action:
        raise ValueError(f"{path}.whenUnsatisfiable: Required value: can not be empty")
    if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise ValueError(
            f'{path}.whenUnsatisfiable={action!r}: Unsupported value: supported values: "DoNotSchedule", '
            '"ScheduleAnyway"'
        )
    if _lookup(item, "labelSelector") is not None:
        raise ValueError(
            f"{path}.labelSelector: Forbidden: "
            "constraint must not define a selector, as they deduced for each pod"
        )
    if any(c.topology_key == key and c.when_unsatisfiable == action for c in before):
        raise ValueError(f"{path}: Duplicate value: {{{key}, {action}}}")
    return DefaultConstraint(skew, key, str(action))


def default_constraints(
    pod: Pod, defaults: Sequence[DefaultConstraint], objects: ClusterObjects | None, action: str
) -> tuple[Constraint, ...]:
    """``buildDefaultConstraints``: the defaults of `action`, each with the selector the pod's
    Services/RCs/RSs/StatefulSets make; none when that selector is empty."""
    chosen = [c for c in defaults if c.when_unsatisfiable == action]
    if not chosen or objects is None:
        return ()
    selector = objects.default_selector(pod)
    if not selector:
        return ()
    return tuple(Constraint(c.max_skew, c.topology_key, selector) for c in chosen)


@functools.lru_cache(maxsize=4096)
def go_log(x: float) -> float:
    """Go's ``math.Log`` (FreeBSD's algorithm, as Go runs it on amd64) for a finite x > 0: the C
    library's log differs from it in the last bit for about one integer in a hundred."""
    ln2_hi, ln2_lo = 6.93147180369123816490e-01, 1.90821492927058770002e-10
    l1, l2, l3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
    l4, l5, l6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
    l7 = 1.479819860511658591e-01
    f1, ki = math.frexp(x)
    if f1 < math.sqrt(2) / 2:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (l1 + s4 * (l3 + s4 * (l5 + s4 * l7)))
    t2 = s4 * (l2 + s4 * (l4 + s4 * l6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * ln2_hi - ((hfsq - (s * (hfsq + r) + k * ln2_lo)) - f)
