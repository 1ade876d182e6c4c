"""The webhooks' certificate keeper, run by every replica: keeps the certificate Secret filled and
renewed, the serving files equal to it, and the caBundle of the webhook configurations equal to its CA
bundle (docs/architecture.md#admission-webhook-certificates).

A round (``sync``; ``run`` repeats it every ``interval`` seconds on an injected clock): read the Secret
(create it with a fresh pair when it does not exist: the first replica wins, the others read its pair);
ask manager.certs.plan_rotation what to change (a fresh pair for an empty or broken Secret, a renewal
staged, a staged pair promoted, expired CAs dropped) and write it with an update guarded by the
resourceVersion — on a conflict re-read and plan again on what the winner stored, so replicas agree
on one CA; write tls.crt, tls.key and ca.crt into ``cert_dir`` when they differ (the server re-reads
them, manager.webhook.server.CertFiles); and patch the caBundle of every webhook of the named
configurations that differs from ca.crt (a missing configuration is logged and tried again next
round). A failed round is logged and retried after ``retry_interval``; the first round
(``bootstrap``) raises, so a replica that cannot get a certificate does not start serving.
Imports: the standard library, manager.certs, manager.kubeapi (GatewayError), manager.webhook.gateway.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from manager.certs import (
    CA_CRT,
    PROMOTE_AFTER,
    TLS_CRT,
    TLS_KEY,
    ServingCert,
    decode_data,
    encode_data,
    missing_hosts,
    new_serving_cert,
    plan_rotation,
    secret_body,
    write_file,
)
from manager.kubeapi import GatewayError
from manager.webhook.gateway import WebhookConfigKind

__all__ = ["CertKeeper", "ca_bundle_patch"]

log = logging.getLogger(__name__)

VALID_DAYS = 365
INTERVAL = 60.0
RETRY_INTERVAL = 10.0
CONFLICT_ATTEMPTS = 5


class KeeperGateway(Protocol):
    """What the keeper needs of manager.webhook.gateway.WebhookGateway."""

    def create_or_read_secret(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def update_secret(self, secret: Mapping[str, Any]) -> dict[str, Any]: ...
    def read_webhook_configuration(self, kind: WebhookConfigKind, name: str) -> dict[str, Any] | None: ...
    def patch_webhook_configuration(
        self, kind: WebhookConfigKind, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]: ...


def ca_bundle_patch(configuration: Mapping[str, Any], bundle: bytes) -> list[dict[str, Any]]:
    """JSON patch operations setting the caBundle of every webhook of ``configuration`` that differs
    from ``bundle``; each guarded by a ``test`` of the webhook's name at its index (empty: all equal)."""
    encoded = base64.b64encode(bundle).decode()
    ops: list[dict[str, Any]] = []
    for i, webhook in enumerate(configuration.get("webhooks") or []):
        if (webhook.get("clientConfig") or {}).get("caBundle") == encoded:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": webhook.get("name")})
        ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded})
    return ops


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class CertKeeper:
    """Keeps the webhooks' certificate (see the module docstring). ``configurations`` are the
    (kind, name) of the webhook configurations whose caBundle it keeps."""

    def __init__(
        self,
        gateway: KeeperGateway,
        *,
        name: str,
        hosts: Sequence[str],
        secret: str,
        namespace: str,
        cert_dir: Path,
        configurations: Sequence[tuple[WebhookConfigKind, str]] = (),
        days: int = VALID_DAYS,
        renew_before: dt.timedelta | None = None,
        promote_after: dt.timedelta = PROMOTE_AFTER,
        interval: float = INTERVAL,
        retry_interval: float = RETRY_INTERVAL,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        if not hosts:
            raise ValueError("the webhooks' certificate needs at least one host name")
        self.gateway = gateway
        self.name, self.hosts = name, list(hosts)
        self.secret, self.namespace = secret, namespace
        self.cert_file, self.key_file, self.ca_file = (cert_dir / n for n in (TLS_CRT, TLS_KEY, CA_CRT))
        self.configurations = list(configurations)
        self.days, self.renew_before, self.promote_after = days, renew_before, promote_after
        self.interval, self.retry_interval = interval, retry_interval
        self.clock = clock if clock is not None else _utcnow
        self.current: ServingCert | None = None
        self.rounds = 0
        self.last_error: str = ""
        self._warned: set[str] = set()

    def _fresh(self) -> ServingCert:
        return new_serving_cert(self.name, self.hosts, days=self.days, now=self.clock())

    # -- one round ---------------------------------------------------------------------------------------

    def bootstrap(self) -> ServingCert:
        """The first round: raises when the Secret cannot be read, filled or written to the files (a
        caBundle that cannot be patched is only logged)."""
        return self.sync()

    def sync(self) -> ServingCert:
        self.last_error = ""
        stored = self._secret()
        data = decode_data(stored)
        cert = ServingCert(data.get(CA_CRT, b""), data.get(TLS_CRT, b""), data.get(TLS_KEY, b""))
        self._write_files(cert)
        self._warn_hosts(cert)
        for kind, name in self.configurations:
            try:
                self._patch_bundle(kind, name, cert.ca)
            except GatewayError as e:  # not fatal: the next round tries again
                log.warning("webhook certificates: %s", e)
                self.last_error = str(e)
        self.current = cert
        self.rounds += 1
        return cert

    def _secret(self) -> dict[str, Any]:
        """The Secret after any planned change is written (re-planned on what a faster replica wrote)."""
        stored = self.gateway.read_secret(self.namespace, self.secret)
        if stored is None:
            offered = secret_body(self._fresh(), self.secret, self.namespace)
            stored = self.gateway.create_or_read_secret(offered)
        for _ in range(CONFLICT_ATTEMPTS):
            plan = plan_rotation(
                decode_data(stored), self.clock(), self._fresh,
                renew_before=self.renew_before, promote_after=self.promote_after,
            )  # fmt: skip
            if plan is None:
                return stored
            updated = {**stored, "data": encode_data(plan.data)}
            try:
                stored = self.gateway.update_secret(updated)
                log.info("webhook certificates: Secret %s/%s: %s", self.namespace, self.secret, plan.reason)
                continue  # plan again: a round can both promote and drop expired CAs
            except GatewayError as e:
                if not (e.conflict or e.not_found):
                    raise
                log.info("webhook certificates: Secret %s/%s changed meanwhile; re-reading", self.namespace,
                         self.secret)  # fmt: skip
            again = self.gateway.read_secret(self.namespace, self.secret)
            if again is None:
                again = self.gateway.create_or_read_secret(
                    secret_body(self._fresh(), self.secret, self.namespace)
                )
            stored = again
        raise RuntimeError(
            f"Secret {self.namespace}/{self.secret}: still changing after {CONFLICT_ATTEMPTS} tries"
        )

    def _write_files(self, cert: ServingCert) -> None:
        for path, data, mode in ((self.key_file, cert.key, 0o600), (self.cert_file, cert.cert, 0o644),
                                 (self.ca_file, cert.ca, 0o644)):  # fmt: skip
            try:
                if path.read_bytes() == data:
                    continue
            except OSError:
                pass
            write_file(path, data, mode)

    def _warn_hosts(self, cert: ServingCert) -> None:
        missing = missing_hosts(cert, self.hosts)
        key = ",".join(missing)
        if missing and key not in self._warned:
            self._warned.add(key)
            log.warning("webhook certificates: Secret %s/%s: its certificate does not name %s (renewed "
                        "certificates will; delete the Secret to renew now)", self.namespace, self.secret,
                        missing)  # fmt: skip

    def _patch_bundle(self, kind: WebhookConfigKind, name: str, bundle: bytes) -> None:
        configuration = self.gateway.read_webhook_configuration(kind, name)
        if configuration is None:
            if f"{kind}/{name}" not in self._warned:
                self._warned.add(f"{kind}/{name}")
                log.warning("webhook certificates: %s %s does not exist (yet); its caBundle is set once it "
                            "does", kind, name)  # fmt: skip
            return
        self._warned.discard(f"{kind}/{name}")
        ops = ca_bundle_patch(configuration, bundle)
        if ops:
            self.gateway.patch_webhook_configuration(kind, name, ops)
            log.info("webhook certificates: %s %s: caBundle set on %d webhook(s)", kind, name,
                     sum(op["op"] == "test" for op in ops))  # fmt: skip

    # -- the loop ----------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """A round every ``interval`` seconds (``retry_interval`` after a failed one) until ``stop``."""
        delay = self.interval
        while not stop.wait(delay):
            try:
                self.sync()
                delay = self.interval
            except Exception as e:
                log.warning(
                    "webhook certificates: round failed: %s; retrying in %.0fs", e, self.retry_interval
                )
                self.last_error = str(e)
                delay = self.retry_interval

    def start(self, stop: threading.Event) -> threading.Thread:
        t = threading.Thread(target=self.run, args=(stop,), name="webhook-certkeeper", daemon=True)
        t.start()
        return t
