"""The differential harness's records without an API server (docs/testing.md#the-kube-scheduler-oracle):
a kube copy seen bound only after its preempting first attempt failed is read as that attempt."""

from __future__ import annotations

from typing import Any

from tests.differential.records import Decision

FAILED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}


def _bound(status: dict[str, Any]) -> Decision:
    return Decision("n1", None, {"spec": {"nodeName": "n1"}, "status": status})


def test_a_preemptor_bound_before_its_failure_was_seen_is_read_as_the_failed_attempt() -> None:
    d = _bound({"nominatedNodeName": "n1", "conditions": [FAILED]})
    assert d.reread_as_retry()
    assert (d.node, d.message, d.nominated, d.final, d.placed) == (None, "0/3 nodes", "n1", "n1", "n1")


def test_once_binding_turned_its_condition_true_the_message_is_left_to_kubes_log() -> None:
    d = _bound({"nominatedNodeName": "n1", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    assert d.reread_as_retry()
    assert (d.node, d.message, d.nominated, d.final) == (None, None, "n1", "n1")


def test_other_bound_pods_stay_as_they_were() -> None:
    for status in ({}, {"conditions": [FAILED]}):
        d = _bound(status)
        assert not d.reread_as_retry()
        assert (d.node, d.message, d.nominated, d.final) == ("n1", None, None, None)
    unbound = Decision(None, "0/3 nodes", {"status": {"nominatedNodeName": "n1", "conditions": [FAILED]}})
    assert not unbound.reread_as_retry() and unbound.final is None
