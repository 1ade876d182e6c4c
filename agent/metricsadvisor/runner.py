"""CollectorRunner: one thread ticking every enabled collector at its own interval, appending each
collector's samples to the MetricCache as one batch, isolating a failing collector (logged, counted,
the others continue), with ``wait_started`` (docs/rules/koordlet.md#start-order-and-readiness: every enabled
collector completed one successful round), ``stop`` and an ``on_collect(name, seconds, ok)`` callback after
each round.

Imports: standard library, apis.waits, agent.metriccache.cache, agent.metricsadvisor.framework.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from agent.metriccache.cache import MetricCache
from agent.metricsadvisor.framework import CollectContext, Collector
from apis.waits import clamp_seconds

__all__ = ["CollectorRunner", "OnCollect", "OnRound"]

log = logging.getLogger(__name__)

OnCollect = Callable[[str, float, bool], None]
OnRound = Callable[[Sequence[str]], object]
"""``listener(names)`` after a tick that ran the collectors ``names``."""


class CollectorRunner:
    def __init__(
        self,
        collectors: Sequence[Collector],
        ctx: CollectContext,
        cache: MetricCache,
        *,
        on_collect: OnCollect | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        names = [c.name for c in collectors]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate collector names in {names}")
        self._all = list(collectors)
        self._ctx = ctx
        self._cache = cache
        self._on_collect = on_collect
        self._monotonic = monotonic
        self._enabled: list[Collector] | None = None
        self._failures: dict[str, int] = dict.fromkeys(names, 0)
        self._rounds: dict[str, int] = dict.fromkeys(names, 0)
        self._next_due: dict[str, float] = {}
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ introspection

    @property
    def context(self) -> CollectContext:
        return self._ctx

    @property
    def enabled_collectors(self) -> list[str]:
        return [c.name for c in self._probe()]

    @property
    def failures(self) -> Mapping[str, int]:
        """Failed rounds per collector."""
        return dict(self._failures)

    @property
    def rounds(self) -> Mapping[str, int]:
        """Rounds run (successful or not) per collector."""
        return dict(self._rounds)

    # ------------------------------------------------------------ ticking

    def _probe(self) -> list[Collector]:
        if self._enabled is None:
            enabled: list[Collector] = []
            for c in self._all:
                try:
                    ok = c.enabled(self._ctx)
                except Exception:
                    log.exception("collector %s: enabled() failed; disabled", c.name)
                    ok = False
                if ok:
                    enabled.append(c)
                else:
                    log.info("collector %s disabled on this host", c.name)
            self._enabled = enabled
        return self._enabled

    def run_collector(self, collector: Collector) -> bool:
        """One round of ``collector``: collect, append the batch; failures are logged and counted."""
        t0 = time.perf_counter()
        ok = True
        try:
            samples = collector.collect(self._ctx)
            if samples:
                self._cache.append(samples)
        except Exception as exc:
            ok = False
            self._failures[collector.name] += 1
            if self._failures[collector.name] == 1:
                log.exception("collector %s failed", collector.name)
            else:
                log.debug("collector %s failed again: %s", collector.name, exc)
        self._rounds[collector.name] += 1
        if self._on_collect is not None:
            try:
                self._on_collect(collector.name, time.perf_counter() - t0, ok)
            except Exception:
                log.exception("on_collect callback failed")
        self._check_started()
        return ok

    def tick(self, now: float | None = None) -> list[str]:
        """Run every enabled collector that is due at ``now`` (monotonic seconds); returns their names."""
        now = self._monotonic() if now is None else now
        ran: list[str] = []
        for c in self._probe():
            due = self._next_due.get(c.name, now)
            if due > now:
                continue
            self.run_collector(c)
            ran.append(c.name)
            nxt = due + c.interval_seconds
            self._next_due[c.name] = nxt if nxt > now else now + c.interval_seconds
        if ran:
            self._round_done(ran)
        return ran

    # ------------------------------ round listeners (docs/rules/koordlet.md#strategies-tick-on-fresh-samples)

    _round_listeners: tuple[OnRound, ...] = ()

    def add_round_listener(self, listener: OnRound) -> None:
        """Call ``listener(names)`` after every ``tick`` that ran collectors (their samples are in the cache),
        e.g. ``QoSManager.kick`` so the strategies decide on fresh data. Failures are logged."""
        self._round_listeners = (*self._round_listeners, listener)

    def _round_done(self, ran: Sequence[str]) -> None:
        for listener in self._round_listeners:
            try:
                listener(ran)
            except Exception:
                log.exception("round listener failed")

    def _check_started(self) -> None:
        if not self._started.is_set() and all(c.started for c in self._probe()):
            self._started.set()

    def not_started(self) -> list[str]:
        """Names of the enabled collectors that have not completed a successful round yet."""
        return [c.name for c in self._probe() if not c.started]

    def run(self, stop: threading.Event | None = None) -> None:
        """Tick in the calling thread until ``stop`` (or ``self.stop()``) is set."""
        self._probe()
        self._check_started()
        while not self._stop.is_set() and (stop is None or not stop.is_set()):
            self.tick()
            due = min(self._next_due.values()) if self._next_due else self._monotonic() + 1.0
            wait = clamp_seconds(due - self._monotonic(), "collector wait (--collect-res-used-interval)")
            if stop is not None:
                wait = min(wait, 0.5)  # notice the external stop event promptly
            if self._stop.wait(wait):
                break

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Run ``run()`` in a daemon thread of its own."""
        if self._thread is not None:
            raise RuntimeError("runner already started")
        self._thread = threading.Thread(target=self.run, name="metricsadvisor", daemon=True)
        self._thread.start()

    def wait_started(self, timeout: float | None = None) -> bool:
        """True once every enabled collector has completed one successful round (False on timeout)."""
        return self._started.wait(timeout)

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        for c in self._all:
            close = getattr(c, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("collector %s: close failed", c.name)
