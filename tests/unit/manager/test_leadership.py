"""manager.leadership: leading between the elector's callbacks and only while its clock check holds;
hooks run on every term's start and stop, a failing hook does not stop the others."""

from __future__ import annotations

import threading

import pytest

from manager.leadership import Leadership


def test_leading_follows_the_callbacks_and_the_lease_check(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[str] = []
    lease_holds = [True]
    ld = Leadership("me", threading.Event())
    ld.follow(lambda: lease_holds[0])
    ld.on_start(lambda: calls.append("start"))
    ld.on_stop(lambda: calls.append("stop"))

    def broken() -> None:
        raise RuntimeError("hook failed")

    ld.on_start(broken)
    ld.on_start(lambda: calls.append("start2"))
    assert not ld.is_leading()
    for _ in range(2):  # term after term
        ld.started_leading()
        assert ld.is_leading()
        lease_holds[0] = False  # the elector's own clock: the lease may have expired
        assert not ld.is_leading()
        lease_holds[0] = True
        ld.stopped_leading()
        assert not ld.is_leading()
    assert calls == ["start", "start2", "stop"] * 2
    assert "hook failed" in caplog.text and "lost the lease" in caplog.text
