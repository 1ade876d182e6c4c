"""koord-manager's flags: upstream chart v1.8.0's argument list parses, what koord implements takes effect
(--sync-period becomes the controllers' resync, --v the log level), the rest is one warning line; feature
gates are upstream's (none implemented: named gates are a warning); unknown flags exit naming them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager.controllers.setup import sync_period
from manager.options import parse_args
from manager.webhook.flags import GATE_DEFAULTS

CHART = Path(__file__).resolve().parents[2] / "data/upstream/chart-v1.8.0/manager-args.json"


def test_chart_arguments() -> None:
    args, warnings = parse_args(json.loads(CHART.read_text()))
    assert args.enable_leader_election is True
    assert (args.metrics_addr, args.health_probe_addr) == (":8080", ":8000")
    assert args.leader_election_namespace == "koordinator-system"
    assert args.config_namespace == "koordinator-system"
    assert args.slo_config_name == "slo-controller-config"
    assert args.v == 4
    assert args.sync_period == 0.0
    assert args.feature_gates == GATE_DEFAULTS  # only the webhook gates are implemented
    assert warnings == [
        "koord-manager: accepted upstream flags koord does not implement (ignored): --logtostderr"
    ]


def test_implemented_flags_in_go_forms() -> None:
    args, warnings = parse_args(
        ["-enable-leader-election=false", "-sync-period", "1m30s", "-slo-config-name=my-config",
         "--config-namespace", "ns", "-controllers", "-nodeslo"]
    )  # fmt: skip
    assert args.enable_leader_election is False
    assert args.sync_period == 90.0
    assert (args.slo_config_name, args.config_namespace) == ("my-config", "ns")
    assert args.controllers == "-nodeslo"
    assert warnings == []


def test_gates_are_a_warning_naming_them() -> None:
    args, warnings = parse_args(
        ["--feature-gates=PodMutatingWebhook=false,MultiQuotaTree=true,Accelerators=true"]
    )
    assert warnings == [
        "koord-manager: --feature-gates: ignoring upstream gates koord does not implement: "
        "MultiQuotaTree; unknown gates: Accelerators"
    ]
    assert args.feature_gates["PodMutatingWebhook"] is False
    assert args.feature_gates["ConfigMapValidatingWebhook"] is True  # on by default here, off upstream


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["--feature-gates=PodMutatingWebhook"], ["--feature-gates", "PodMutatingWebhook"]),
        (["--sync-period=soon"], ["--sync-period", "soon"]),
        (["--sync-period=-1s"], ["--sync-period", "-1s"]),
        (["--no-such-flag"], ["--no-such-flag"]),
        (["-enable-leader-election=maybe"], ["-enable-leader-election", "maybe"]),
    ],
)
def test_errors_name_flag_and_value(
    argv: list[str], needles: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("koord-manager: error:")]
    for needle in needles:
        assert needle in line


@pytest.mark.parametrize(("text", "seconds"), [("", 0.0), ("0", 0.0), ("10h", 36000.0), ("500ms", 0.5)])
def test_sync_period(text: str, seconds: float) -> None:
    assert sync_period(text) == seconds
