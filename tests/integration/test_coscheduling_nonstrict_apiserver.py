"""A gang short of room (3 one-CPU members, one 2-CPU node) in koord-scheduler against the real API
server (docs/rules/scheduler-coscheduling.md#queue-ordering, docs/rules/scheduler-coscheduling.md#wiring):
every member is attempted in the round, none binds and none stays held. NonStrict: the member that does
not fit reports its FitError and the two held at Permit are let go once NextPod finds no member left
(`all pending pods is already been attempted`), not at the gang's 10-minute wait. Strict: the held two
are rejected with the group's failure message as soon as the third fails."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from apis.podgroup import ANNOTATION_GANG_MODE
from scheduler.config import parse_config
from scheduler.main import SchedulerService
from scheduler.plugins.coscheduling.decisions import REASON_ALL_PENDING_ATTEMPTED
from scheduler.registry import KNOWN
from tests.helpers.scheduler import RunningScheduler
from tests.integration.podhelpers import wait_for

pytestmark = pytest.mark.apiserver

GROUP, VERSION, PLURAL = "scheduling.sigs.k8s.io", "v1alpha1", "podgroups"
POINTS = ("preEnqueue", "preFilter", "postFilter", "reserve", "permit", "preBind", "postBind")
FIT_ERROR = "0/1 nodes are available: 1 Insufficient cpu."


def _config() -> Any:
    plugins = {point: {"enabled": [{"name": "Coscheduling"}]} for point in POINTS}
    return parse_config(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "koord-scheduler", "plugins": plugins}],
        },
        KNOWN,
    )


class Gang:
    """One 2-CPU node of its own and a 3-member gang `held` of 1-CPU pods selecting it."""

    def __init__(self, kube: Any, ns: str) -> None:
        self.core: Any = client.CoreV1Api(kube)
        self.custom: Any = client.CustomObjectsApi(kube)
        self.ns, tag = ns, uuid.uuid4().hex[:6]
        self.node, self.tag = f"gang-ns-{tag}", tag
        self.core.create_node({
            "metadata": {"name": self.node, "labels": {"koord-gang": tag}},
            "status": {"allocatable": {"cpu": "2", "memory": "64Gi", "pods": "110"},
                       "capacity": {"cpu": "2", "memory": "64Gi", "pods": "110"}},
        })  # fmt: skip
        self.core.patch_node(self.node, {"spec": {"taints": None}})  # no node lifecycle controller here
        self.names = [f"held-{i}" for i in range(3)]

    def create(self, mode: str) -> None:
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup",
            "metadata": {"name": "held", "annotations": {ANNOTATION_GANG_MODE: mode}},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 600},
        })  # fmt: skip
        for name in self.names:
            self.core.create_namespaced_pod(self.ns, {
                "metadata": {"name": name, "labels": {"pod-group.scheduling.sigs.k8s.io": "held"}},
                "spec": {"schedulerName": "koord-scheduler", "nodeSelector": {"koord-gang": self.tag},
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]},
            })  # fmt: skip

    def outcome(self) -> dict[str, tuple[str | None, str]]:
        """Per pod: its node and its PodScheduled=False message ("" when it has none)."""
        out: dict[str, tuple[str | None, str]] = {}
        for p in self.core.list_namespaced_pod(self.ns).items:
            if p.metadata.name in self.names:
                failed = [c.message or "" for c in p.status.conditions or []
                          if c.type == "PodScheduled" and c.status == "False"]  # fmt: skip
                out[p.metadata.name] = (p.spec.node_name, failed[0] if failed else "")
        return out


@pytest.fixture()
def started(kube: Any, namespace: str) -> Iterator[tuple[Gang, SchedulerService]]:
    gang = Gang(kube, namespace)
    run = RunningScheduler(kube, _config())
    try:
        yield gang, run.service
    finally:
        run.close()
        gang.core.delete_node(gang.node)


def _holds_nothing(service: SchedulerService) -> bool:
    s = service.scheduler
    with s.lock:
        return not s.waiting and not s.cache._assumed


def _settles(gang: Gang, messages: Callable[[list[str]], bool]) -> bool:
    """True once no pod is bound and the three PodScheduled=False messages satisfy `messages`."""
    out = gang.outcome()
    return (
        len(out) == 3
        and all(node is None for node, _ in out.values())
        and messages(sorted(message for _, message in out.values()))
    )


def test_nonstrict_attempts_every_member_and_lets_the_held_ones_go(
    started: tuple[Gang, SchedulerService],
) -> None:
    gang, service = started
    gang.create("NonStrict")
    expected = sorted([FIT_ERROR, REASON_ALL_PENDING_ATTEMPTED, REASON_ALL_PENDING_ATTEMPTED])
    assert wait_for(lambda: _settles(gang, lambda m: m == expected), timeout=10), gang.outcome()
    assert wait_for(lambda: _holds_nothing(service), timeout=5)  # not held for the gang's 600 s


def test_strict_rejects_the_held_members_with_the_groups_failure(
    started: tuple[Gang, SchedulerService],
) -> None:
    gang, service = started
    gang.create("Strict")
    prefix = f'GangGroup "{gang.ns}/held" gets rejected due to member Pod "{gang.ns}/held-'
    suffix = f'" is unschedulable with reason "{FIT_ERROR}", alreadyWaitForBound: 2'

    def strict(messages: list[str]) -> bool:
        rejected = [m for m in messages if m != FIT_ERROR]
        return (
            messages.count(FIT_ERROR) == 1
            and len(rejected) == 2
            and all(m.startswith(prefix) and m.endswith(suffix) for m in rejected)
        )

    assert wait_for(lambda: _settles(gang, strict), timeout=10), gang.outcome()
    assert wait_for(lambda: _holds_nothing(service), timeout=5)
