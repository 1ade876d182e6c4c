"""Hosting the arbiter (docs/shards.md#arbiter): the shard that holds the group's leader Lease serves the
ShardBinder. ``ArbiterHost.start(nodes, pods)`` (on starting to lead) builds a fresh Ledger from the
informer's stores, warm for ``warmup`` seconds, serves it and publishes the address on the shard's Lease;
``stop()`` (on stopping to lead, or shutdown) withdraws the address and stops serving. Between the two,
the scheduler's informer handlers forward every node and pod event (``set_node`` … ``remove_pod``);
outside, those calls do nothing.
Imports: grpc (through scheduler.shards.service), apis.kubeobjects, scheduler.shards (ledger, service),
the standard library.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from apis.kubeobjects import Node, Pod
from scheduler.shards.ledger import DEFAULT_TTL, Ledger
from scheduler.shards.service import ShardBinderServer, serve

__all__ = ["DEFAULT_WARMUP", "ArbiterHost"]

log = logging.getLogger(__name__)

# The API bind's own deadline: binds a predecessor accepted have landed (or failed) by then.
DEFAULT_WARMUP: Final = 10.0


class ArbiterHost:
    """``publish(address)`` is ``ShardHeartbeat.publish``. ``listen`` is the address to bind (e.g.
    ``0.0.0.0:10261``), ``advertise`` the host others dial (the pod IP); the published address is
    ``advertise:<bound port>``."""

    def __init__(
        self,
        publish: Callable[[str], None],
        *,
        listen: str,
        advertise: str,
        ttl: float = DEFAULT_TTL,
        warmup: float = DEFAULT_WARMUP,
        security: Callable[[], tuple[Any, Sequence[Any]]] | None = None,
    ) -> None:
        self._publish = publish
        # () → (server credentials or None, interceptors), read at each start: a renewed certificate
        # is served from the next term on (docs/shards.md#security).
        self._security = security
        self.listen, self.advertise = listen, advertise
        self.ttl, self.warmup = ttl, warmup
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        self._server: ShardBinderServer | None = None

    @property
    def ledger(self) -> Ledger | None:
        return self._ledger

    @property
    def address(self) -> str:
        server = self._server
        return f"{self.advertise}:{server.port}" if server is not None else ""

    def start(self, nodes: Iterable[Node], pods: Iterable[Pod]) -> str:
        """Serve a ledger of ``nodes`` and the bound ``pods`` (iterated once, after the ledger starts
        hearing forwarded events); returns the published address."""
        with self._lock:
            if self._server is not None:
                return f"{self.advertise}:{self._server.port}"
            ledger = Ledger(ttl=self.ttl, warmup=self.warmup)
            # Forwarded events reach the new ledger from now on, before ``nodes``/``pods`` are read
            # (they may be lazy: read now), so no change between that read and serving is missed; it
            # refuses binds while warming up, so a half-filled ledger decides nothing.
            self._ledger = ledger
            for n in nodes:
                ledger.set_node(n)
            ledger.sync_pods(pods)
            try:
                credentials, interceptors = self._security() if self._security is not None else (None, ())
                self._server = serve(ledger, self.listen, credentials=credentials, interceptors=interceptors)
            except BaseException:
                self._ledger = None
                raise
            address = f"{self.advertise}:{self._server.port}"
        self._publish(address)
        log.info("shard arbiter serving at %s", address)
        return address

    def stop(self) -> None:
        with self._lock:
            server, self._server, self._ledger = self._server, None, None
        if server is None:
            return
        self._publish("")
        server.stop()
        log.info("shard arbiter stopped")

    # -- informer events, forwarded while serving ------------------------------------------------------

    def set_node(self, node: Node) -> None:
        if (led := self._ledger) is not None:
            led.set_node(node)

    def remove_node(self, name: str) -> None:
        if (led := self._ledger) is not None:
            led.remove_node(name)

    def set_pod(self, pod: Pod) -> None:
        if (led := self._ledger) is not None:
            led.set_pod(pod)

    def remove_pod(self, pod: Pod) -> None:
        if (led := self._ledger) is not None:
            led.remove_pod(pod)
