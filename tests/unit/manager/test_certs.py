"""manager.certs: a self-signed CA and a serving certificate for the given names, kept in a Secret that
the first replica creates and the others read back, written to the files a TLS server loads."""

from __future__ import annotations

import datetime as dt
import logging
import stat
from pathlib import Path
from typing import Any, TypedDict

import pytest
from cryptography import x509

from manager.certs import ServingCert, bootstrap, from_secret, missing_hosts, new_serving_cert, secret_body

HOSTS = ["koord-manager-hub", "koord-manager-hub.koordinator-system.svc", "localhost", "127.0.0.1"]


class FakeSecrets:
    """create_or_read over a dict, as the gateway does against the API server: the first body wins."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}
        self.offers = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.offers += 1
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        return self.stored.setdefault(key, body)


class Files(TypedDict):
    cert_file: Path
    key_file: Path
    ca_file: Path


def _files(tmp: Path) -> Files:
    return {"cert_file": tmp / "tls.crt", "key_file": tmp / "tls.key", "ca_file": tmp / "ca.crt"}


def test_the_serving_certificate_names_the_hosts_and_chains_to_the_ca() -> None:
    made = new_serving_cert("koord-manager-hub", HOSTS)
    ca = x509.load_pem_x509_certificate(made.ca)
    cert = x509.load_pem_x509_certificate(made.cert)
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert missing_hosts(made, HOSTS) == []
    assert missing_hosts(made, ["other.example", "10.0.0.1"]) == ["other.example", "10.0.0.1"]
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert b"PRIVATE KEY" in made.key and b"PRIVATE KEY" not in made.ca + made.cert
    with pytest.raises(ValueError, match="host"):
        new_serving_cert("x", [])


def test_a_secret_round_trips_and_a_broken_one_is_named() -> None:
    made = new_serving_cert("hub", ["localhost"])
    body = secret_body(made, "hub-tls", "ns")
    assert (body["type"], body["metadata"]) == ("kubernetes.io/tls", {"name": "hub-tls", "namespace": "ns"})
    assert set(body["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    assert from_secret(body) == made
    del body["data"]["tls.key"]
    with pytest.raises(ValueError, match=r"hub-tls lacks tls\.key"):
        from_secret(body)


def test_the_first_replica_wins_and_every_replica_writes_the_same_files(tmp_path: Path) -> None:
    secrets = FakeSecrets()
    got: list[ServingCert] = []
    for replica in ("a", "b"):
        got.append(
            bootstrap(
                secrets,
                name="koord-manager-hub",
                hosts=HOSTS,
                secret="hub-tls",
                namespace="ns",
                **_files(tmp_path / replica),
            )
        )
    assert secrets.offers == 2 and len(secrets.stored) == 1
    assert got[0] == got[1] == from_secret(secrets.stored[("ns", "hub-tls")])
    for replica in ("a", "b"):
        files = _files(tmp_path / replica)
        assert files["cert_file"].read_bytes() == got[0].cert
        assert files["ca_file"].read_bytes() == got[0].ca
        assert files["key_file"].read_bytes() == got[0].key
        assert stat.S_IMODE(files["key_file"].stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["ca.crt", "tls.crt", "tls.key"]  # no temp


def test_a_stored_certificate_that_misses_names_or_expires_soon_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secrets = FakeSecrets()
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=3640)  # expires in about 10 days
    secrets(secret_body(new_serving_cert("hub", ["localhost"], now=old), "hub-tls", "ns"))
    with caplog.at_level(logging.WARNING, logger="manager.certs"):
        hosts = ["localhost", "hub.ns.svc"]
        got = bootstrap(
            secrets, name="hub", hosts=hosts, secret="hub-tls", namespace="ns", **_files(tmp_path)
        )
    assert got == from_secret(secrets.stored[("ns", "hub-tls")])
    assert "does not name ['hub.ns.svc']" in caplog.text
    assert "expires" in caplog.text
