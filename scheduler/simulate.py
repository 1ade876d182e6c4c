"""``koord simulate`` for kind ``Schedule`` (docs/simulate.md#schedule): the operator's what-if for a whole
cluster. The scenario's nodes, bound pods and NodeMetrics are fed to the real scheduler — its cache, queue,
profile and plugins, through the same event router the informers drive — and its pending pods are
scheduled one after another in queue order (priority, then the order given) with an in-process binder.
Out: each pending pod's node, or the message it would be reported unschedulable with. A pod that
preempts (DefaultPreemption) has its victims really leave the cluster, through the event router as a
deleted pod would, and every pod still pending then gets a second attempt; its result names its
nominated node and victims. Ties between nodes, and preemption's sampling offset, are drawn from
generators seeded with the scenario's ``seed`` (default 0), so a run repeats. VolumeBinding's Reserve and
PreBind run as in production, writing through scheduler.simulatevolumes' API (which also plays the PV
controller and a provisioner), so later pods see the claims earlier ones bound; a scheduled pod's result
lists its claims' PVs.
Bad input raises ``ValueError`` naming the field and its value (docs/simulate.md#input-errors).
Imports: the standard library, apis (kubeobjects, objectcheck, pod, rfc3339), scheduler.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Final

from apis.kubeobjects import CustomResource, KubeObject, Pod
from apis.objectcheck import as_node, as_pod, as_pods, check_object, object_list
from apis.pod import pod_key
from apis.rfc3339 import parse_rfc3339
from scheduler.cache import SchedulerCache
from scheduler.config import ConfigError, parse_config
from scheduler.framework.interfaces import Pod as AnyPod
from scheduler.framework.listers import KINDS, ClusterObjects
from scheduler.framework.nominated import NominatedPods
from scheduler.framework.status import Code, Status
from scheduler.framework.volumes import KINDS as VOLUME_KINDS
from scheduler.framework.volumes import VolumeObjects
from scheduler.gateway import EventRouter, Preemptor
from scheduler.plugins.volume.binding import VolumeBinding
from scheduler.plugins.volume.common import claim_name, pod_namespace, pod_volumes
from scheduler.queue import SchedulingQueue
from scheduler.registry import KNOWN, Handle, build_framework
from scheduler.scheduler import Decision, Scheduler
from scheduler.simulatevolumes import ScenarioClock, ScenarioVolumeAPI
from scheduler.simulatevolumes_input import check_storage_object

DEFAULT_NOW: Final = "2026-01-01T00:00:00Z"
_FIELDS: Final = frozenset(
    {"kind", "description", "source", "seed", "now", "config", "nodes", "pods", "nodeMetrics", "objects",
     "pending", "podDisruptionBudgets", "expect"}
)  # fmt: skip


class _Binder:
    """Binds in the simulation: records the node, and the pod's claims as PreBind left them."""

    def __init__(self, volume_api: ScenarioVolumeAPI) -> None:
        self.bound: dict[str, str] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self.volume_api = volume_api

    def bind(self, pod: Pod, node: str) -> Status:
        key = pod_key(pod)
        self.bound[key] = node
        names = [n for n in (claim_name(v) for v in pod_volumes(pod)) if n is not None]
        if names:
            self.claims[key] = self.volume_api.claims_of(pod_namespace(pod), names)
        return Status.success()


class _Evictions:
    """The simulation's PreemptionAPI (docs/simulate.md#schedule): a victim leaves the cluster through
    the event router, as the informer would report its deletion."""

    def __init__(self) -> None:
        self.router: EventRouter | None = None
        self.victims: dict[str, list[str]] = {}  # preemptor → victims
        self.preempted_by: dict[str, str] = {}  # victim → preemptor

    def delete_pod(self, victim: AnyPod, preemptor: AnyPod, node: str) -> None:
        key, by = pod_key(victim), pod_key(preemptor)
        self.victims.setdefault(by, []).append(key)
        self.preempted_by[key] = by
        assert self.router is not None
        self.router.pod_delete(victim)

    def set_nominated_node(self, pod: AnyPod, node: str | None) -> None:
        """The nomination is the scheduler's NominatedPods' (kept by the Preemptor)."""


def _seed(scenario: Mapping[str, Any]) -> int:
    seed = scenario.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed={seed!r}: expected an integer")
    return seed


def simulate(scenario: dict[str, Any]) -> dict[str, Any]:
    """``{"pods": {"<namespace>/<name>": {"node": …} | {"unschedulable": "<message>"}}}`` for every
    pending pod, in the order given; a scheduled pod with claims also has ``claims`` (claim → its PV),
    a preemptor ``nominatedNode`` and ``victims``, and a pending pod preempted after it was bound
    ``preemptedBy``."""
    unknown = sorted(set(scenario) - _FIELDS)
    if unknown:
        raise ValueError(
            f"{unknown[0]}: unknown field of a Schedule scenario (known: {', '.join(sorted(_FIELDS))})"
        )
    try:
        now = parse_rfc3339(scenario.get("now", DEFAULT_NOW)).timestamp()
    except ValueError as e:
        raise ValueError(f"now={scenario.get('now')!r}: {e}") from None
    try:
        config = parse_config(scenario.get("config"), KNOWN)
        objects = ClusterObjects()
        seed = _seed(scenario)
        pdbs = object_list(scenario, "podDisruptionBudgets")
        volumes = VolumeObjects()
        volume_api = ScenarioVolumeAPI(volumes)
        handle = Handle(
            clock=lambda: now, objects=objects, pdbs=lambda: pdbs, nominated=NominatedPods(),
            rng=random.Random(seed), volumes=volumes, volume_api=volume_api,
        )  # fmt: skip
        frameworks = {
            p.scheduler_name: build_framework(p, handle, rng=random.Random(seed)) for p in config.profiles
        }
    except ConfigError as e:
        raise ValueError(f"config: {e}") from None
    volume_clock = ScenarioClock(now)  # PreBind waits for its claims in the scenario's time
    for fw in frameworks.values():
        for plugin in fw.plugins:
            if isinstance(plugin, VolumeBinding):
                plugin.sleep, plugin.monotonic = volume_clock.sleep, volume_clock.monotonic
    clock = lambda: now  # noqa: E731 - the scenario's one instant
    binder = _Binder(volume_api)
    reasons: dict[str, str] = {}

    def unschedulable(pod: Pod, status: Status) -> None:
        reasons[pod_key(pod)] = status.message()

    def decided(decision: Decision) -> None:
        if decision.node is None and decision.status.code == Code.ERROR:  # a failed PreBind, say
            reasons[decision.pod] = decision.status.message()

    # The queue's clock moves on between the two rounds only, so that pods backing off come back.
    queue_now = [now]
    sched = Scheduler(
        frameworks, SchedulerCache(clock=clock), SchedulingQueue(clock=lambda: queue_now[0]), binder,
        clock=clock, bind_workers=0, on_unschedulable=unschedulable, on_decision=decided,
    )  # fmt: skip
    evictions = _Evictions()
    preemptor = Preemptor(sched, evictions)  # no pool: carried out inline
    sched.on_post_filter = preemptor
    names = list(frameworks)
    router = EventRouter(sched, names, objects, volumes=volumes)
    evictions.router = router
    try:
        for i, raw in enumerate(object_list(scenario, "nodes")):
            node = as_node(raw, f"nodes[{i}]")
            if not isinstance(node.get("metadata", {}).get("name"), str):
                raise ValueError(f"nodes[{i}].metadata.name: required")
            router.node_add(node)
        for i, pod in enumerate(as_pods(scenario.get("pods"), "pods")):
            if not (pod.get("spec") or {}).get("nodeName"):
                raise ValueError(f"pods[{i}].spec.nodeName: required (pods to schedule go in 'pending')")
            router.pod_add(pod)
        for i, raw in enumerate(object_list(scenario, "nodeMetrics")):
            if not isinstance(raw.get("metadata", {}).get("name"), str):
                raise ValueError(f"nodeMetrics[{i}].metadata.name: required")
            router.nodemetric_upsert(check_object(raw, CustomResource, f"nodeMetrics[{i}]"))
        for i, raw in enumerate(object_list(scenario, "objects")):
            kind = raw.get("kind")
            if kind not in (*KINDS, *VOLUME_KINDS):
                known = ", ".join((*KINDS, *VOLUME_KINDS))
                raise ValueError(f"objects[{i}].kind={kind!r}: must be one of {known}")
            if kind in KINDS:
                objects.on_add(str(kind), check_object(raw, KubeObject, f"objects[{i}]"))
            else:
                volume_api.load(
                    str(kind), check_storage_object(str(kind), raw, f"objects[{i}]"), f"objects[{i}]"
                )
        order: list[str] = []
        for i, raw in enumerate(object_list(scenario, "pending")):
            pod = as_pod(_pending(raw, names[0]), f"pending[{i}]")
            if (pod.get("spec") or {}).get("nodeName"):
                raise ValueError(f"pending[{i}].spec.nodeName: must be empty (bound pods go in 'pods')")
            key = pod_key(pod)
            if key in order:
                raise ValueError(f"pending[{i}]: {key} given twice")
            order.append(key)
            wanted = pod.get("spec", {}).get("schedulerName")
            if wanted not in frameworks:
                ours = ", ".join(repr(n) for n in names)
                reasons[key] = f"not scheduled: schedulerName {wanted!r} is not a profile's ({ours})"
                continue
            router.pod_add(pod)
        for _ in range(len(order)):  # every pending pod gets one attempt
            if not sched.schedule_one(timeout=0):
                break
        if evictions.victims:  # victims are gone: every pod still pending gets a second one
            queue_now[0] += 3600.0
            sched.queue.flush_unschedulable(max_age=0)
            sched.queue.flush_backoff()
            for _ in range(len(order)):
                if not sched.schedule_one(timeout=0):
                    break
    finally:
        sched.queue.close()
        sched.wait_for_binds()
    pods: dict[str, Any] = {}
    for key in order:
        chosen = binder.bound.get(key)
        out: dict[str, Any] = (
            {"node": chosen} if chosen is not None else {"unschedulable": reasons.get(key, "not attempted")}
        )
        if key in binder.claims and chosen is not None:
            out["claims"] = binder.claims[key]
        if preemptor.nominated.get(key):
            out["nominatedNode"] = preemptor.nominated[key]
            out["victims"] = evictions.victims.get(key, [])
        if key in evictions.preempted_by:
            out["preemptedBy"] = evictions.preempted_by[key]
        pods[key] = out
    return {"pods": pods}


def _pending(raw: dict[str, Any], scheduler_name: str) -> dict[str, Any]:
    """A pending pod addressed to the first profile unless it names a scheduler itself, in `default` unless it
    names a namespace."""
    meta = raw.get("metadata")
    spec = raw.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return raw  # as_pod names what is wrong
    return {
        **raw,
        "metadata": {"namespace": "default", **meta},
        "spec": {"schedulerName": scheduler_name, **spec},
    }
