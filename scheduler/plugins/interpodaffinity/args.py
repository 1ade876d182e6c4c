"""InterPodAffinityArgs (docs/rules/scheduler-interpodaffinity.md#args): ``hardPodAffinityWeight``,
the weight of existing pods' required affinity terms in Score, default 1 (v1beta1
``SetDefaults_InterPodAffinityArgs``), valid in 0..100 (``ValidateHardPodAffinityWeight``). The legacy v1
Policy spelling ``hardPodAffinitySymmetricWeight`` is accepted too; when non-zero it takes precedence,
as kube's factory gives it. Other keys are ignored. Invalid args raise ValueError naming the field and
its value. Imports: the standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

DEFAULT_HARD_POD_AFFINITY_WEIGHT: Final = 1
MIN_WEIGHT, MAX_WEIGHT = 0, 100


def _int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"InterPodAffinityArgs: {field}={value!r}: must be an integer")
    v = int(value)
    if not MIN_WEIGHT <= v <= MAX_WEIGHT:
        raise ValueError(f"InterPodAffinityArgs: {field}={v}: not in valid range [{MIN_WEIGHT}-{MAX_WEIGHT}]")
    return v


@dataclass(frozen=True, slots=True)
class InterPodAffinityArgs:
    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None) -> InterPodAffinityArgs:
        args = args or {}
        weight = DEFAULT_HARD_POD_AFFINITY_WEIGHT
        raw = args.get("hardPodAffinityWeight")
        if raw is not None:
            weight = _int("hardPodAffinityWeight", raw)
        legacy = args.get("hardPodAffinitySymmetricWeight")
        if legacy is not None and _int("hardPodAffinitySymmetricWeight", legacy) != 0:
            weight = int(legacy)
        return cls(weight)
