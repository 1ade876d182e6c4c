"""`koord simulate` kind Schedule with storage (docs/simulate.md#schedule-volumes): VolumeBinding's own
Reserve and PreBind write through the scenario's volume API, whose PV controller and provisioner bind the
claims for the pods that follow; malformed PVs, claims and StorageClasses are refused naming the field
and value. The scenario files' expectations are checked by test_schedule_scenarios.py."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from koord.simulate import simulate_scenario
from scheduler.framework.volumes import PV, PVC, VolumeObjects
from scheduler.plugins.volume.binderapi import VolumeAPIError
from scheduler.plugins.volume.binding_bind import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from scheduler.simulatevolumes import ScenarioClock, ScenarioVolumeAPI
from scheduler.simulatevolumes_input import check_storage_object

DIR = Path(__file__).resolve().parents[2] / "scenarios" / "schedule"


def _load(stem: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DIR / f"{stem}.json").read_text())
    return loaded


def _compete() -> dict[str, Any]:
    """objects: [0] StorageClass local, [1] PV local-a, [2] claim data-0, [3] claim data-1."""
    return _load("volume-two-pods-compete-for-one-local-pv")


def test_the_scenario_is_left_as_given_and_a_run_repeats() -> None:
    scenario = _compete()
    before = copy.deepcopy(scenario)
    first = simulate_scenario(scenario)
    assert scenario == before
    assert simulate_scenario(scenario) == first == scenario["expect"]


def test_prebind_waits_on_the_scenario_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """PreBind's poll would sleep a second per pod in real time; the simulation's clock is used."""

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"real sleep of {seconds}s")

    monkeypatch.setattr(time, "sleep", no_sleep)
    for stem in ("volume-two-claims-bind-on-one-node", "volume-dynamic-provisioning-selected-node"):
        scenario = _load(stem)
        assert simulate_scenario(scenario) == scenario["expect"]


def test_a_later_pod_sharing_a_provisioned_claim_gets_its_pv() -> None:
    scenario = _load("volume-dynamic-provisioning-selected-node")
    second = copy.deepcopy(scenario["pending"][0])
    second["metadata"]["name"] = "q"
    scenario["pending"].append(second)
    out = simulate_scenario(scenario)["pods"]
    claim = {"scratch": {"pv": "pvc-uid-scratch", "provisionedOn": "b"}}
    assert out["default/p"] == {"node": "b", "claims": claim}
    assert out["default/q"]["claims"] == claim  # bound now: no second PV is provisioned


def test_without_a_provisioner_the_delayed_claim_finds_no_volume() -> None:
    scenario = _load("volume-dynamic-provisioning-selected-node")
    scenario["objects"][0]["provisioner"] = "kubernetes.io/no-provisioner"
    out = simulate_scenario(scenario)["pods"]["default/p"]
    assert out == {
        "unschedulable": "0/3 nodes are available: "
        "3 node(s) didn't find available persistent volumes to bind."
    }


def test_a_pod_without_claims_has_no_claims_field() -> None:
    scenario = _compete()
    scenario["pending"][1]["spec"].pop("volumes")
    out = simulate_scenario(scenario)["pods"]
    assert out["default/p1"] == {"node": "b"}  # a is busier with p0 on it
    assert out["default/p0"]["claims"] == {"data-0": {"pv": "local-a"}}


def test_volume_binding_disabled_leaves_the_claim_unbound() -> None:
    scenario = _compete()
    scenario["config"] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "plugins": {
            "preFilter": {"disabled": [{"name": "VolumeBinding"}]},
            "filter": {"disabled": [{"name": "VolumeBinding"}]},
            "reserve": {"disabled": [{"name": "VolumeBinding"}]},
            "preBind": {"disabled": [{"name": "VolumeBinding"}]},
        }}],
    }  # fmt: skip
    out = simulate_scenario(scenario)["pods"]
    assert out["default/p0"]["claims"] == {"data-0": {}}
    assert out["default/p1"]["claims"] == {"data-1": {}}


def test_a_failed_prebind_is_the_pods_result(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: ScenarioVolumeAPI, pv: Any) -> Any:
        raise VolumeAPIError("the API server is away")

    monkeypatch.setattr(ScenarioVolumeAPI, "update_pv", refuse)
    out = simulate_scenario(_compete())["pods"]
    assert out["default/p0"] == {"unschedulable": "the API server is away"}
    # Unreserve gave local-a back: p1's Filter found it too (else: no available persistent volumes)
    assert out["default/p1"] == {"unschedulable": "the API server is away"}


# --- the API ----------------------------------------------------------------------------------------
def _api() -> ScenarioVolumeAPI:
    scenario = _compete()
    api = ScenarioVolumeAPI(VolumeObjects())
    for i, raw in enumerate(scenario["objects"]):
        api.load(raw["kind"], check_storage_object(raw["kind"], raw, f"objects[{i}]"), f"objects[{i}]")
    return api


def test_a_written_claim_ref_binds_the_claim_as_the_pv_controller_would() -> None:
    api = _api()
    pv = api.volumes.pv("local-a")
    assert pv is not None
    ref = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data-1", "uid": "uid-data-1"}
    api.update_pv({**pv, "spec": {**pv["spec"], "claimRef": ref}})
    claim = api.get_pvc("default", "data-1")
    assert claim is not None and claim["spec"]["volumeName"] == "local-a"
    assert claim["metadata"]["annotations"][ANN_BIND_COMPLETED] == "yes"
    assert claim["status"]["phase"] == "Bound"
    seen = api.volumes.pvc("default", "data-1")  # what the scheduler's informers delivered
    assert seen is not None and seen["spec"]["volumeName"] == "local-a"
    assert (api.volumes.pv("local-a") or {})["status"]["phase"] == "Bound"
    assert api.claims_of("default", ["data-1", "data-0"]) == {"data-1": {"pv": "local-a"}, "data-0": {}}


def test_a_stale_write_is_a_conflict_and_an_unknown_object_not_found() -> None:
    api = _api()
    pv = api.volumes.pv("local-a")
    assert pv is not None
    api.update_pv(pv)
    with pytest.raises(VolumeAPIError, match="the object has been modified"):
        api.update_pv(pv)
    with pytest.raises(VolumeAPIError, match='persistentvolumeclaims "nope" not found'):
        api.update_pvc({"metadata": {"namespace": "default", "name": "nope"}})
    assert api.get_pvc("default", "nope") is None


def test_a_selected_node_on_a_class_without_provisioner_provisions_nothing() -> None:
    api = _api()
    claim = api.get_pvc("default", "data-0")
    assert claim is not None
    meta = {**claim["metadata"], "annotations": {ANN_SELECTED_NODE: "a"}}
    api.update_pvc({**claim, "metadata": meta})
    assert api.provisioned == {} and set(api.store[PV]) == {"local-a"}
    assert (api.get_pvc("default", "data-0") or {})["metadata"]["annotations"] == {ANN_SELECTED_NODE: "a"}
    assert set(api.store[PVC]) == {"default/data-0", "default/data-1"}


def test_the_scenario_clock_only_moves_when_slept_on() -> None:
    clock = ScenarioClock(100.0)
    clock.sleep(1.5)
    clock.sleep(-3)
    assert clock.monotonic() == 101.5


# --- bad input ------------------------------------------------------------------------------------------
def _set(scenario: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    node = scenario
    for step in path[:-1]:
        node = node[step]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("objects", 1, "spec", "accessModes", 0), "RWO",
         'objects[1].spec.accessModes[0]="RWO": must be one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany'),
        (("objects", 1, "spec", "capacity", "storage"), "lots",
         'objects[1].spec.capacity.storage: invalid quantity "lots"'),
        (("objects", 1, "spec", "capacity"), _DELETE, "objects[1].spec.capacity.storage: required"),
        (("objects", 1, "spec", "claimRef"), "data-0", 'objects[1].spec.claimRef: expected an object'),
        (("objects", 1, "status", "phase"), "Free", 'objects[1].status.phase="Free": must be one of'),
        (("objects", 1, "spec", "nodeAffinity", "required", "nodeSelectorTerms", 0, "matchExpressions", 0,
          "operator"), "Is", 'objects[1].spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]'
         '.operator="Is": must be one of'),
        (("objects", 1, "metadata", "name"), _DELETE, "objects[1].metadata.name: required"),
        (("objects", 2, "spec", "resources", "requests", "storage"), "5 Gi",
         'objects[2].spec.resources.requests.storage: invalid quantity "5 Gi"'),
        (("objects", 2, "spec", "resources"), _DELETE,
         "objects[2].spec.resources.requests.storage: required"),
        (("objects", 2, "spec", "volumeName"), 7, "objects[2].spec.volumeName: expected a string, got 7"),
        (("objects", 2, "metadata", "resourceVersion"), 1,
         "objects[2].metadata.resourceVersion: expected a string, got 1"),
        (("objects", 3, "metadata", "name"), "data-0",
         "objects[3]: PersistentVolumeClaim default/data-0 given twice"),
        (("objects", 0, "volumeBindingMode"), "Later",
         'objects[0].volumeBindingMode="Later": must be one of Immediate, WaitForFirstConsumer'),
        (("objects", 0, "provisioner"), _DELETE, "objects[0].provisioner: required"),
        (("objects", 0, "allowedTopologies"), {"zone": "z1"},
         "objects[0].allowedTopologies: expected a list"),
    ],
)  # fmt: skip
def test_malformed_storage_objects_name_the_field_and_value(
    path: tuple[Any, ...], value: Any, needle: str
) -> None:
    scenario = _compete()
    _set(scenario, path, value)
    with pytest.raises(ValueError) as e:
        simulate_scenario(scenario)
    assert needle in str(e.value)


def test_api_server_defaults_are_applied() -> None:
    sc = check_storage_object("StorageClass", {"metadata": {"name": "s"}, "provisioner": "p"}, "o")
    assert sc["volumeBindingMode"] == "Immediate"
    claim = check_storage_object(
        "PersistentVolumeClaim",
        {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}},
        "o",
    )
    assert claim["metadata"]["namespace"] == "default"
