"""koord-manager's hub authentication flags: the embedded scheduler's per-process token is always a
reader; static tokens come from the file; none disables checks; a missing file is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.hubsetup import EMBEDDED_SCHEDULER_USER, hub_auth
from manager.options import build_parser


def test_static_mode_chains_the_internal_token_and_the_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("agent-tok,system:node:n1\n")
    args = build_parser().parse_args(["--hub-auth=static", f"--hub-token-auth-file={tokens}"])
    authn, authz = hub_auth(args, "internal-secret")
    assert authn is not None and authz is not None
    internal = authn.authenticate("internal-secret")
    assert internal is not None and internal.user == EMBEDDED_SCHEDULER_USER
    authz.reader(internal)  # the embedded scheduler may Watch/List
    node = authn.authenticate("agent-tok")
    assert node is not None and authz.node_of(node) == "n1"
    assert authn.authenticate("nope") is None


def test_none_mode_and_missing_file() -> None:
    assert hub_auth(build_parser().parse_args(["--hub-auth=none"]), "t") == (None, None)
    with pytest.raises(ValueError, match="--hub-token-auth-file"):
        hub_auth(build_parser().parse_args(["--hub-auth=static"]), "t")
