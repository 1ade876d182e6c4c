"""A koord-scheduler (SchedulerService) running in a thread of the test, against a real API server: started
(informers listed) on creation, its scheduling loop in a daemon thread, and stopped with bounds on close.

Imports: standard library, prometheus_client, scheduler (config, registry, service).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry

from scheduler.config import Profile, SchedulerConfig
from scheduler.registry import default_profile
from scheduler.service import SchedulerService

__all__ = ["RunningScheduler", "running_scheduler"]


class RunningScheduler:
    """``service`` scheduling in ``thread`` until ``close()``."""

    def __init__(
        self,
        api: Any,
        config: SchedulerConfig | Profile | None = None,
        *,
        bind_workers: int = 4,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.stop = threading.Event()
        kwargs: dict[str, Any] = {"bind_workers": bind_workers}
        if registry is not None:
            kwargs["registry"] = registry
        self.service = SchedulerService(api, config or default_profile(), **kwargs)
        self.thread = threading.Thread(target=self.service.run, args=(self.stop,), daemon=True)
        self.service.start(self.stop)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.service.close()


@contextlib.contextmanager
def running_scheduler(
    api: Any,
    config: SchedulerConfig | Profile | None = None,
    *,
    bind_workers: int = 4,
    registry: CollectorRegistry | None = None,
) -> Iterator[SchedulerService]:
    """The service of a RunningScheduler, closed when the block ends."""
    run = RunningScheduler(api, config, bind_workers=bind_workers, registry=registry)
    try:
        yield run.service
    finally:
        run.close()
