"""Go-style argv for argparse: every Go spelling of a flag reaches the parser, upstream flags koord does
not implement are swallowed with their values and reported, anything else is an error naming it; feature
gate strings: unknown gates reported, malformed items errors naming them."""

from __future__ import annotations

import argparse

import pytest

from kube import upstreamflags
from kube.goflags import FlagError, go_bool, ignored_flags_message, normalise, parse_gates


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t", exit_on_error=False)
    p.add_argument("--addr", default="")
    p.add_argument("--on", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--dry", action="store_true")
    p.add_argument("-v", "--v", type=int, nargs="?", const=4, default=0)
    p.add_argument("--metrics-port", type=int, default=1)
    return p


UPSTREAM = {"tsdb-path": False, "enable-pprof": True, "log-dir": False}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["-addr=:1"], ["--addr=:1"]),
        (["-addr", ":1"], ["--addr=:1"]),
        (["--addr", "-x"], ["--addr=-x"]),  # Go takes the next argument as the value, whatever it is
        (["-on"], ["--on"]),
        (["-on=false"], ["--no-on"]),
        (["--on=0"], ["--no-on"]),
        (["-no-on"], ["--no-on"]),
        (["--no-on=false"], ["--on"]),
        (["-dry=true"], ["--dry"]),
        (["-dry=false"], []),
        (["-v"], ["--v"]),
        (["-v=3"], ["--v=3"]),
        (["--v", "3"], ["--v", "3"]),  # optional value: argparse takes it
        (["--", "-addr"], ["-addr"]),
        (["stray"], ["stray"]),
    ],
)
def test_koord_flags_in_go_forms(argv: list[str], want: list[str]) -> None:
    got = normalise(_parser(), argv, UPSTREAM)
    assert got.argv == want
    assert got.ignored == ()


def test_normalised_argv_parses() -> None:
    p = _parser()
    a = p.parse_args(normalise(p, ["-addr", ":9", "-on=false", "--v", "5", "-dry"], UPSTREAM).argv)
    assert (a.addr, a.on, a.v, a.dry) == (":9", False, 5, True)


def test_upstream_flags_are_swallowed_with_their_values() -> None:
    got = normalise(
        _parser(),
        [
            "-tsdb-path",
            "/data",
            "-enable-pprof",
            "-addr=:1",
            "--log_dir=/l",
            "-tsdb-path=/again",
            "-enable-pprof=false",
        ],
        UPSTREAM,
    )
    assert got.argv == ["--addr=:1"]
    assert got.ignored == ("--tsdb-path", "--enable-pprof", "--log-dir")
    assert ignored_flags_message("koordlet", got.ignored) == (
        "koordlet: accepted upstream flags koord does not implement (ignored): "
        "--tsdb-path, --enable-pprof, --log-dir"
    )


def test_alias_maps_an_upstream_name_onto_a_koord_flag() -> None:
    p = _parser()
    got = normalise(p, ["--port=10251"], {}, {"port": "--metrics-port"})
    assert p.parse_args(got.argv).metrics_port == 10251
    with pytest.raises(ValueError, match="no such flag"):
        normalise(p, [], {}, {"port": "--nope"})


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["-nope"], "unknown flag -nope"),
        (["--nope=1"], "unknown flag --nope"),
        (["-on=maybe"], "-on=maybe: invalid boolean value 'maybe'"),
        (["-addr"], "flag needs an argument: -addr"),
        (["-tsdb-path"], "flag needs an argument: -tsdb-path"),
        (["---addr=1"], "bad flag syntax: ---addr=1"),
        (["-=x"], "bad flag syntax: -=x"),
        (["-h=1"], "-h=1: --help takes no value"),
    ],
)
def test_errors_name_the_flag(argv: list[str], needle: str) -> None:
    with pytest.raises(FlagError) as e:
        normalise(_parser(), argv, UPSTREAM)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    ("text", "want"), [("1", True), ("T", True), ("tRuE", True), ("0", False), ("F", False)]
)
def test_go_bool(text: str, want: bool) -> None:
    assert go_bool(text) is want
    assert go_bool("yes") is None


def test_gates_overlay_defaults_and_report_what_has_no_effect() -> None:
    defaults = {"A": False, "B": True}
    gates = parse_gates("A=true, X=false,Y=true,,B=0", defaults, upstream={"X"})
    assert gates.values == {"A": True, "B": False}
    assert (gates.not_implemented, gates.unknown) == (("X",), ("Y",))
    assert (
        gates.warning("c")
        == "c: --feature-gates: ignoring upstream gates koord does not implement: X; unknown gates: Y"
    )
    assert parse_gates("", defaults).warning("c") is None
    assert defaults == {"A": False, "B": True}


def test_all_alpha_yields_to_explicit_gates_in_any_order() -> None:
    assert parse_gates("A=false,AllAlpha=true", {"A": False, "B": False}).values == {"A": False, "B": True}


@pytest.mark.parametrize("text", ["A", "A=", "A=yes", "=true", " =1"])
def test_malformed_gate_names_the_item(text: str) -> None:
    with pytest.raises(FlagError) as e:
        parse_gates(text, {"A": False})
    assert f"--feature-gates: {text.strip()!r}" in str(e.value)


def test_upstream_tables_do_not_shadow_koord_flags() -> None:
    """An upstream 'ignored' flag koord also implements would never be reached: keep the tables honest."""
    from agent.options import build_parser as koordlet_parser
    from manager.options import build_parser as manager_parser
    from scheduler.main import build_parser as scheduler_parser

    for parser, table in (
        (koordlet_parser(), upstreamflags.KOORDLET),
        (manager_parser(), upstreamflags.MANAGER),
        (scheduler_parser(), upstreamflags.SCHEDULER),
    ):
        own = {s.lstrip("-") for a in parser._actions for s in a.option_strings}
        assert not own & set(table), own & set(table)
