"""The koordlet's states informer (docs/rules/koordlet.md): this node's pods, the Node, its NodeSLO and
NodeMetric.

Pods come from a watch on the API server narrowed to ``spec.nodeName=<node>``; each pod's cgroup
directories are derived once per pod event (``agent.podmeta.pod_meta``), so collectors never walk the
cgroup tree. The NodeSLO is merged with the koordlet defaults (docs/rules/koordlet.md); a NodeSLO that
does not decode keeps the last good one. The NodeMetric's collect policy follows the refresh rule of
``policy_after_update`` (docs/rules/koordlet.md#reporter).
When a pod goes (or a container is replaced) ``on_forget`` is told, so its metric series are dropped.

Imports: standard library, apis.*, kube.informer (via the gateway), agent.{gateway,podmeta,system.podcgroup}.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.gateway import KubeGateway
from agent.podmeta import PodMeta, pod_meta
from agent.system.podcgroup import CgroupDriver
from apis.gojson_base import DecodeError
from apis.kubeobjects import CustomResource, Node, Pod
from apis.nodemetric import NodeMetricCollectPolicy, NodeMetricError, NodeMetricSpec
from apis.nodeslo import HostApplicationSpec, NodeSLOSpec
from apis.nodeslo_defaults import merge_node_slo_spec
from kube.informer import Informer

__all__ = ["ForgetHandler", "StatesInformer", "policy_after_update"]

log = logging.getLogger(__name__)

ForgetHandler = Callable[[str | None, Sequence[str]], None]
"""``on_forget(pod_uid or None, container_ids)``: series of that pod / those containers can go."""


def _spec_policy(obj: CustomResource) -> NodeMetricCollectPolicy:
    """The NodeMetric's collect policy with defaults for every missing field
    (docs/rules/koordlet.md#reporter)."""
    spec = NodeMetricSpec.from_dict(obj.get("spec") or {}, "spec")
    return (spec.collect_policy or NodeMetricCollectPolicy()).with_defaults()


def policy_after_update(
    current: NodeMetricCollectPolicy | None, old: CustomResource, new: CustomResource
) -> NodeMetricCollectPolicy | None:
    """Pure refresh rule (docs/rules/koordlet.md#reporter): on an update the local policy is refreshed
    only when both ``metadata.generation`` changed and the spec differs; otherwise the current one stays."""
    old_gen = (old.get("metadata") or {}).get("generation")
    new_gen = (new.get("metadata") or {}).get("generation")
    if current is not None and (old_gen == new_gen or old.get("spec") == new.get("spec")):
        return current
    return _spec_policy(new)


class StatesInformer:
    """Implements ``agent.podmeta.PodSource``; thread-safe readers, handlers run on informer threads."""

    def __init__(
        self, gateway: KubeGateway, driver: CgroupDriver, on_forget: ForgetHandler | None = None
    ) -> None:
        self._driver = driver
        self._on_forget = on_forget
        self._lock = threading.Lock()
        self._pods: dict[str, PodMeta] = {}
        self._pods_view: tuple[PodMeta, ...] = ()
        self._node: Node | None = None
        self._node_slo: NodeSLOSpec | None = None
        self._policy: NodeMetricCollectPolicy | None = None
        self._nodemetric_seen = False
        self.informers: list[Informer[Pod] | Informer[Node] | Informer[CustomResource]] = [
            gateway.pod_informer(self._pod_added, self._pod_updated, self._pod_deleted),
            gateway.node_informer(self._node_changed),
            gateway.nodeslo_informer(
                self._slo_changed, lambda _o, n: self._slo_changed(n), self._slo_deleted
            ),
            gateway.nodemetric_informer(self._nm_added, self._nm_updated, self._nm_deleted),
        ]

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self, stop: threading.Event) -> list[threading.Thread]:
        return [inf.start(stop) for inf in self.informers]

    def wait_synced(self, timeout: float) -> bool:
        """True once every informer has listed once (the reporter waits for them;
        docs/rules/koordlet.md#start-order-and-readiness)."""
        deadline = time.monotonic() + timeout
        return all(inf.has_synced.wait(max(0.0, deadline - time.monotonic())) for inf in self.informers)

    def synced(self) -> bool:
        return all(inf.has_synced.is_set() for inf in self.informers)

    # -- readers ---------------------------------------------------------------------------------------
    def pods(self) -> Sequence[PodMeta]:
        return self._pods_view

    def node(self) -> Node | None:
        return self._node

    def node_slo(self) -> NodeSLOSpec | None:
        """The merged NodeSLO spec, or None before the node's NodeSLO has been observed."""
        return self._node_slo

    def host_apps(self) -> Sequence[HostApplicationSpec] | None:
        slo = self._node_slo
        return None if slo is None else list(slo.host_applications or ())

    def collect_policy(self) -> NodeMetricCollectPolicy | None:
        """The local copy of the NodeMetric collect policy (defaults filled); None until observed."""
        return self._policy

    def nodemetric_seen(self) -> bool:
        """Whether this node's NodeMetric currently exists (reports are skipped otherwise)."""
        return self._nodemetric_seen

    # -- pods ------------------------------------------------------------------------------------------
    def _meta(self, pod: Pod) -> PodMeta | None:
        try:
            return pod_meta(pod, self._driver)
        except ValueError as e:
            log.warning("pod %s/%s: %s", *_ns_name(pod), e)
            return None

    def _publish(self) -> None:
        self._pods_view = tuple(self._pods.values())

    def _pod_added(self, pod: Pod) -> None:
        meta = self._meta(pod)
        if meta is None:
            return
        with self._lock:
            self._pods[meta.uid] = meta
            self._publish()

    def _pod_updated(self, _old: Pod, pod: Pod) -> None:
        meta = self._meta(pod)
        if meta is None:
            return
        with self._lock:
            previous = self._pods.get(meta.uid)
            self._pods[meta.uid] = meta
            self._publish()
        if previous is not None and self._on_forget is not None:
            gone = {ct.container_id for ct in previous.containers} - {
                ct.container_id for ct in meta.containers
            }
            if gone:
                self._on_forget(None, sorted(gone))

    def _pod_deleted(self, pod: Pod) -> None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        with self._lock:
            previous = self._pods.pop(uid, None)
            self._publish()
        if previous is not None and self._on_forget is not None:
            self._on_forget(uid, [ct.container_id for ct in previous.containers])

    # -- node, NodeSLO, NodeMetric ------------------------------------------------------------------
    def _node_changed(self, node: Node) -> None:
        self._node = node

    def _slo_changed(self, obj: CustomResource) -> None:
        try:
            spec = NodeSLOSpec.from_dict(obj.get("spec") or {}, "spec")
        except DecodeError as e:
            log.error("nodeslos/%s: keeping the last good NodeSLO: %s", _ns_name(obj)[1], e)
            return
        self._node_slo = merge_node_slo_spec(spec)

    def _slo_deleted(self, _obj: CustomResource) -> None:
        self._node_slo = None

    def _nm_added(self, obj: CustomResource) -> None:
        try:
            self._policy = _spec_policy(obj)
        except (NodeMetricError, DecodeError) as e:
            log.error(
                "nodemetrics/%s: bad spec, keeping the previous collect policy: %s", _ns_name(obj)[1], e
            )
        self._nodemetric_seen = True

    def _nm_updated(self, old: CustomResource, new: CustomResource) -> None:
        try:
            self._policy = policy_after_update(self._policy, old, new)
        except (NodeMetricError, DecodeError) as e:
            log.error(
                "nodemetrics/%s: bad spec, keeping the previous collect policy: %s", _ns_name(new)[1], e
            )
        self._nodemetric_seen = True

    def _nm_deleted(self, _obj: CustomResource) -> None:
        self._nodemetric_seen = False


def _ns_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")
