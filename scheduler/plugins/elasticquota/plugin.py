"""ElasticQuota: hierarchical elastic quotas (docs/rules/scheduler-elasticquota.md). The plugin owns the group
quota manager of the default tree, fed by events (quotas, every pod — pending ones too, nodes' allocatable),
and runs at PreFilter (admission with upstream's reasons; its state kept for preemption), the PreFilter
extensions (AddPod/RemovePod adjust that state), PostFilter (preemption within the quota, through the
attached framework), Reserve and Unreserve (the pod's used). The preemption rules, the overuse revoke and
the status computation are also exposed as methods for the wiring's loops
(docs/rules/scheduler-elasticquota.md#wiring).
Imports: the standard library, apis (elasticquota, pod, quantity), scheduler.framework,
scheduler.plugins.defaultpreemption (PDBs) and this package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from apis.elasticquota import ElasticQuota as Quota
from apis.elasticquota import parse_elastic_quota
from apis.pod import metadata, pod_key, status
from apis.quantity import QuantityError, parse_resource_list
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.interfaces import ClusterEvent, Pod
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.runtime import Framework
from scheduler.framework.snapshot import NodeInfo, Snapshot
from scheduler.framework.status import Code, Status
from scheduler.plugins.defaultpreemption.pdb import PDB
from scheduler.plugins.elasticquota import postfilter, preemption
from scheduler.plugins.elasticquota.admission import PostFilterState, admit
from scheduler.plugins.elasticquota.args import ElasticQuotaArgs
from scheduler.plugins.elasticquota.manager import GroupQuotaManager
from scheduler.plugins.elasticquota.revoke import OveruseMonitor
from scheduler.plugins.elasticquota.status import status_patch

NAME: Final = "ElasticQuota"
STATE_KEY: Final = "ElasticQuota/postFilterState"
DEFAULT_TREE: Final = ""
QUOTA_EVENT_RESOURCE: Final = "ElasticQuota"  # the ClusterEvent resource of ElasticQuota objects
AnyPod = Mapping[str, Any]


class ElasticQuota:
    name = NAME

    def __init__(
        self,
        args: ElasticQuotaArgs | None = None,
        *,
        pdbs: Callable[[], Iterable[Mapping[str, Any]]] = lambda: (),
        nominated: NominatedPods | None = None,
        framework: Framework | None = None,
    ) -> None:
        """`pdbs`, `nominated` and the attached `framework` serve PostFilter's preemption, as they do
        DefaultPreemption's."""
        self.args = args or ElasticQuotaArgs()
        self.pdbs = pdbs
        self.nominated = nominated if nominated is not None else NominatedPods()
        self.framework = framework
        self.managers: dict[str, GroupQuotaManager] = {DEFAULT_TREE: GroupQuotaManager(self.args)}
        self.quota_tree: dict[str, str] = {}  # quota name → tree id (all "" without MultiQuotaTree)
        self.monitor = OveruseMonitor(self.args.delay_evict_time)
        self._pod_quota: dict[str, str] = {}  # pod key → the quota it is charged to
        self._pods: dict[str, Pod] = {}

    @classmethod
    def from_args(cls, args: Mapping[str, Any] | None, **kwargs: Any) -> ElasticQuota:
        return cls(ElasticQuotaArgs.from_args(args), **kwargs)

    def attach(self, framework: Framework) -> None:
        """The framework whose filters PostFilter runs on a node without its victims."""
        self.framework = framework

    @property
    def manager(self) -> GroupQuotaManager:
        return self.managers[DEFAULT_TREE]

    def events_to_register(self) -> list[ClusterEvent]:
        """A pod the quota turned away may fit once a pod is deleted or any quota changes (its runtime
        moves with requests and quotas), as upstream registers
        (docs/rules/scheduler-elasticquota.md#wiring)."""
        return [ClusterEvent("Pod", "Delete"), ClusterEvent(QUOTA_EVENT_RESOURCE, "*")]

    # --- informer events --------------------------------------------------------------------------------
    def on_quota_add(self, obj: Mapping[str, Any]) -> None:
        quota = parse_elastic_quota(obj)
        self.quota_tree[quota.name] = DEFAULT_TREE
        # an update of the status annotations alone changes nothing a pod's quota depends on: the pods
        # stay where they are (rehoming them all is O(pods), and the status loop writes every second)
        if self.manager.upsert_quota(quota):
            self._rehome_pods()

    def on_quota_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_quota_add(new)

    def on_quota_delete(self, obj: Mapping[str, Any]) -> None:
        quota = parse_elastic_quota(obj)
        self.manager.delete_quota(quota.name)
        self.quota_tree.pop(quota.name, None)
        self._rehome_pods()

    def upsert_quota(self, quota: Quota) -> None:
        self.manager.upsert_quota(quota)
        self.quota_tree[quota.name] = DEFAULT_TREE

    def _rehome_pods(self) -> None:
        """Pods whose quota changed with the quota set (a namespace quota created, a quota deleted) move."""
        for key, pod in self._pods.items():
            old = self._pod_quota.get(key, "")
            new = self.manager.resolve(pod)
            if old != new or key not in self.manager.quotas[new].pods:
                self.manager.on_pod_delete(old, pod)
                self.manager.on_pod_add(new, pod)
                self._pod_quota[key] = new

    def on_any_pod_add(self, pod: Pod) -> None:
        quota = self.manager.resolve(pod)
        self._pod_quota[pod_key(pod)] = quota
        self._pods[pod_key(pod)] = pod
        self.manager.on_pod_add(quota, pod)

    def on_any_pod_update(self, old: Pod, new: Pod) -> None:
        old_quota = self._pod_quota.get(pod_key(old)) or self.manager.resolve(old)
        new_quota = self.manager.resolve(new)
        self._pod_quota[pod_key(new)] = new_quota
        self._pods[pod_key(new)] = new
        self.manager.on_pod_update(old_quota, new_quota, old, new)

    def on_any_pod_delete(self, pod: Pod) -> None:
        quota = self._pod_quota.pop(pod_key(pod), None) or self.manager.resolve(pod)
        self._pods.pop(pod_key(pod), None)
        self.manager.on_pod_delete(quota, pod)

    def on_node(self, name: str, node: Mapping[str, Any] | None) -> None:
        """A node added or updated (None: deleted). A node being deleted no longer counts."""
        if node is None or metadata(node).get("deletionTimestamp"):
            self.manager.set_node(name, None)
            return
        try:
            allocatable = parse_resource_list(status(node).get("allocatable") or {})
        except QuantityError:
            allocatable = {}
        self.manager.set_node(name, allocatable)

    # --- PreFilter (docs/rules/scheduler-elasticquota.md#prefilter-admission) ---------------------------
    def resolve(self, pod: AnyPod) -> str:
        return self.manager.resolve(pod)

    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        quota = self.resolve(pod)
        tree = self.quota_tree.get(quota, DEFAULT_TREE)
        mgr = self.managers.get(tree)
        if mgr is None:
            return Status.error(
                f"Could not find the specified ElasticQuotaManager for quota: {quota}, tree: {tree}"
            )
        st, post = admit(mgr, quota, pod, self.args.enable_runtime_quota, self.args.enable_check_parent_quota)
        if post is not None:
            state.write(STATE_KEY, post)
        return st

    def _state(self, state: CycleState) -> PostFilterState | None:
        post = state.get(STATE_KEY)
        return post if isinstance(post, PostFilterState) else None

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, info: NodeInfo) -> Status:
        post = self._state(state)
        if post is not None and not post.skip:
            post.adjust(pod_key(pod_to_add), pod_to_add, 1)
        return Status.success()

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, info: NodeInfo) -> Status:
        post = self._state(state)
        if post is not None and not post.skip:
            post.adjust(pod_key(pod_to_remove), pod_to_remove, -1)
        return Status.success()

    # --- Reserve / Unreserve ------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        quota = self.resolve(pod)
        tree = self.quota_tree.get(quota, DEFAULT_TREE)
        mgr = self.managers.get(tree)
        if mgr is None:
            return Status.error(f"quota manager not found, quota: {quota}, tree: {tree}")
        mgr.reserve(quota, pod)
        return Status.success()

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        mgr = self.managers.get(self.quota_tree.get(self.resolve(pod), DEFAULT_TREE))
        if mgr is not None:
            mgr.unreserve(self.resolve(pod), pod)

    # --- preemption (docs/rules/scheduler-elasticquota.md#preemption) -----------------------------------
    def can_preempt(self, preemptor: AnyPod, victim: AnyPod) -> bool:
        return preemption.can_preempt(
            preemptor, victim, self.resolve, self.args.disable_default_quota_preemption
        )

    def eligible_to_preempt(
        self, pod: AnyPod, nominated_node_status: Code | None, node_pods: Mapping[str, Sequence[AnyPod]]
    ) -> tuple[bool, str]:
        return preemption.eligible_to_preempt(pod, nominated_node_status, node_pods, self.resolve)

    def select_victims_on_node(
        self,
        state: CycleState,
        preemptor: AnyPod,
        node: str,
        node_pods: Sequence[AnyPod],
        filters_pass: Callable[[Sequence[AnyPod]], Status],
        violates_budget: Callable[[AnyPod], bool] = lambda _: False,
    ) -> tuple[list[AnyPod], int, Status]:
        post = self._state(state)
        if post is None:
            return [], 0, Status.error("no ElasticQuota state: PreFilter did not run for this pod")
        return preemption.select_victims_on_node(
            preemptor,
            node,
            node_pods,
            post.clone(),
            lambda v: self.can_preempt(preemptor, v),
            filters_pass,
            violates_budget,
        )

    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, statuses: dict[str, Status]
    ) -> Status:
        """Preemption within the pod's quota (scheduler.plugins.elasticquota.postfilter); its decision is
        DefaultPreemption's PreemptionResult, which the gateway carries out."""
        if self.framework is None:
            return Status.error("ElasticQuota: no framework attached", plugin=NAME)
        return postfilter.post_filter(
            self.framework,
            STATE_KEY,
            self.can_preempt,
            self.eligible_to_preempt,
            self.nominated,
            [PDB.of(o) for o in self.pdbs()],
            state,
            pod,
            snapshot,
            statuses,
            NAME,
        )

    @staticmethod
    def post_filter_message(message: str) -> str:
        """PostFilter's message: a non-empty evaluator message gets the ``preemption: `` prefix."""
        return f"preemption: {message}" if message else message

    # --- loops of the wiring --------------------------------------------------------------------------------
    def revoke(self, now_ns: int) -> dict[str, list[AnyPod]]:
        """The overuse revoke's evictions due at ``now_ns`` (only with monitorAllQuotas and runtime quota)."""
        if not (self.args.monitor_all_quotas and self.args.enable_runtime_quota):
            return {}
        return self.monitor.due(self.manager, now_ns)

    def status_patch(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status controller's merge patch for one ElasticQuota object (None: nothing to write)."""
        name = metadata(obj).get("name")
        info = self.manager.info(name) if isinstance(name, str) else None
        return None if info is None else status_patch(obj, info)
