"""Builders for the Coscheduling tests: gang pods, PodGroups, and a recording waiting-pods handle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apis.pod import pod_key
from scheduler.framework.interfaces import Pod
from scheduler.plugins.coscheduling.plugin import WaitingPod

GANG_NAME = "gang.scheduling.koordinator.sh/name"
MIN = "gang.scheduling.koordinator.sh/min-available"
PG_LABEL = "pod-group.scheduling.sigs.k8s.io"


def gang_pod(
    name: str, gang: str = "g", min_available: str | None = "2", *, ns: str = "default", node: str = "",
    pg: str | None = None, annotations: dict[str, str] | None = None, phase: str | None = None,
) -> Pod:  # fmt: skip
    ann: dict[str, str] = {}
    labels: dict[str, str] = {}
    if pg is not None:
        labels[PG_LABEL] = pg
    else:
        ann[GANG_NAME] = gang
    if min_available is not None:
        ann[MIN] = min_available
    ann.update(annotations or {})
    pod: Pod = {
        "metadata": {
            "namespace": ns,
            "name": name,
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": ann,
        },
        "spec": {"containers": []},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if phase:
        pod["status"] = {"phase": phase}
    return pod


class Recording:
    def __init__(self, pod: Mapping[str, Any], owner: RecordingWaitingPods) -> None:
        self._pod, self.owner = pod, owner

    @property
    def pod(self) -> Mapping[str, Any]:
        return self._pod

    def allow(self, plugin: str) -> None:
        self.owner.allowed.append((pod_key(self._pod), plugin))
        self.owner.parked.pop(pod_key(self._pod), None)

    def reject(self, plugin: str, message: str) -> None:
        self.owner.rejected[pod_key(self._pod)] = message
        self.owner.parked.pop(pod_key(self._pod), None)


class RecordingWaitingPods:
    def __init__(self) -> None:
        self.parked: dict[str, Recording] = {}
        self.allowed: list[tuple[str, str]] = []
        self.rejected: dict[str, str] = {}

    def park(self, pod: Mapping[str, Any]) -> None:
        self.parked[pod_key(pod)] = Recording(pod, self)

    def waiting_pods(self) -> list[WaitingPod]:
        return list(self.parked.values())
