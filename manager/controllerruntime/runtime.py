"""The controller runtime (like controller-runtime): a named reconcile loop over a rate-limited work
queue, and a ``ControllerManager`` that runs a set of controllers only while this replica leads.

``Controller(name, reconcile, workers=1, metrics=..., list_keys=..., resync_seconds=...)``: ``reconcile``
takes a key and returns ``None`` (done), a float > 0 (process the key again after that many seconds)
or a float <= 0 (requeue with rate limiting); an exception is logged, counted and requeued with the
per-key exponential backoff. Keys may be enqueued at any time, also before ``run``; ``run`` first
enqueues every key of ``list_keys()`` (the initial sync) and again every ``resync_seconds`` when > 0.

``ControllerManager`` runs its controllers in terms (docs/architecture.md#leader-election): a term
starts on ``on_started_leading`` and ends on ``on_stopped_leading``, and any number may follow one
another. Within a term every worker asks ``is_leading()`` (the elector's own clock, via ``gate``)
before each reconcile, so work stops as soon as the lease may have expired, before the callback.
Imports: the standard library, apis.waits, manager.controllerruntime.queue and manager.metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from apis.waits import clamp_seconds
from manager.controllerruntime.queue import RateLimiter, RateLimitingQueue
from manager.metrics import ManagerMetrics

__all__ = ["Controller", "ControllerManager", "Reconcile"]

log = logging.getLogger(__name__)

Reconcile = Callable[[str], float | None]
POLL_SECONDS = 0.2  # how often an idle worker checks its stop event


class Controller:
    """One reconcile loop; ``run(stop)`` blocks until ``stop`` is set (a controller may run again later)."""

    def __init__(
        self,
        name: str,
        reconcile: Reconcile,
        workers: int = 1,
        metrics: ManagerMetrics | None = None,
        *,
        list_keys: Callable[[], Iterable[str]] | None = None,
        resync_seconds: float = 0.0,
        rate_limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self._reconcile = reconcile
        self.workers = workers
        self.metrics = metrics if metrics is not None else ManagerMetrics()
        self._list_keys = list_keys
        self.resync_seconds = resync_seconds
        depth = self.metrics.queue_depth.labels(controller=name)
        self.queue = RateLimitingQueue(rate_limiter, clock=clock, on_depth=depth.set)
        self._running = threading.Lock()

    # -- feeding ---------------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_after(self, key: str, seconds: float) -> None:
        self.queue.add_after(key, clamp_seconds(seconds, f"controller {self.name}: requeue delay"))

    def enqueue_all(self, keys: Iterable[str]) -> None:
        self.queue.add_all(keys)

    def resync(self) -> None:
        """Enqueue every key ``list_keys`` names."""
        if self._list_keys is None:
            return
        try:
            self.enqueue_all(list(self._list_keys()))
        except Exception:
            log.exception("controller %s: listing keys for a resync failed", self.name)

    # -- running ---------------------------------------------------------------------------------------

    def run(self, stop: threading.Event, active: Callable[[], bool] | None = None) -> None:
        """Workers reconcile until ``stop``; while ``active()`` is false they leave keys queued."""
        if not self._running.acquire(blocking=False):
            raise RuntimeError(f"controller {self.name} is already running")
        try:
            log.info("controller %s: starting %d worker(s)", self.name, self.workers)
            self.resync()
            threads = [
                threading.Thread(
                    target=self._worker,
                    args=(stop, active or _always),
                    name=f"{self.name}-worker-{i}",
                    daemon=True,
                )
                for i in range(self.workers)
            ]
            for t in threads:
                t.start()
            period = clamp_seconds(self.resync_seconds, f"controller {self.name}: resync period")
            while not stop.wait(period if period > 0 else None):
                self.resync()
            self.queue.wake()
            for t in threads:
                t.join()
            log.info("controller %s: stopped", self.name)
        finally:
            self._running.release()

    def _worker(self, stop: threading.Event, active: Callable[[], bool]) -> None:
        while not stop.is_set():
            if not active():
                stop.wait(POLL_SECONDS)
                continue
            key = self.queue.get(timeout=POLL_SECONDS)
            if key is None:
                continue
            if stop.is_set() or not active():  # stopped while waiting: leave the key for later
                self.queue.done(key)
                self.queue.add(key)
                continue
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: str) -> str:
        """Reconcile one key and requeue it as the result asks; returns the result label."""
        start = time.perf_counter()
        try:
            after = self._reconcile(key)
        except Exception:
            log.exception("controller %s: reconcile %r failed", self.name, key)
            result = "error"
            self.metrics.queue_retries.labels(controller=self.name).inc()
            self.queue.add_rate_limited(key)
        else:
            if after is None:
                result = "success"
                self.queue.forget(key)
            elif after > 0:
                result = "requeue_after"
                self.queue.forget(key)
                self.queue.add_after(key, clamp_seconds(after, f"controller {self.name}: requeue delay"))
            else:
                result = "requeue"
                self.metrics.queue_retries.labels(controller=self.name).inc()
                self.queue.add_rate_limited(key)
        finally:
            self.metrics.reconcile_duration.labels(controller=self.name).observe(time.perf_counter() - start)
        self.metrics.reconcile_total.labels(controller=self.name, result=result).inc()
        return result


def _always() -> bool:
    return True


class ControllerManager:
    """Starts a set of controllers and stops them; wired to leader election, it runs them only while
    leading: pass ``on_started_leading``/``on_stopped_leading`` to ``kube.leaderelection.LeaderElector``
    and its ``is_leading`` to ``gate`` (the terms' ``stop`` follows the one given to the constructor or
    to ``start``). Terms may follow one another: a controller of a new term starts once its previous
    term's loop has ended."""

    def __init__(
        self,
        controllers: Sequence[Controller] = (),
        *,
        metrics: ManagerMetrics | None = None,
        identity: str = "",
        stop: threading.Event | None = None,
        leading: Callable[[], bool] | None = None,
    ) -> None:
        self.controllers: list[Controller] = list(controllers)
        self.metrics = metrics
        self.identity = identity
        self._parent_stop = stop
        self._leading = leading
        self._stop: threading.Event | None = None
        self._threads: list[threading.Thread] = []
        self._last: dict[int, threading.Thread] = {}  # id(controller) -> its loop in the latest term
        self._live: list[threading.Thread] = []  # every term's threads not known to have ended
        self._lock = threading.Lock()

    def add(self, controller: Controller) -> None:
        with self._lock:
            if self._stop is not None:
                raise RuntimeError("add controllers before starting the manager")
            self.controllers.append(controller)

    def remove(self, controller: Controller) -> None:
        """Leave a controller out (``--controllers=-name``); before starting only."""
        with self._lock:
            if self._stop is not None:
                raise RuntimeError("remove controllers before starting the manager")
            self.controllers = [c for c in self.controllers if c is not controller]

    def gate(self, leading: Callable[[], bool]) -> None:
        """Workers reconcile only while ``leading()`` also holds (``LeaderElector.is_leading``)."""
        self._leading = leading

    @property
    def running(self) -> bool:
        with self._lock:
            return self._stop is not None

    def is_leading(self) -> bool:
        """A term is running and the gate (if any) holds: what every worker checks before a reconcile."""
        with self._lock:
            if self._stop is None or self._stop.is_set():
                return False
        gate = self._leading
        return gate is None or gate()

    def start(self, stop: threading.Event | None = None) -> None:
        """Start a term: every controller on its own thread until ``stop`` is set or ``stop()`` is
        called. Starting a running manager does nothing; it never blocks on the previous term."""
        with self._lock:
            if self._stop is not None:
                return
            parent = stop if stop is not None else self._parent_stop
            self._parent_stop = parent
            inner = threading.Event()
            self._stop = inner
            self._threads = []
            for c in self.controllers:
                t = threading.Thread(
                    target=self._run_term,
                    args=(c, inner, self._last.get(id(c))),
                    name=f"controller-{c.name}",
                    daemon=True,
                )
                self._last[id(c)] = t
                self._threads.append(t)
            if parent is not None:
                watcher = threading.Thread(
                    target=self._follow, args=(parent, inner), name="controllers-stop", daemon=True
                )
                self._threads.append(watcher)
            self._live = [t for t in self._live if t.is_alive()] + self._threads
            for t in self._threads:
                t.start()
        self._set_leader(True)

    def _run_term(self, c: Controller, stop: threading.Event, previous: threading.Thread | None) -> None:
        # The previous term's loop may still finish a reconcile (a slow API call): wait for it, so the
        # controller never runs twice at once.
        while previous is not None and previous.is_alive():
            if stop.is_set():
                return
            previous.join(POLL_SECONDS)
        if not stop.is_set():
            c.run(stop, self.is_leading)

    @staticmethod
    def _follow(parent: threading.Event, inner: threading.Event) -> None:
        while not inner.is_set():
            if parent.wait(POLL_SECONDS):
                inner.set()

    def _end_term(self) -> list[threading.Thread]:
        """Signal the running term to stop (workers stop before their next reconcile); its threads."""
        with self._lock:
            inner, threads = self._stop, self._threads
            self._stop, self._threads = None, []
        if inner is None:
            return []
        inner.set()
        self._set_leader(False)
        return threads

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the controllers and wait (up to ``timeout`` seconds) for their loops to end, those of
        earlier terms still finishing a reconcile too."""
        self._end_term()
        with self._lock:
            threads = list(self._live)
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    # -- leader election hooks ---------------------------------------------------------------------------

    def on_started_leading(self) -> None:
        log.info("controller manager: leading, starting %d controller(s)", len(self.controllers))
        self.start()

    def on_stopped_leading(self) -> None:
        """Ends the term at once, without waiting for in-flight reconciles (this runs on the elector's
        thread); a following ``on_started_leading`` starts a new term whose loops wait for the old."""
        log.info("controller manager: leadership lost, stopping controllers")
        self._end_term()

    def _set_leader(self, leading: bool) -> None:
        if self.metrics is not None:
            self.metrics.set_leader(self.identity, leading)
