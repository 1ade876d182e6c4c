"""koord-manager's hub TLS flags: none → plaintext; a certificate and key → TLS credentials, the
embedded scheduler trusting --hub-ca (default the certificate itself); half a pair is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.certs import new_serving_cert
from manager.hubsetup import hub_tls
from manager.options import build_parser


def test_no_tls_flags_serve_plaintext() -> None:
    assert hub_tls(build_parser().parse_args([])) == (None, None)


def test_a_certificate_and_key_give_tls_credentials(tmp_path: Path) -> None:
    made = new_serving_cert("hub", ["127.0.0.1"])
    cert, key, ca = tmp_path / "tls.crt", tmp_path / "tls.key", tmp_path / "ca.crt"
    cert.write_bytes(made.cert)
    key.write_bytes(made.key)
    credentials, trusted = hub_tls(
        build_parser().parse_args([f"--hub-tls-cert={cert}", f"--hub-tls-key={key}"])
    )
    assert credentials is not None and trusted == cert
    args = build_parser().parse_args([f"--hub-tls-cert={cert}", f"--hub-tls-key={key}", f"--hub-ca={ca}"])
    assert hub_tls(args)[1] == ca


@pytest.mark.parametrize("flags", [["--hub-tls-cert=x.crt"], ["--hub-tls-key=x.key"], ["--hub-tls-secret=s"]])
def test_half_a_pair_is_an_error(flags: list[str]) -> None:
    with pytest.raises(ValueError, match="--hub-tls-cert and --hub-tls-key"):
        hub_tls(build_parser().parse_args(flags))


def test_a_missing_file_is_an_os_error(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [f"--hub-tls-cert={tmp_path}/no.crt", f"--hub-tls-key={tmp_path}/no.key"]
    )
    with pytest.raises(OSError):
        hub_tls(args)
