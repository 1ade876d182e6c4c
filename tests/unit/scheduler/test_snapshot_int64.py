"""A node's summed requests wrap in int64 as kube-scheduler's NodeInfo does (Go's ``+=`` on int64):
pods whose requests each fit int64 but whose sum does not neither crash the snapshot's int64 matrices
nor change what Fit decides (docs/rules/scheduler-basic.md; the scenario
tests/scenarios/schedule/fit-int64-wraps-as-kube.json follows one such pod through the scheduler)."""

from __future__ import annotations

from typing import Any

from apis.gonum import INT64_MAX, INT64_MIN, wrap_int64
from scheduler.framework.snapshot import NodeInfo, PodInfo, Snapshot


def pod(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"nodeName": "a", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
    }


def test_wrap_int64_is_gos_modular_arithmetic() -> None:
    assert wrap_int64(INT64_MAX + 1) == INT64_MIN
    assert wrap_int64(INT64_MIN - 1) == INT64_MAX
    assert wrap_int64(-5) == -5 and wrap_int64(2**64 + 7) == 7


def test_requested_wraps_and_unwraps_exactly() -> None:
    info = NodeInfo.of({"metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}})
    huge = PodInfo.of(pod("huge", "9223372036854774"))
    assert huge.requests["cpu"] == 9223372036854774000  # inside int64 on its own
    info.add_pod(huge, 1)
    for i in range(2):
        info.add_pod(PodInfo.of(pod(f"p{i}", "1")), 2 + i)
    assert info.requested["cpu"] == 9223372036854776000 - 2**64  # wrapped, as Go's NodeInfo holds it
    snap = Snapshot()
    snap.rebuild([info])  # would raise OverflowError copying an unwrapped sum into int64
    assert int(snap.requested[snap.col["cpu"], 0]) == info.requested["cpu"]
    info.remove_pod(huge.key, 5)
    assert info.requested["cpu"] == 2000  # modular arithmetic gives the exact sum back
