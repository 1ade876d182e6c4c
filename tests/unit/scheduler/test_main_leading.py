"""scheduler.main's LeaderGatedBinder: binds only while leading, else fails the bind (the pod goes back
to the queue) without calling the API binder."""

from __future__ import annotations

from scheduler.framework.interfaces import Pod
from scheduler.framework.status import Status
from scheduler.main import LeaderGatedBinder


class Recording:
    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []

    def bind(self, pod: Pod, node: str) -> Status:
        self.bound.append((pod["metadata"]["name"], node))
        return Status.success()


def test_binds_only_while_leading() -> None:
    inner = Recording()
    leading = [True]
    binder = LeaderGatedBinder(inner, lambda: leading[0])
    pod: Pod = {"metadata": {"name": "p", "namespace": "ns"}}
    assert binder.bind(pod, "n1").is_success()
    leading[0] = False
    st = binder.bind(pod, "n2")
    assert not st.is_success() and "not leading" in st.message() and st.plugin == "DefaultBinder"
    assert inner.bound == [("p", "n1")]
