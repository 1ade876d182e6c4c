"""Throw-away PKI for the local control plane: a CA, the API server's serving certificate, the
service-account key pair and a static token file, all made with the `openssl` command.

Imports: standard library only.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Static identities written to the token file. The admin is in system:masters; components get
# their own users so RBAC can be exercised as in a real cluster.
ADMIN_USER = "koord-admin"


@dataclass(frozen=True)
class PKI:
    dir: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    admin_token: str


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])} failed: {proc.stderr.strip()}")


def make_pki(directory: Path, extra_tokens: dict[str, tuple[str, list[str]]] | None = None) -> PKI:
    """Creates a CA, a serving certificate for 127.0.0.1/localhost and the kubernetes service names,
    a service-account key pair, and a token file. `extra_tokens` maps token → (user, groups)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("openssl not found: `apt-get install openssl` (or run `make deps`)")
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=d)
    _openssl("req", "-x509", "-new", "-nodes", "-key", "ca.key", "-subj", "/CN=koord-local-ca",
             "-days", "3650", "-out", "ca.crt", cwd=d)  # fmt: skip
    (d / "server.ext").write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n"
    )
    _openssl("genrsa", "-out", "server.key", "2048", cwd=d)
    _openssl("req", "-new", "-key", "server.key", "-subj", "/CN=kube-apiserver", "-out", "server.csr", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "3650", "-extfile", "server.ext", "-out", "server.crt", cwd=d)  # fmt: skip
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)

    admin_token = secrets.token_hex(16)
    rows = [f'{admin_token},{ADMIN_USER},{ADMIN_USER},"system:masters"']
    for token, (user, groups) in (extra_tokens or {}).items():
        rows.append(f'{token},{user},{user},"{",".join(groups)}"')
    token_file = d / "tokens.csv"
    token_file.write_text("\n".join(rows) + "\n")
    token_file.chmod(0o600)
    return PKI(
        dir=d,
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        server_cert=d / "server.crt",
        server_key=d / "server.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
        token_file=token_file,
        admin_token=admin_token,
    )


def issue_cert(
    pki: PKI,
    name: str,
    common_name: str,
    organizations: tuple[str, ...] = (),
    *,
    client: bool = True,
    server_sans: tuple[str, ...] = (),
) -> tuple[Path, Path]:
    """Signs a key pair for `common_name` (the user name when used as a client certificate) with
    the groups `organizations`, under `pki.dir/<name>.{crt,key}`. `server_sans` (e.g. "IP:10.0.0.1",
    "DNS:node") also make it a serving certificate. Returns (cert, key)."""
    d = pki.dir
    subject = "".join(f"/O={o}" for o in organizations) + f"/CN={common_name}"
    usages = (["clientAuth"] if client else []) + (["serverAuth"] if server_sans else [])
    ext = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment",
           f"extendedKeyUsage={','.join(usages)}"]  # fmt: skip
    if server_sans:
        ext.append(f"subjectAltName={','.join(server_sans)}")
    (d / f"{name}.ext").write_text("\n".join(ext) + "\n")
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=d)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "3650", "-extfile", f"{name}.ext", "-out", f"{name}.crt", cwd=d)  # fmt: skip
    (d / f"{name}.key").chmod(0o600)
    return d / f"{name}.crt", d / f"{name}.key"
