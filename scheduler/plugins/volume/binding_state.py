"""VolumeBinding's per-cycle state (docs/rules/scheduler-volumes.md#volumebinding): the pod's claims as
PreFilter sorted them, each delayed claim's candidate PVs, and Filter's outcome that Reserve, PreBind
and Unreserve read.
Imports: numpy, apis (jsonfields, labelselector), scheduler.plugins.volume (binding_bind, matching).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from apis.jsonfields import as_mapping
from apis.labelselector import LabelSelector
from scheduler.plugins.volume.binding_bind import ANN_BIND_COMPLETED, PodVolumes
from scheduler.plugins.volume.matching import CompiledPV


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(obj.get("metadata")).get("annotations"))


def is_fully_bound(pvc: Mapping[str, Any]) -> bool:
    """isPVCFullyBound: a volume name and the bind-completed annotation."""
    return bool(as_mapping(pvc.get("spec")).get("volumeName")) and ANN_BIND_COMPLETED in annotations_of(pvc)


@dataclass
class Claim:
    """A delayed-binding claim with what matching needs."""

    pvc: Mapping[str, Any]
    selected_node: str | None
    selector: LabelSelector | None = None
    selector_error: str = ""
    bound_pv: CompiledPV | None = None  # a PV already bound to the claim: it alone decides
    candidates: list[CompiledPV] = field(default_factory=list)  # smallest first


@dataclass
class BindingState:
    """The cycle's state (kube's stateData; shared by clones, as kube's Clone returns itself)."""

    skip: bool = False
    bound: list[tuple[Mapping[str, Any], CompiledPV | None]] = field(default_factory=list)
    to_bind: list[Claim] = field(default_factory=list)
    candidates: dict[str, list[CompiledPV]] = field(default_factory=dict)
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False
    # Filter's outcome, from which Reserve builds the chosen node's PodVolumes
    row_of: Mapping[str, int] = field(default_factory=dict)
    passed: npt.NDArray[np.bool_] | None = None
    best: list[tuple[Mapping[str, Any], npt.NDArray[np.int64]]] = field(default_factory=list)
    pv_by_id: list[CompiledPV] = field(default_factory=list)

    def __copy__(self) -> BindingState:
        return self
