"""The host's CPU use as the real node's koordlet measures it: busy ticks of /proc/stat over wall time
(docs/rules/koordlet.md#collectors), read with the koordlet's own parser. The real node's
CPU is the whole host's, so every process on the machine (other test runs included) is the node's
"system" load; e2e tests measure it with ``CpuMeter`` and derive their thresholds from it instead of
assuming an idle machine.

Imports: standard library, agent.system.procfs.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.system.procfs import parse_proc_stat

PROC_STAT = Path("/proc/stat")
TICK_SECONDS = 1.0 / os.sysconf("SC_CLK_TCK")


def host_cpus() -> int:
    """CPUs of the host: the real node's CPU capacity (kubelet reports the online CPUs)."""
    return os.cpu_count() or 1


def _busy_ticks() -> int:
    return parse_proc_stat(PROC_STAT.read_text(), str(PROC_STAT)).total.busy


@dataclass
class CpuMeter:
    """Busy cores of the host between successive ``sample()`` calls (the first call measures from
    construction); every sample is kept with its monotonic end time."""

    samples: list[tuple[float, float]] = field(default_factory=list)
    _last: tuple[float, int] = field(default_factory=lambda: (time.monotonic(), _busy_ticks()))

    def sample(self) -> float:
        now, ticks = time.monotonic(), _busy_ticks()
        then, before = self._last
        self._last = (now, ticks)
        cores = (ticks - before) * TICK_SECONDS / max(now - then, 1e-3)
        self.samples.append((now, cores))
        return cores

    def since(self, t: float) -> list[float]:
        """The samples that ended at or after monotonic time ``t``."""
        return [cores for end, cores in self.samples if end >= t]


def measure(seconds: float, step: float = 1.0) -> list[float]:
    """Busy cores of the host, one sample per ``step`` over ``seconds``."""
    meter = CpuMeter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(step)
        meter.sample()
    return [cores for _, cores in meter.samples]
