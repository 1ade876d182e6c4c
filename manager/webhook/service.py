"""koord-manager's admission webhooks, assembled: ``start_webhooks`` builds the webhook gateway, the
certificate (manager.webhook.certkeeper, or files someone else keeps), the handlers and the HTTPS
server, so manager.main only parses flags and calls it. Every replica runs all of it.

With ``secret`` set, the first round of the certificate keeper runs before the server binds (a
replica that cannot get its certificate fails to start, with the GatewayError saying why), then the
keeper runs every ``keeper_interval`` seconds. With ``secret`` empty, ``cert_dir`` must hold tls.crt
and tls.key already (cert-manager's, for example): they are served as they are, re-read when they
change, and no caBundle is patched. ``stop`` (the manager's) ends the informers and the keeper;
``WebhookService.stop`` then stops the server.
Imports: the standard library, prometheus_client, apis.constants, manager.certs (the PROMOTE_AFTER
default), manager.webhook.{certkeeper,gateway,handlers,server}.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from manager.certs import PROMOTE_AFTER
from manager.webhook.admission import Handler
from manager.webhook.certkeeper import INTERVAL, VALID_DAYS, CertKeeper
from manager.webhook.gateway import WebhookConfigKind, WebhookGateway
from manager.webhook.handlers import HandlerOptions, Reads, default_handlers
from manager.webhook.server import REQUEST_TIMEOUT, WebhookServer

__all__ = ["WebhookService", "service_hosts", "start_webhooks"]

log = logging.getLogger(__name__)

SYNC_TIMEOUT = 30.0
DEFAULT_OPTIONS = HandlerOptions()
HandlersFactory = Callable[[Reads], Mapping[str, Handler]]


def service_hosts(service: str, namespace: str) -> list[str]:
    """The DNS names of Service ``service`` in ``namespace`` that the API server may call."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]  # fmt: skip


@dataclass
class WebhookService:
    """The running webhooks. ``port`` is the bound port; ``ready`` is a readiness check."""

    server: WebhookServer
    gateway: WebhookGateway
    keeper: CertKeeper | None
    cert_dir: Path
    threads: list[threading.Thread] = field(default_factory=list)
    owns_cert_dir: bool = False

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def paths(self) -> list[str]:
        return sorted(self.server.handlers)

    def ready(self) -> tuple[bool, str]:
        """Ready once namespaces and priority classes are listed (a mutation before that would miss
        labels); the certificate loaded before the server started."""
        if not self.gateway.wait_synced(0):
            return False, "webhook informers not synced"
        profiles = (
            "profiles listed" if self.gateway.profiles_synced else "no ClusterColocationProfile CRD yet"
        )
        return True, f"webhooks serve {', '.join(self.paths) or 'nothing'} ({profiles})"

    def stop(self, timeout: float = 5.0) -> None:
        """Stops the server; the informers and the keeper end with the manager's ``stop`` (set it first
        to have them joined here)."""
        self.server.stop()
        for t in self.threads:
            t.join(timeout)
        if self.owns_cert_dir:
            shutil.rmtree(self.cert_dir, ignore_errors=True)


def start_webhooks(
    api: Any,
    *,
    addr: str,
    namespace: str,
    secret: str,
    service_name: str,
    hosts: Sequence[str] = (),
    mutating_config: str = "",
    validating_config: str = "",
    cert_dir: Path | None = None,
    registry: CollectorRegistry,
    stop: threading.Event,
    options: HandlerOptions = DEFAULT_OPTIONS,
    nodes: Callable[[], Iterable[Mapping[str, Any]]] | None = None,
    handlers_factory: HandlersFactory | None = None,
    keeper_interval: float = INTERVAL,
    days: int = VALID_DAYS,
    renew_before: dt.timedelta | None = None,
    promote_after: dt.timedelta = PROMOTE_AFTER,
    clock: Callable[[], dt.datetime] | None = None,
    sync_timeout: float = SYNC_TIMEOUT,
    request_timeout: float = REQUEST_TIMEOUT,
) -> WebhookService:
    """Starts the admission webhooks of this replica (see the module docstring).

    ``api``: a kubernetes ApiClient. ``addr``: the HTTPS listen address (``:9443``; port 0 picks one).
    ``namespace``/``secret``: the certificate Secret (``secret`` empty: serve ``cert_dir``'s files as
    they are). ``service_name``/``hosts``: the certificate's name and the names it carries (default: the
    Service's DNS names). ``mutating_config``/``validating_config``: the webhook configurations whose
    caBundle the keeper keeps (empty: none). ``cert_dir``: where tls.crt, tls.key and ca.crt are
    written (default: a private temporary folder, removed by ``stop``). ``registry``: the server's
    metrics. ``options``: which handlers and their gates; ``nodes``: the Nodes the ConfigMap check
    reads (the controllers' informer, when the manager runs them); ``handlers_factory``: other handlers
    (tests). The keeper's ``keeper_interval``, certificate validity ``days``, ``renew_before``,
    ``promote_after`` and ``clock`` are manager.webhook.certkeeper's. Waits up to ``sync_timeout`` for
    the namespaces and priority classes to be listed (serving anyway after it, with a warning).
    Raises ``GatewayError`` (the Secret), ``OSError``/``ssl.SSLError`` (the files, the port) and
    ``ValueError`` (the address, the paths)."""
    owns = cert_dir is None
    directory = Path(tempfile.mkdtemp(prefix="koord-webhook-")) if cert_dir is None else cert_dir
    gateway = WebhookGateway(api)
    threads: list[threading.Thread] = []
    try:
        keeper: CertKeeper | None = None
        if secret:
            configurations: list[tuple[WebhookConfigKind, str]] = []
            if mutating_config:
                configurations.append(("MutatingWebhookConfiguration", mutating_config))
            if validating_config:
                configurations.append(("ValidatingWebhookConfiguration", validating_config))
            keeper = CertKeeper(
                gateway, name=service_name, hosts=list(hosts) or service_hosts(service_name, namespace),
                secret=secret, namespace=namespace, cert_dir=directory, configurations=configurations,
                days=days, renew_before=renew_before, promote_after=promote_after, interval=keeper_interval,
                clock=clock,
            )  # fmt: skip
            keeper.bootstrap()
        reads = Reads(
            profiles=gateway.profiles, namespace_labels=gateway.namespace_labels,
            priority_classes=gateway.priority_classes, nodes=nodes or list,
        )  # fmt: skip
        handlers = (
            handlers_factory(reads) if handlers_factory is not None else default_handlers(reads, options)
        )
        server = WebhookServer(
            addr, handlers, cert_file=directory / "tls.crt", key_file=directory / "tls.key",
            registry=registry, request_timeout=request_timeout,
        )  # fmt: skip
    except BaseException:
        if owns:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    threads += gateway.start(stop)
    if keeper is not None:
        threads.append(keeper.start(stop))
    if not gateway.wait_synced(sync_timeout):
        log.warning("admission webhooks: namespaces or priority classes not listed after %.0fs; serving "
                    "anyway", sync_timeout)  # fmt: skip
    server.start()
    log.info(
        "admission webhooks: serving %s on port %d", ", ".join(sorted(handlers)) or "nothing", server.port
    )
    return WebhookService(server, gateway, keeper, directory, threads, owns)
