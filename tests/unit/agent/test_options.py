"""koordlet flags: NODE_NAME from env (required), duration parsing, errors naming the flag and the value
(argparse exits with code 2), feature gates."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import options
from agent.options import FEATURE_GATES, parse, parse_feature_gates
from agent.system.podcgroup import CgroupDriver


@pytest.fixture(autouse=True)
def no_service_account(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(options, "SERVICE_ACCOUNT_TOKEN", tmp_path / "no-such-token")


def parse_error(argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as info:
        parse(argv, env)
    assert info.value.code == 2
    err = capsys.readouterr().err
    # only the error line: the usage text above it names every flag
    [line] = [ln for ln in err.splitlines() if ln.startswith("koordlet: error:")]
    return line


def test_defaults_with_node_name_from_env() -> None:
    opts, _ = parse([], {"NODE_NAME": "node-1"})
    assert opts.node_name == "node-1"
    assert opts.collect_interval_seconds == 1.0
    assert opts.addr == ":9316"
    assert opts.hub_address is None
    assert opts.hub_token_file is None
    assert opts.hub_ca is None  # plaintext unless a CA bundle is given
    assert opts.push_interval_seconds == 5.0
    assert opts.enable_node_metric_report is True
    assert opts.metric_cache_path == Path("/metric-data/metric-cache.npz")
    assert opts.metric_cache_checkpoint_seconds == 300.0
    assert opts.retention_seconds == 12 * 3600
    assert opts.pod_retention_seconds == 6 * 60
    assert opts.kube_api_qps == 20.0
    assert opts.kube_api_burst == 30
    assert opts.cgroup_driver is None
    assert dict(opts.feature_gates) == FEATURE_GATES


def test_flag_overrides_env_node_name() -> None:
    opts, _ = parse(["--node-name", "flag-node"], {"NODE_NAME": "env-node"})
    assert opts.node_name == "flag-node"


@pytest.mark.parametrize("env", [{}, {"NODE_NAME": ""}])
def test_node_name_required(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error([], env, capsys)
    assert "--node-name" in err
    assert "NODE_NAME" in err


def test_durations_and_values_parsed(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    opts, _ = parse(
        [
            "--collect-res-used-interval",
            "2s",
            "--metric-retention",
            "1h30m",
            "--pod-metric-retention",
            "500s",
            "--hub-address",
            "127.0.0.1:9400",
            "--hub-token-file",
            str(token),
            "--push-interval-seconds",
            "2.5",
            "--no-enable-node-metric-report",
            "--metric-cache-path",
            "",
            "--cgroup-driver",
            "systemd",
            "--addr",
            "127.0.0.1:0",
        ],
        {"NODE_NAME": "n"},
    )
    assert opts.collect_interval_seconds == 2.0
    assert opts.retention_seconds == 5400.0
    assert opts.pod_retention_seconds == 500.0
    assert opts.hub_address == "127.0.0.1:9400"
    assert opts.hub_token_file == token
    assert opts.push_interval_seconds == 2.5
    assert opts.enable_node_metric_report is False
    assert opts.metric_cache_path is None
    assert opts.cgroup_driver is CgroupDriver.SYSTEMD
    assert opts.addr == "127.0.0.1:0"


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("0s", 0.0), ("30s", 30.0), ("1h", 3600.0)])
def test_metric_cache_checkpoint_interval(text: str, seconds: float) -> None:
    opts, _ = parse([f"--metric-cache-checkpoint-interval={text}"], {"NODE_NAME": "n"})
    assert opts.metric_cache_checkpoint_seconds == seconds


@pytest.mark.parametrize("text", ["-1s", "soon"])
def test_bad_metric_cache_checkpoint_interval(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error([f"--metric-cache-checkpoint-interval={text}"], {"NODE_NAME": "n"}, capsys)
    assert "--metric-cache-checkpoint-interval" in err and text in err


def test_hub_ca_turns_tls_on() -> None:
    opts, _ = parse(["--hub-address", "hub:9317", "--hub-ca", "/etc/koord/hub-ca/ca.crt"], {"NODE_NAME": "n"})
    assert opts.hub_ca == Path("/etc/koord/hub-ca/ca.crt")


def test_service_account_token_used_when_mounted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sa = tmp_path / "sa-token"
    sa.write_text("t")
    monkeypatch.setattr(options, "SERVICE_ACCOUNT_TOKEN", sa)
    opts, _ = parse([], {"NODE_NAME": "n"})
    assert opts.hub_token_file == sa


@pytest.mark.parametrize(
    ("argv", "flag", "value"),
    [
        (["--collect-res-used-interval", "soon"], "--collect-res-used-interval", "soon"),
        (["--collect-res-used-interval", "500ms"], "--collect-res-used-interval", "500ms"),
        (["--collect-res-used-interval", "0s"], "--collect-res-used-interval", "0s"),
        (["--metric-retention", "12"], "--metric-retention", "12"),
        (["--metric-retention=-1h"], "--metric-retention", "-1h"),
        (["--pod-metric-retention", "0s"], "--pod-metric-retention", "0s"),
        (["--push-interval-seconds", "0"], "--push-interval-seconds", "0"),
        (["--push-interval-seconds", "fast"], "--push-interval-seconds", "fast"),
        (["--kube-api-qps", "0"], "--kube-api-qps", "0"),
        (["--kube-api-burst", "0"], "--kube-api-burst", "0"),
        (["--cgroup-driver", "weird"], "--cgroup-driver", "weird"),
        (["--feature-gates", "CPUBurst=maybe"], "--feature-gates", "CPUBurst=maybe"),
        (["-feature-gates=Accelerators"], "--feature-gates", "Accelerators"),
        (["--v=loud"], "--v", "loud"),
        (["--v=-1"], "--v", "-1"),
        (["-enable-node-metric-report=maybe"], "-enable-node-metric-report", "maybe"),
        (["-no-such-flag=1"], "-no-such-flag", "no-such-flag"),
        (["--addr"], "--addr", "needs an argument"),
    ],
)
def test_errors_name_flag_and_value(
    argv: list[str], flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = parse_error(argv, {"NODE_NAME": "n"}, capsys)
    assert flag in err
    assert value in err


@pytest.mark.parametrize("addr", ["nonsense", ":port", "host:70000"])
def test_bad_addr_rejected_naming_value(addr: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error(["--addr", addr], {"NODE_NAME": "n"}, capsys)
    assert addr in err


@pytest.mark.parametrize("flag", ["--addr", "--hub-address"])
def test_bad_addr_error_names_the_flag(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error([flag, "nonsense"], {"NODE_NAME": "n"}, capsys)
    assert flag in err


def test_nan_push_interval_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    err = parse_error(["--push-interval-seconds", "nan"], {"NODE_NAME": "n"}, capsys)
    assert "--push-interval-seconds" in err


# --- feature gates -------------------------------------------------------------------------------------
def test_feature_gate_defaults() -> None:
    gates = parse_feature_gates("")
    assert gates == FEATURE_GATES
    assert gates is not FEATURE_GATES
    assert gates["BECPUSuppress"] is True
    assert gates["BEMemoryEvict"] is False
    assert parse_feature_gates("   ") == FEATURE_GATES


def test_feature_gate_overrides() -> None:
    gates = parse_feature_gates("BEMemoryEvict=true, CPUBurst=False,PSICollector=TRUE")
    assert gates["BEMemoryEvict"] is True
    assert gates["CPUBurst"] is False
    assert gates["PSICollector"] is True
    assert gates["BECPUSuppress"] is True  # untouched default
    assert FEATURE_GATES["BEMemoryEvict"] is False  # the defaults are not mutated


@pytest.mark.parametrize("name", ["AllAlpha", "AllBeta"])
def test_all_alpha_all_beta(name: str) -> None:
    assert set(parse_feature_gates(f"{name}=true").values()) == {True}
    assert set(parse_feature_gates(f"{name}=false").values()) == {False}
    later = parse_feature_gates(f"{name}=true,CPUBurst=false")
    assert later["CPUBurst"] is False
    assert later["BEMemoryEvict"] is True


def test_unknown_gates_are_dropped_not_fatal() -> None:
    gates = parse_feature_gates("Nope=true,RDMADevices=true,CPUBurst=false")
    assert "Nope" not in gates and "RDMADevices" not in gates
    assert gates["CPUBurst"] is False
    assert set(gates) == set(FEATURE_GATES)


def test_unknown_gates_are_one_warning_naming_them() -> None:
    opts, _ = parse(["--feature-gates=RDMADevices=true,Nope=false,BEMemoryEvict=true"], {"NODE_NAME": "n"})
    assert opts.feature_gates["BEMemoryEvict"] is True
    [warning] = opts.warnings
    assert "RDMADevices" in warning and "Nope" in warning and "BEMemoryEvict" not in warning
    assert "upstream gates koord does not implement: RDMADevices" in warning
    assert "unknown gates: Nope" in warning


def test_go_boolean_spellings_in_gates() -> None:
    gates = parse_feature_gates("CPUBurst=0,BEMemoryEvict=t,MemoryEvict=1,,")
    assert (gates["CPUBurst"], gates["BEMemoryEvict"], gates["MemoryEvict"]) == (False, True, True)


@pytest.mark.parametrize("text", ["CPUBurst", "CPUBurst=", "CPUBurst=yes", "=true"])
def test_malformed_gate(text: str) -> None:
    with pytest.raises(ValueError, match="--feature-gates"):
        parse_feature_gates(text)


def test_feature_gates_flag() -> None:
    opts, _ = parse(["--feature-gates", "NetworkCollector=false,MemoryEvict=true"], {"NODE_NAME": "n"})
    assert opts.feature_gates["NetworkCollector"] is False
    assert opts.feature_gates["MemoryEvict"] is True


# --- upstream's Go-style argument lists --------------------------------------------------------------
def test_upstream_chart_arguments() -> None:
    """The chart's koordlet args: implemented flags take effect, the others are one warning naming them."""
    argv = [
        "-addr=:9316",
        "-cgroup-root-dir=/host-cgroup/",
        "-feature-gates=BECPUEvict=true,BEMemoryEvict=true,CgroupReconcile=true,Accelerators=true,RDMADevices=true",
        "-runtime-hooks-host-endpoint=/var/run/koordlet/koordlet.sock",
        "--logtostderr=true",
        "--v=4",
    ]
    opts, _ = parse(argv, {"NODE_NAME": "n"})
    assert opts.addr == ":9316"
    assert opts.paths.cgroup_root == Path("/host-cgroup")
    assert opts.feature_gates["BECPUEvict"] and opts.feature_gates["CgroupReconcile"]
    assert opts.verbosity == 4
    assert opts.feature_gates["Accelerators"]  # implemented: the Device report
    flags, gates = opts.warnings
    assert flags.endswith("(ignored): --runtime-hooks-host-endpoint, --logtostderr")
    assert gates.endswith("upstream gates koord does not implement: RDMADevices")


@pytest.mark.parametrize(
    ("argv", "addr", "report", "qps"),
    [
        (
            ["-addr", "127.0.0.1:1", "-enable-node-metric-report=false", "-kube-api-qps", "5"],
            "127.0.0.1:1",
            False,
            5,
        ),
        (["--addr=:2", "-enable-node-metric-report", "--kube-api-qps=7"], ":2", True, 7),
        (["-addr=:3", "--enable-node-metric-report=F", "-no-enable-qos=false"], ":3", False, 20),
    ],
)
def test_go_flag_forms(argv: list[str], addr: str, report: bool, qps: float) -> None:
    opts, _ = parse(argv, {"NODE_NAME": "n"})
    assert (opts.addr, opts.enable_node_metric_report, opts.kube_api_qps) == (addr, report, qps)
    assert opts.enable_qos is True
    assert opts.warnings == ()


def test_ignored_value_flag_swallows_its_value() -> None:
    """``-tsdb-path /x`` takes /x with it (Go value flag); ``-enable-pprof`` (a boolean) takes nothing."""
    opts, _ = parse(
        ["-tsdb-path", "/x", "-enable-pprof", "-addr", ":5", "--log_dir", "/l"], {"NODE_NAME": "n"}
    )
    assert opts.addr == ":5"
    [warning] = opts.warnings
    assert warning.endswith("(ignored): --tsdb-path, --enable-pprof, --log-dir")


@pytest.mark.parametrize(
    ("argv", "level"), [([], 0), (["-v"], 4), (["--v", "2"], 2), (["--verbose"], 4), (["-v=6"], 6)]
)
def test_verbosity(argv: list[str], level: int) -> None:
    opts, _ = parse(argv, {"NODE_NAME": "n"})
    assert opts.verbosity == level


def test_gpu_gates_and_fake_root() -> None:
    """Accelerators (the Device report) and GPUEnvInject (the GPU device cgroup) are off by default, as
    upstream's; ``--gpu-fake-root`` replaces NVML with a card tree (docs/rules/koordlet-gpu.md#backends)."""
    opts, _ = parse(["--node-name=n"], {})
    assert (opts.feature_gates["Accelerators"], opts.feature_gates["GPUEnvInject"]) == (False, False)
    assert opts.gpu_fake_root is None
    opts, _ = parse(
        [
            "--node-name=n",
            "--feature-gates=Accelerators=true,GPUEnvInject=true",
            "--gpu-fake-root=/tmp/cards",
        ],
        {},
    )
    assert (opts.feature_gates["Accelerators"], opts.feature_gates["GPUEnvInject"]) == (True, True)
    assert opts.gpu_fake_root == Path("/tmp/cards") and opts.warnings == ()
    assert parse(["--node-name=n", "--gpu-fake-root="], {})[0].gpu_fake_root is None
