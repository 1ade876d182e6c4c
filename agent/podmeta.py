"""What the koordlet knows of one pod on its node: the pod object plus its cgroup directories.

Built by the states informer when a pod event arrives (so collectors never walk the cgroup tree per tick)
and read by collectors, the reporter and the QoS strategies. ``PodSource`` is the read side they depend on.
Imports: standard library, apis.{kubeobjects,qos}, agent.system.podcgroup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.system.podcgroup import (
    CgroupDriver,
    KubeQOS,
    container_cgroup_dir,
    parse_container_id,
    pod_cgroup_dir,
)
from apis.kubeobjects import Pod
from apis.qos import kube_qos_class

__all__ = ["ContainerMeta", "PodMeta", "PodSource", "pod_meta"]


@dataclass(frozen=True, slots=True)
class ContainerMeta:
    """A running (or last-run) container of a pod with a known container ID."""

    name: str
    container_id: str
    """The bare runtime ID (``abc…``), the ``container_id`` label of the metric cache."""
    cgroup_dir: str
    """Relative to the cgroup root (and, on v1, to a subsystem); ends with ``/``."""


@dataclass(frozen=True, slots=True)
class PodMeta:
    uid: str
    namespace: str
    name: str
    kube_qos: KubeQOS
    cgroup_dir: str
    """Pod cgroup dir relative to the cgroup root (upstream's ``CgroupDir``, see
    docs/rules/koordlet.md#collectors); ends with ``/``."""
    containers: tuple[ContainerMeta, ...]
    pod: Pod
    """The pod object as the API server sent it; never mutated."""


class PodSource(Protocol):
    """The pods of this node as currently known (the states informer implements it)."""

    def pods(self) -> Sequence[PodMeta]: ...


def pod_meta(pod: Pod, driver: CgroupDriver) -> PodMeta:
    """Pure: derive a ``PodMeta`` from a pod object and the kubelet's cgroup driver.

    Containers without a (parsable) ``containerID`` in ``status.containerStatuses`` are left out: they
    have no cgroup yet. ``ValueError`` when the pod has no UID.
    """
    meta = pod.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    kube_qos = KubeQOS(str(kube_qos_class(pod)))
    pod_dir = pod_cgroup_dir(driver, kube_qos, uid)
    containers: list[ContainerMeta] = []
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    for status in statuses:
        raw = status.get("containerID") or ""
        if not raw:
            continue
        try:
            cid = parse_container_id(str(raw))
            cdir = container_cgroup_dir(driver, pod_dir, cid)
        except ValueError:
            continue
        containers.append(ContainerMeta(str(status.get("name") or ""), cid.id, cdir))
    return PodMeta(
        uid=uid,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        kube_qos=kube_qos,
        cgroup_dir=pod_dir,
        containers=tuple(containers),
        pod=pod,
    )
