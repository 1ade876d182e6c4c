"""Serving certificates without cert-manager: a self-signed CA and a serving certificate it signs for
the given host names, kept in a Kubernetes Secret and written to the files a TLS server loads.

`bootstrap` offers a fresh pair to `create_or_read` (the manager's gateway: create the Secret unless
it exists, return what is stored), so the first replica to start wins and the others read its pair
back; every replica then serves the same certificate and clients trust the one CA. The Secret is of
type kubernetes.io/tls with the keys tls.crt, tls.key and ca.crt; clients mount ca.crt. The CA's
private key is never stored: it signs the one serving certificate and is dropped, so the Secret
cannot mint other certificates. Names, hosts and the Secret are parameters: the hub (manager.main,
--hub-tls-secret) and the admission webhooks (manager.webhook.certkeeper) use it the same way.

Rotation. The hub's: delete the Secret and restart the replicas, then the clients (they read the CA
when they start). The webhooks' is planned here (``plan_rotation``, pure) and carried out by
manager.webhook.certkeeper, in two steps so that no client ever meets a certificate it does not
trust (docs/architecture.md#admission-webhook-certificates): when the serving certificate has less
than ``renew_before`` left (a third of its lifetime by default), a new CA and certificate are
*staged* (kept in next.crt / next.key, the new CA added to the ca.crt bundle, which the API server
is given as caBundle); ``promote_after`` later the staged pair becomes tls.crt / tls.key. ca.crt
keeps every CA that has not expired, so servers still serving the previous certificate and clients
holding the previous bundle both keep working.

Imports: standard library, cryptography.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "Plan",
    "ServingCert",
    "bootstrap",
    "decode_data",
    "encode_data",
    "from_secret",
    "missing_hosts",
    "new_serving_cert",
    "plan_rotation",
    "secret_body",
    "write_file",
]

log = logging.getLogger(__name__)

CA_CRT, TLS_CRT, TLS_KEY = "ca.crt", "tls.crt", "tls.key"
NEXT_CRT, NEXT_KEY = "next.crt", "next.key"  # a staged pair (see Rotation in the module docstring)
VALID_DAYS = 3650
PROMOTE_AFTER = dt.timedelta(minutes=10)  # from the staged certificate's notBefore (5 min backdated)
RENEW_WARNING = dt.timedelta(days=30)
CreateOrRead = Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class ServingCert:
    """PEM bytes: the CA certificate, the serving certificate and its (unencrypted PKCS#8) key."""

    ca: bytes
    cert: bytes
    key: bytes


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def new_serving_cert(
    name: str, hosts: Sequence[str], *, days: int = VALID_DAYS, now: dt.datetime | None = None
) -> ServingCert:
    """A new CA ("<name> CA") and a serving certificate it signs for `hosts` (DNS names or IP
    addresses), both valid for `days` from `now`."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host name")
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)  # clock skew between nodes
    end = start + dt.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingCert(
        ca=ca.public_bytes(pem),
        cert=cert.public_bytes(pem),
        key=key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )


def secret_body(cert: ServingCert, name: str, namespace: str) -> dict[str, Any]:
    """The kubernetes.io/tls Secret holding `cert`."""
    data = {CA_CRT: cert.ca, TLS_CRT: cert.cert, TLS_KEY: cert.key}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def from_secret(secret: Mapping[str, Any]) -> ServingCert:
    """The certificate a Secret made by secret_body holds (ValueError when a key is missing)."""
    data = secret.get("data") or {}
    missing = [k for k in (CA_CRT, TLS_CRT, TLS_KEY) if not data.get(k)]
    if missing:
        name = (secret.get("metadata") or {}).get("name", "?")
        raise ValueError(f"Secret {name} lacks {', '.join(missing)}")
    return ServingCert(*(base64.b64decode(data[k]) for k in (CA_CRT, TLS_CRT, TLS_KEY)))


def missing_hosts(cert: ServingCert, hosts: Sequence[str]) -> list[str]:
    """The hosts the serving certificate does not name."""
    san = x509.load_pem_x509_certificate(cert.cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    named = set(san.value.get_values_for_type(x509.DNSName))
    named |= {str(ip) for ip in san.value.get_values_for_type(x509.IPAddress)}
    return [h for h in hosts if str(_san(h).value) not in named]


def write_file(path: Path, data: bytes, mode: int) -> None:
    """Replaces `path` atomically (a server never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def bootstrap(
    create_or_read: CreateOrRead,
    *,
    name: str,
    hosts: Sequence[str],
    secret: str,
    namespace: str,
    cert_file: Path,
    key_file: Path,
    ca_file: Path | None = None,
    now: dt.datetime | None = None,
) -> ServingCert:
    """Makes sure Secret `namespace/secret` holds a serving certificate (see the module docstring),
    writes its certificate, key (mode 0600) and CA to the files, and returns it. A stored certificate
    that misses some of `hosts` or expires within 30 days is still used, with a warning."""
    offered = secret_body(new_serving_cert(name, hosts, now=now), secret, namespace)
    stored = from_secret(create_or_read(offered))
    missing = missing_hosts(stored, hosts)
    if missing:
        log.warning(
            "Secret %s/%s: its certificate does not name %s (delete it to renew)", namespace, secret, missing
        )
    expires = x509.load_pem_x509_certificate(stored.cert).not_valid_after_utc
    if expires - (now or dt.datetime.now(dt.UTC)) < RENEW_WARNING:
        log.warning(
            "Secret %s/%s: its certificate expires %s (delete it to renew)", namespace, secret, expires
        )
    write_file(cert_file, stored.cert, 0o644)
    write_file(key_file, stored.key, 0o600)
    if ca_file is not None:
        write_file(ca_file, stored.ca, 0o644)
    return stored


# -- rotation (pure: the decisions; manager.webhook.certkeeper reads and writes) ---------------------------


def decode_data(secret: Mapping[str, Any] | None) -> dict[str, bytes]:
    """A Secret's ``data`` as bytes (an undecodable value reads as empty)."""
    out: dict[str, bytes] = {}
    for k, v in ((secret or {}).get("data") or {}).items():
        try:
            out[str(k)] = base64.b64decode(v or b"", validate=True)
        except (ValueError, TypeError):
            out[str(k)] = b""
    return out


def encode_data(data: Mapping[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items()}


@dataclass(frozen=True)
class Plan:
    """The Secret data to write (every key: the managed ones and any other kept as it was), and why."""

    data: dict[str, bytes]
    reason: str


def _certs(bundle: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return []


def _pair(cert_pem: bytes | None, key_pem: bytes | None) -> x509.Certificate | None:
    """The certificate when ``key_pem`` is its private key, else None."""
    if not cert_pem or not key_pem:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    pub = serialization.PublicFormat.SubjectPublicKeyInfo
    der = serialization.Encoding.DER
    return (
        cert if key.public_key().public_bytes(der, pub) == cert.public_key().public_bytes(der, pub) else None
    )


def _issuer(cert: x509.Certificate, cas: Sequence[x509.Certificate]) -> x509.Certificate | None:
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
            return ca
        except (ValueError, TypeError, InvalidSignature):
            continue
    return None


def _bundle(first: x509.Certificate | None, cas: Sequence[x509.Certificate], now: dt.datetime) -> bytes:
    """``first`` then the other unexpired CAs, each once, as PEM."""
    kept: list[x509.Certificate] = [first] if first is not None else []
    for ca in cas:
        if ca.not_valid_after_utc > now and all(ca != k for k in kept):
            kept.append(ca)
    return b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in kept)


def plan_rotation(
    data: Mapping[str, bytes],
    now: dt.datetime,
    fresh: Callable[[], ServingCert],
    *,
    renew_before: dt.timedelta | None = None,
    promote_after: dt.timedelta = PROMOTE_AFTER,
) -> Plan | None:
    """What to write into the certificate Secret whose decoded ``data`` this is, at ``now``; None when
    nothing (see Rotation in the module docstring). ``fresh`` makes a new CA and certificate; it is
    called only when one is needed. In order: no usable pair (missing, unparsable, key not the
    certificate's, or expired with nothing staged) → a fresh pair; a staged pair whose CA is not in
    ca.crt or that does not load → dropped; a staged pair valid for ``promote_after``, or a serving
    certificate that expired → promoted; less than ``renew_before`` left (default a third of the
    lifetime) → a fresh pair staged; CAs that expired → dropped from ca.crt."""
    others = {k: v for k, v in data.items() if k not in (CA_CRT, TLS_CRT, TLS_KEY, NEXT_CRT, NEXT_KEY)}
    current = _pair(data.get(TLS_CRT), data.get(TLS_KEY))
    staged_pem = (data.get(NEXT_CRT), data.get(NEXT_KEY))
    has_staged = any(staged_pem)
    staged = _pair(*staged_pem)
    cas = _certs(data.get(CA_CRT, b""))
    current_ca = _issuer(current, cas) if current is not None else None
    expired = current is not None and current.not_valid_after_utc <= now
    if current is None or current_ca is None or (expired and staged is None):
        made = fresh()
        why = "expired" if expired else "no usable certificate and CA"
        return Plan({**others, CA_CRT: made.ca, TLS_CRT: made.cert, TLS_KEY: made.key}, why)
    serving = {TLS_CRT: data[TLS_CRT], TLS_KEY: data[TLS_KEY]}
    staged_ca = _issuer(staged, cas) if staged is not None else None
    if has_staged and (staged is None or staged_ca is None or staged.not_valid_after_utc <= now):
        return Plan({**others, CA_CRT: _bundle(current_ca, cas, now), **serving}, "staged pair unusable")
    if staged is not None and (now >= staged.not_valid_before_utc + promote_after or expired):
        promoted = {TLS_CRT: staged_pem[0] or b"", TLS_KEY: staged_pem[1] or b""}
        return Plan({**others, CA_CRT: _bundle(staged_ca, cas, now), **promoted}, "staged pair promoted")
    if staged is None:
        lifetime = current.not_valid_after_utc - current.not_valid_before_utc
        if current.not_valid_after_utc - now < (renew_before if renew_before is not None else lifetime / 3):
            made = fresh()
            new_ca = x509.load_pem_x509_certificate(made.ca)
            bundle = _bundle(current_ca, [*cas, new_ca], now)
            staged_data = {NEXT_CRT: made.cert, NEXT_KEY: made.key}
            return Plan({**others, CA_CRT: bundle, **serving, **staged_data}, "renewal staged")
    bundle = _bundle(current_ca, cas, now)
    if bundle != data.get(CA_CRT):
        kept = {
            **serving,
            **({NEXT_CRT: staged_pem[0] or b"", NEXT_KEY: staged_pem[1] or b""} if staged else {}),
        }
        return Plan({**others, CA_CRT: bundle, **kept}, "expired CAs dropped")
    return None
