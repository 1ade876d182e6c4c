"""koord-scheduler's flags: upstream chart v1.8.0's argument list parses (--port is --metrics-port, --v the
log level, the rest one warning line); leader election comes from flags, else the --config file's
leaderElection, else the defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.config import LeaderElection, Profile, SchedulerConfig
from scheduler.main import leader_election, parse_args

CHART = Path(__file__).resolve().parents[2] / "data/upstream/chart-v1.8.0/scheduler-args.json"


def test_chart_arguments() -> None:
    args, warnings = parse_args(json.loads(CHART.read_text()))
    assert args.metrics_port == 10251
    assert args.config == "/config/koord-scheduler.config"
    assert args.v == 4
    assert args.feature_gates == {}
    assert warnings == [
        "koord-scheduler: accepted upstream flags koord does not implement (ignored): "
        "--authentication-skip-lookup, --enable-network-topology-manager"
    ]


def test_scheduler_gates_are_a_warning() -> None:
    _, warnings = parse_args(["--feature-gates=CompatibleCSIStorageCapacity=true"])
    assert warnings == [
        "koord-scheduler: --feature-gates: ignoring upstream gates koord does not implement: "
        "CompatibleCSIStorageCapacity"
    ]


def test_unknown_flag_exits_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--prot=1"])
    assert "--prot" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "config", "want"),
    [
        ([], LeaderElection(), (True, "koordinator-system", "koord-scheduler")),
        ([], LeaderElection(False, "n", "ns"), (False, "ns", "n")),
        (
            ["--leader-elect", "--leader-elect-resource-name=x"],
            LeaderElection(False, "n", "ns"),
            (True, "ns", "x"),
        ),
        (["-leader-elect=false"], LeaderElection(True), (False, "koordinator-system", "koord-scheduler")),
    ],
)
def test_leader_election_flag_then_config_then_default(
    argv: list[str], config: LeaderElection, want: tuple[bool, str, str]
) -> None:
    args, _ = parse_args(argv)
    assert leader_election(args, SchedulerConfig((Profile(),), leader_election=config)) == want
