"""Whether this koord-manager replica leads, for everything leader-only in it: the SLO controllers,
the embedded scheduler, the hub Endpoints writer (docs/architecture.md#leader-election).

``Leadership`` is wired to a ``kube.leaderelection.LeaderElector`` (its callbacks, and its
``is_leading`` as the clock check), or told to lead for good without leader election. ``is_leading()``
holds between the started and stopped callbacks and only while the elector's own clock says the lease
cannot have expired, so leader-only writers that ask it before each write stop on time even when
the callback comes late. Terms may follow one another: hooks run on every start and stop.

Imports: the standard library only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Leadership"]

log = logging.getLogger(__name__)

Hook = Callable[[], None]


def _always() -> bool:
    return True


class Leadership:
    """``started_leading``/``stopped_leading`` are the elector's callbacks; ``on_start``/``on_stop``
    add hooks they run (quick ones: they run on the elector's thread)."""

    def __init__(self, identity: str, stop: threading.Event | None = None) -> None:
        self.identity = identity
        self._stop = stop
        self._leading = threading.Event()
        self._lease_holds: Callable[[], bool] = _always
        self._on_start: list[Hook] = []
        self._on_stop: list[Hook] = []

    def follow(self, lease_holds: Callable[[], bool]) -> None:
        """Also require ``lease_holds()`` (``LeaderElector.is_leading``) for ``is_leading``."""
        self._lease_holds = lease_holds

    def on_start(self, hook: Hook) -> None:
        self._on_start.append(hook)

    def on_stop(self, hook: Hook) -> None:
        self._on_stop.append(hook)

    def is_leading(self) -> bool:
        """Cheap: ask it before every leader-only write."""
        return self._leading.is_set() and self._lease_holds()

    def started_leading(self) -> None:
        self._leading.set()
        self._run(self._on_start)
        log.info("leading as %s", self.identity)

    def stopped_leading(self) -> None:
        self._leading.clear()
        self._run(self._on_stop)
        if self._stop is None or not self._stop.is_set():
            log.warning("%s lost the lease: leader work stopped, standing by to lead again", self.identity)

    @staticmethod
    def _run(hooks: list[Hook]) -> None:
        for hook in hooks:
            try:
                hook()
            except Exception:
                log.exception("leadership hook %r failed", hook)
