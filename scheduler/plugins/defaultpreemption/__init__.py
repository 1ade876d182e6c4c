"""DefaultPreemption, kube-scheduler v1.20.2's PostFilter plugin
(docs/rules/scheduler-preemption.md#defaultpreemption).
Imports: scheduler.plugins.defaultpreemption (api.py, which needs the Kubernetes client, is imported by
the gateway on its own)."""

from scheduler.plugins.defaultpreemption.args import DefaultPreemptionArgs
from scheduler.plugins.defaultpreemption.effects import (
    InMemoryPreemptionAPI,
    PreemptionAPI,
    PreemptionError,
    apply_preemption,
)
from scheduler.plugins.defaultpreemption.plugin import NAME, DefaultPreemption, PreemptionResult

__all__ = [
    "NAME",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "InMemoryPreemptionAPI",
    "PreemptionAPI",
    "PreemptionError",
    "PreemptionResult",
    "apply_preemption",
]
