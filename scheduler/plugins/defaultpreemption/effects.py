"""Carrying out a preemption (docs/rules/scheduler-preemption.md#effects), as kube's
``PrepareCandidate`` and the scheduler's failure handling do: every victim is deleted (the first
failure stops it: the pod is then not nominated), the lower-priority pods nominated to the node have
their ``status.nominatedNodeName`` cleared, and the preemptor's is set to the node (or cleared, when
preemption can help nowhere). `PreemptionAPI` is what this needs of the cluster: api.py implements it
over the Kubernetes client, `InMemoryPreemptionAPI` for tests and simulations.
Imports: standard library, scheduler.framework, scheduler.plugins.defaultpreemption.plugin.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Protocol

from apis.pod import pod_key
from scheduler.framework.interfaces import Pod
from scheduler.framework.nominated import NominatedPods, nominated_node_name
from scheduler.plugins.defaultpreemption.plugin import PreemptionResult


class PreemptionError(Exception):
    """A call to the cluster failed; the message says which and why."""


class PreemptionAPI(Protocol):
    def delete_pod(self, victim: Pod, preemptor: Pod, node: str) -> None:
        """Deletes a victim (records that `preemptor` preempted it on `node`); raises PreemptionError."""
        ...

    def set_nominated_node(self, pod: Pod, node: str | None) -> None:
        """Sets (None: clears) ``status.nominatedNodeName``; raises PreemptionError."""
        ...


@dataclass
class InMemoryPreemptionAPI:
    """Records the calls; `fail_delete` names pods (``ns/name``) whose deletion fails."""

    deleted: list[str] = field(default_factory=list)
    nominations: list[tuple[str, str | None]] = field(default_factory=list)
    fail_delete: set[str] = field(default_factory=set)

    def delete_pod(self, victim: Pod, preemptor: Pod, node: str) -> None:
        key = pod_key(victim)
        if key in self.fail_delete:
            raise PreemptionError(f"deleting pod {key}: refused")
        self.deleted.append(key)

    def set_nominated_node(self, pod: Pod, node: str | None) -> None:
        self.nominations.append((pod_key(pod), node))


def apply_preemption(
    api: PreemptionAPI, pod: Pod, result: PreemptionResult, nominated: NominatedPods | None = None
) -> str | None:
    """Carries out `result`; returns the node the pod is now nominated to (None: not nominated).
    `nominated` (the scheduler's) follows at once, without waiting for the informers."""
    if result.node is None:
        if result.clear_preemptor and nominated_node_name(pod):
            api.set_nominated_node(pod, None)
        if nominated is not None:
            nominated.delete(pod)
        return None
    try:
        for victim in result.victims:
            api.delete_pod(victim, pod, result.node)
    except PreemptionError:
        return None
    for p in result.clear_nominated:
        if nominated_node_name(p):
            with contextlib.suppress(PreemptionError):  # kube logs it and nominates all the same
                api.set_nominated_node(p, None)
        if nominated is not None:
            nominated.delete(p)
    if nominated_node_name(pod) != result.node:
        # kube logs a failed status update; the scheduler's queue holds the nomination all the same
        with contextlib.suppress(PreemptionError):
            api.set_nominated_node(pod, result.node)
    if nominated is not None:
        nominated.add(pod, result.node)
    return result.node
