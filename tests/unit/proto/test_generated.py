"""The committed generated proto code equals a fresh generation and exposes the MetricHub service."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]


def _load_gen_proto() -> ModuleType:
    path = REPO_ROOT / "hack" / "gen_proto.py"
    spec = importlib.util.spec_from_file_location("koord_hack_gen_proto", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_proto() -> ModuleType:
    return _load_gen_proto()


def test_fresh_generation_equals_committed_files(gen_proto: ModuleType) -> None:
    fresh = gen_proto.generate()
    assert {str(p) for p in fresh} == {
        "proto/koord/v1/metrichub_pb2.py",
        "proto/koord/v1/metrichub_pb2_grpc.py",
        "proto/koord/v1/metrichub_pb2.pyi",
        "proto/koord/v1/metrichub_pb2_grpc.pyi",
        "proto/koord/v1/shardbinder_pb2.py",
        "proto/koord/v1/shardbinder_pb2_grpc.py",
        "proto/koord/v1/shardbinder_pb2.pyi",
        "proto/koord/v1/shardbinder_pb2_grpc.pyi",
    }
    for name, content in fresh.items():
        committed = (REPO_ROOT / name).read_bytes()
        assert committed == content, f"{name} is stale: run `python hack/gen_proto.py`"
    assert gen_proto.check() == []


def test_check_reports_a_stale_file(gen_proto: ModuleType, tmp_path: Path) -> None:
    # A copy of the repository's proto tree whose committed stub was edited must fail the check.
    (tmp_path / "proto" / "koord" / "v1").mkdir(parents=True)
    for name in ("metrichub.proto", "metrichub_pb2.py", "metrichub_pb2_grpc.py", "metrichub_pb2.pyi"):
        src = REPO_ROOT / "proto" / "koord" / "v1" / name
        (tmp_path / "proto" / "koord" / "v1" / name).write_bytes(src.read_bytes())
    shardbinder = REPO_ROOT / "proto" / "koord" / "v1" / "shardbinder.proto"
    (tmp_path / "proto" / "koord" / "v1" / "shardbinder.proto").write_bytes(shardbinder.read_bytes())
    stale = tmp_path / "proto" / "koord" / "v1" / "metrichub_pb2.py"
    stale.write_bytes(stale.read_bytes() + b"# edited\n")
    problems = gen_proto.check(tmp_path)
    assert "differs: proto/koord/v1/metrichub_pb2.py" in problems
    assert "missing: proto/koord/v1/metrichub_pb2_grpc.pyi" in problems
    assert any(line.startswith("-# edited") for line in problems)


def test_generated_module_has_service_and_messages() -> None:
    from proto.koord.v1 import metrichub_pb2, metrichub_pb2_grpc

    service = metrichub_pb2.DESCRIPTOR.services_by_name["MetricHub"]
    assert service.full_name == "koord.v1.MetricHub"
    methods = {m.name: m for m in service.methods}
    assert set(methods) == {"Report", "Watch", "WatchBatch", "List"}
    report, watch, lst = methods["Report"], methods["Watch"], methods["List"]
    batch = methods["WatchBatch"]
    assert (batch.client_streaming, batch.server_streaming) == (False, True)
    assert batch.input_type.name == "WatchRequest" and batch.output_type.name == "NodeMetricEventBatch"
    assert batch.output_type.fields_by_name["events"].message_type.name == "NodeMetricEvent"
    assert (report.client_streaming, report.server_streaming) == (True, False)
    assert report.input_type.name == "NodeMetricReport" and report.output_type.name == "ReportAck"
    assert (watch.client_streaming, watch.server_streaming) == (False, True)
    assert watch.input_type.name == "WatchRequest" and watch.output_type.name == "NodeMetricEvent"
    assert (lst.client_streaming, lst.server_streaming) == (False, False)
    assert lst.input_type.name == "ListRequest" and lst.output_type.name == "ListResponse"

    for cls in ("MetricHubStub", "MetricHubServicer", "add_MetricHubServicer_to_server"):
        assert hasattr(metrichub_pb2_grpc, cls)
    assert metrichub_pb2.EventType.Name(metrichub_pb2.EVENT_TYPE_DELETED) == "EVENT_TYPE_DELETED"


def test_presence_fields_are_optional() -> None:
    from proto.koord.v1 import metrichub_pb2

    status = metrichub_pb2.NodeMetricStatus()
    for field in ("update_time", "node_metric", "prod_reclaimable_metric", "prod_peak_metric"):
        assert not status.HasField(field)
    rm = metrichub_pb2.ResourceMap()
    assert not rm.HasField("devices_json")
    rm.devices_json = "[]"
    assert rm.HasField("devices_json")
    watch = metrichub_pb2.WatchRequest(since_revision=7)
    assert not watch.HasField("node_name")
    policy = metrichub_pb2.NodeMetricCollectPolicy(report_interval_seconds=0)
    assert policy.HasField("report_interval_seconds")
    assert not policy.HasField("aggregate_duration_seconds")
