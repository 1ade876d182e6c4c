"""The scheduler's informers: nodes, pods and NodeMetrics through the EventRouter; Services and workload
controllers into ClusterObjects (the spreading plugins' default selectors); PersistentVolumes, claims,
StorageClasses and CSINodes into VolumeObjects (the volume plugins); PodDisruptionBudgets into the
PDB store (preemption). Every change of a stored kind is also a ClusterEvent for the queue, so pods a
plugin parked for want of one are tried again. With Coscheduling in a profile, PodGroups and every pod
(pending ones too) also reach its plugins (scheduler.podgroupcontroller.GangEvents), each pod before the
router queues it, so the gang cache knows a pod before PreEnqueue is asked about it. With Reservation in
a profile, Reservations reach scheduler.reservationevents (the plugins, the controller, the reserve pods)
and every pod the controller (its owners). With ElasticQuota in a profile, ElasticQuotas, every pod
(before the router) and every node (after it) reach its plugins (scheduler.quotacontroller.QuotaEvents,
docs/rules/scheduler-elasticquota.md#wiring). With NodeNUMAResource or DeviceShare in a profile,
NodeResourceTopologies and Devices reach them (scheduler.topologyevents).
Imports: the kubernetes client, kube.informer, apis, scheduler (eventlock, framework, gateway,
podgroupcontroller, quotacontroller, reservationcontroller, reservationevents, topologyevents).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client

from apis.constants import NODE_METRIC_PLURAL, SLO_GROUP, SLO_VERSION
from apis.elasticquota import GROUP as QUOTA_GROUP
from apis.elasticquota import PLURAL as QUOTA_PLURAL
from apis.elasticquota import VERSION as QUOTA_VERSION
from apis.kubeobjects import KubeObject
from apis.reservation import GROUP as RESERVATION_GROUP
from kube.informer import Informer
from scheduler.eventlock import posting
from scheduler.framework.interfaces import ClusterEvent
from scheduler.framework.listers import REPLICA_SET, REPLICATION_CONTROLLER, SERVICE, STATEFUL_SET
from scheduler.framework.volumes import CSI_NODE, PV, PVC, STORAGE_CLASS
from scheduler.gateway import AnyInformer, EventRouter
from scheduler.podgroupcontroller import GROUP, PLURAL, VERSION, GangEvents
from scheduler.quotacontroller import QuotaEvents
from scheduler.reservationcontroller import PLURAL as RESERVATION_PLURAL
from scheduler.reservationcontroller import VERSION as RESERVATION_VERSION
from scheduler.reservationevents import ReservationEvents
from scheduler.topologyevents import (
    DEVICE_GROUP,
    DEVICE_PLURAL,
    DEVICE_VERSION,
    NRT_GROUP,
    NRT_PLURAL,
    NRT_VERSION,
    TopologyEvents,
)


class KindStore(Protocol):
    """A store of objects by kind (ClusterObjects, VolumeObjects)."""

    def on_add(self, kind: str, obj: Any) -> None: ...

    def on_update(self, kind: str, old: Any, new: Any) -> None: ...

    def on_delete(self, kind: str, obj: Any) -> None: ...


def store_handlers(store: KindStore, kind: str, on_event: Callable[[ClusterEvent], None]) -> dict[str, Any]:
    """Informer handlers that keep `store` current for `kind` and report each change as a ClusterEvent."""

    def add(obj: KubeObject) -> None:
        store.on_add(kind, obj)
        on_event(ClusterEvent(kind, "Add"))

    def update(old: KubeObject, new: KubeObject) -> None:
        store.on_update(kind, old, new)
        on_event(ClusterEvent(kind, "Update"))

    def delete(obj: KubeObject) -> None:
        store.on_delete(kind, obj)
        on_event(ClusterEvent(kind, "Delete"))

    return {"on_add": add, "on_update": update, "on_delete": delete}


class PodHandlers(Protocol):
    """Pod informer handlers (GangEvents, ReservationEvents)."""

    def pod_add(self, pod: Any) -> None: ...

    def pod_update(self, old: Any, new: Any) -> None: ...

    def pod_delete(self, pod: Any) -> None: ...


def pod_handlers(router: EventRouter, gangs: GangEvents | None, *others: PodHandlers) -> dict[str, Any]:
    """The pod informer's handlers: the router's, preceded by the gang plugins' and the others' (the
    Reservation controller's) when there are any."""
    first: list[PodHandlers] = [*([gangs] if gangs is not None else []), *others]
    if not first:
        return {"on_add": router.pod_add, "on_update": router.pod_update, "on_delete": router.pod_delete}

    def add(pod: Any) -> None:
        for h in first:
            h.pod_add(pod)
        router.pod_add(pod)

    def update(old: Any, new: Any) -> None:
        for h in first:
            h.pod_update(old, new)
        router.pod_update(old, new)

    def delete(pod: Any) -> None:
        for h in first:
            h.pod_delete(pod)
        router.pod_delete(pod)

    return {"on_add": add, "on_update": update, "on_delete": delete}


def node_handlers(router: EventRouter, quotas: QuotaEvents | None) -> dict[str, Any]:
    """The node informer's handlers: the router's, then the quota plugins' (allocatable makes their
    cluster total) when there are any."""
    if quotas is None:
        return {"on_add": router.node_add, "on_update": router.node_update, "on_delete": router.node_delete}

    def add(node: Any) -> None:
        router.node_add(node)
        quotas.node_add(node)

    def update(old: Any, new: Any) -> None:
        router.node_update(old, new)
        quotas.node_update(old, new)

    def delete(node: Any) -> None:
        router.node_delete(node)
        quotas.node_delete(node)

    return {"on_add": add, "on_update": update, "on_delete": delete}


def informers(
    router: EventRouter,
    api: Any,
    resync_seconds: float = 300,
    gangs: GangEvents | None = None,
    reservations: ReservationEvents | None = None,
    quotas: QuotaEvents | None = None,
    topology: TopologyEvents | None = None,
) -> list[AnyInformer]:
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    storage = client.StorageV1Api(api)
    custom = client.CustomObjectsApi(api)
    on_event = router.s.on_event

    def post(handlers: dict[str, Any]) -> dict[str, Any]:
        # Handlers of state the scheduler's lock guards are posted to it, not waited on: they run
        # between cycles, in order (docs/architecture.md#informer-mailbox). The stores and PDBs keep
        # locks of their own; NodeMetrics are decoded on their informer's thread, then posted (router).
        return posting(router.s.lock, handlers)

    watched: list[AnyInformer] = []
    stores: list[tuple[KindStore | None, tuple[tuple[str, Callable[..., Any]], ...]]] = [
        (router.objects, (
            (SERVICE, core.list_service_for_all_namespaces),
            (REPLICATION_CONTROLLER, core.list_replication_controller_for_all_namespaces),
            (REPLICA_SET, apps.list_replica_set_for_all_namespaces),
            (STATEFUL_SET, apps.list_stateful_set_for_all_namespaces),
        )),
        (router.volumes, (
            (PV, core.list_persistent_volume),
            (PVC, core.list_persistent_volume_claim_for_all_namespaces),
            (STORAGE_CLASS, storage.list_storage_class),
            (CSI_NODE, storage.list_csi_node),
        )),
    ]  # fmt: skip
    for store, kinds in stores:
        if store is None:
            continue
        for kind, lister in kinds:
            handlers = store_handlers(store, kind, on_event)
            watched.append(
                Informer(lister, resync_seconds=resync_seconds, name=kind.lower() + "s", **handlers)
            )
    if router.pdbs is not None:
        pdbs = router.pdbs
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": "policy", "version": "v1beta1", "plural": "poddisruptionbudgets"},
                     resync_seconds=resync_seconds, on_add=pdbs.upsert, on_update=pdbs.upsert,
                     on_delete=pdbs.delete, name="poddisruptionbudgets")
        )  # fmt: skip
    if gangs is not None:
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": GROUP, "version": VERSION, "plural": PLURAL},
                     resync_seconds=resync_seconds, name="podgroups",
                     **post({"on_add": gangs.pod_group_add, "on_update": gangs.pod_group_update,
                             "on_delete": gangs.pod_group_delete}))
        )  # fmt: skip
    if reservations is not None:  # docs/rules/scheduler-reservation.md#wiring
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": RESERVATION_GROUP, "version": RESERVATION_VERSION,
                             "plural": RESERVATION_PLURAL},
                     resync_seconds=resync_seconds, name="reservations",
                     **post({"on_add": reservations.reservation_add,
                             "on_update": reservations.reservation_update,
                             "on_delete": reservations.reservation_delete}))
        )  # fmt: skip
    if quotas is not None:  # docs/rules/scheduler-elasticquota.md#wiring
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": QUOTA_GROUP, "version": QUOTA_VERSION, "plural": QUOTA_PLURAL},
                     resync_seconds=resync_seconds, name="elasticquotas",
                     **post({"on_add": quotas.quota_add, "on_update": quotas.quota_update,
                             "on_delete": quotas.quota_delete}))
        )  # fmt: skip
    if topology is not None and topology.topology_plugins:  # docs/rules/scheduler-nodenumaresource.md#wiring
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": NRT_GROUP, "version": NRT_VERSION, "plural": NRT_PLURAL},
                     resync_seconds=resync_seconds, name="noderesourcetopologies",
                     **post({"on_add": topology.nrt_add, "on_update": topology.nrt_update,
                             "on_delete": topology.nrt_delete}))
        )  # fmt: skip
    if topology is not None and topology.device_plugins:  # docs/rules/scheduler-deviceshare.md#wiring
        watched.append(
            Informer(custom.list_cluster_custom_object,
                     kwargs={"group": DEVICE_GROUP, "version": DEVICE_VERSION, "plural": DEVICE_PLURAL},
                     resync_seconds=resync_seconds, name="devices",
                     **post({"on_add": topology.device_add, "on_update": topology.device_update,
                             "on_delete": topology.device_delete}))
        )  # fmt: skip
    others = [x for x in (reservations, quotas) if x is not None]
    return [
        *watched,
        Informer(core.list_node, resync_seconds=resync_seconds, **post(node_handlers(router, quotas)),
                 name="nodes"),
        Informer(core.list_pod_for_all_namespaces, resync_seconds=resync_seconds,
                 **post(pod_handlers(router, gangs, *others)), name="pods"),
        Informer(custom.list_cluster_custom_object,
                 kwargs={"group": SLO_GROUP, "version": SLO_VERSION, "plural": NODE_METRIC_PLURAL},
                 resync_seconds=resync_seconds, on_add=router.nodemetric_upsert,
                 on_update=router.nodemetric_upsert, on_delete=router.nodemetric_delete, name="nodemetrics"),
    ]  # fmt: skip
