"""manager.webhook.profile.mutate_pod edge cases the scenario files do not show: the input is never
modified, invalid profiles are skipped with a warning, the probability arithmetic and when the dice are
thrown, matching on the pod as it was, refusals (patch, quantities), and the mutated flag."""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from manager.webhook.profile import Mutation, ProfileError, mutate_pod, percent

PCS: dict[str, Mapping[str, Any]] = {"koord-batch": {"metadata": {"name": "koord-batch"}, "value": 5000}}


def pod(**spec: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    return {
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "job"}},
        "spec": {"containers": [{"name": "c", "resources": resources}], **spec},
    }


def profile(name: str = "p", annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


def mutate(p: dict[str, Any], *profiles: dict[str, Any], dice: int = 0, **kw: Any) -> Mutation:
    return mutate_pod(
        p,
        operation=kw.pop("operation", "CREATE"),
        profiles=list(profiles),
        namespace_labels=kw.pop("namespace_labels", {}),
        priority_classes=kw.pop("priority_classes", PCS),
        rand_intn=lambda n: dice,
        **kw,
    )


def test_input_is_never_modified_and_the_result_is_new() -> None:
    original = pod(priority=5000)
    before = copy.deepcopy(original)
    result = mutate(
        original, profile(labels={"x": "y"}, patch={"spec": {"containers": [{"name": "c", "image": "i"}]}})
    )
    assert original == before
    assert result.pod["spec"]["containers"][0]["resources"]["requests"] == {
        "kubernetes.io/batch-cpu": "1k",
        "kubernetes.io/batch-memory": "1Gi",
    }
    unchanged = mutate(original, operation="UPDATE")
    assert unchanged.pod == original and unchanged.pod is not original
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.mutated = False  # type: ignore[misc]


def test_invalid_profiles_are_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="manager.webhook.profile"):
        result = mutate(
            pod(),
            profile("bad", qosClass="GOLD"),
            profile("good", labels={"x": "y"}),
            "junk",
            {"metadata": []},
        )  # type: ignore[arg-type]
    assert result.pod["metadata"]["labels"] == {"app": "job", "x": "y"}
    assert "'bad'" in caplog.text and "spec.qosClass" in caplog.text
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 3
    only_bad = mutate(pod(priority=5000), profile("bad", labels={"x": 1}))
    assert only_bad == Mutation(False, pod(priority=5000))


@pytest.mark.parametrize(
    ("probability", "expected"),
    [
        (None, 100),
        (0, 0),
        (50, 50),
        (150, 150),
        (-5, -5),
        ("50%", 50),
        ("+7%", 7),
        ("-5%", -5),
        ("0%", 0),
        ("250%", 250),
    ],
)
def test_percent(probability: int | str | None, expected: int) -> None:
    assert percent(probability) == expected


@pytest.mark.parametrize(
    ("probability", "message"),
    [
        ("50", "string is not a percentage"),
        ("abc", "string is not a percentage"),
        ("5.5%", 'invalid value "5.5%": strconv.Atoi: parsing "5.5": invalid syntax'),
        ("50%%", 'parsing "50%": invalid syntax'),
        ("%", 'parsing "": invalid syntax'),
        (" 5%", "invalid syntax"),
        ("99999999999999999999%", "value out of range"),
    ],
)
def test_probability_strings_that_refuse(probability: str, message: str) -> None:
    assert percent.__name__ == "percent"
    with pytest.raises(ProfileError, match="invalid value for IntOrString") as info:
        mutate(pod(), profile(probability=probability, labels={"x": "y"}))
    assert message in str(info.value)


def test_dice_are_thrown_only_between_0_and_100() -> None:
    calls: list[int] = []

    def dice(n: int) -> int:
        calls.append(n)
        return 99

    for probability in (None, 100, "100%", 0, "0%"):
        mutate_pod(
            pod(),
            operation="CREATE",
            profiles=[profile(probability=probability)],
            namespace_labels={},
            priority_classes={},
            rand_intn=dice,
        )
    assert calls == []
    result = mutate_pod(
        pod(), operation="CREATE", profiles=[profile(probability=99, labels={"x": "y"})], namespace_labels={},
        priority_classes={}, rand_intn=dice,
    )  # fmt: skip
    assert calls == [100] and result.mutated  # 99 > 99 is false: applied
    assert mutate(pod(), profile(probability=150, labels={"x": "y"}), dice=99).mutated  # 99 > 150 is false
    assert not mutate(pod(), profile(probability=-5, labels={"x": "y"}), dice=0).mutated  # 0 > -5: skipped


def test_profiles_match_the_pod_as_it_was() -> None:
    first = profile("a", labels={"stage": "two"})
    second = profile("b", selector={"matchLabels": {"stage": "two"}}, labels={"second": "ran"})
    labels = mutate(pod(), first, second).pod["metadata"]["labels"]
    assert labels == {"app": "job", "stage": "two"}


def test_namespace_selector_with_unreadable_namespace() -> None:
    selective = profile(namespaceSelector={"matchLabels": {"team": "a"}}, labels={"x": "y"})
    assert mutate(pod(), selective, namespace_labels=None).mutated
    assert not mutate(pod(), selective, namespace_labels={"team": "b"}).mutated
    assert mutate(pod(), selective, namespace_labels={"team": "a"}).mutated


def test_one_skip_annotation_stops_the_rewrite_for_all() -> None:
    skip = profile("a", annotations={"config.koordinator.sh/skip-update-resources": ""})
    batch = profile("b", priorityClassName="koord-batch")
    out = mutate(pod(), skip, batch).pod
    assert out["spec"]["priority"] == 5000
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}


def test_mutated_only_when_something_was_applied_or_rewritten() -> None:
    assert not mutate(pod(), profile(probability=0)).mutated  # koord-prod pod: nothing to rewrite
    assert mutate(pod(priority=5000), profile(probability=0)).mutated  # rewrite of a koord-batch pod
    assert mutate(pod(), profile()).mutated  # an applied profile counts even if it writes nothing


def test_absent_maps_are_created_only_when_written() -> None:
    bare: dict[str, Any] = {"metadata": {"name": "p", "labels": None}, "spec": {"containers": []}}
    out = mutate(bare, profile(labelSuffixes={"a": "-x"}, labels={})).pod
    assert out == bare
    out = mutate(bare, profile(labelKeysMapping={"a": "b"}, schedulerName="s")).pod
    assert out["metadata"]["labels"] == {"b": ""} and out["spec"]["schedulerName"] == "s"
    out = mutate({"metadata": {"name": "p"}}, profile(priorityClassName="koord-batch")).pod
    assert out["spec"] == {"priorityClassName": "koord-batch", "priority": 5000}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ([{"op": "add"}], "invalid JSON document"),
        ({"metadata": {"labels": {"a": 1}}}, "metadata.labels: must be an object of strings"),
        ({"metadata": []}, "metadata: must be an object"),
        ({"spec": {"containers": [{"image": "x"}]}}, "does not contain declared merge key: name"),
    ],
)
def test_patch_that_cannot_be_applied_refuses(patch: Any, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        mutate(pod(), profile(patch=patch))


def test_patch_directive_keys_do_not_reach_the_pod() -> None:
    retain = ["containers", "nodeSelector", "$unknown"]
    patch = {"spec": {"$retainKeys": retain, "nodeSelector": {"a": "b"}, "$unknown": 1}}
    out = mutate(pod(), profile(patch=patch)).pod
    assert out["spec"] == {**pod()["spec"], "nodeSelector": {"a": "b"}}


@pytest.mark.parametrize(
    ("resources", "path"),
    [
        ({"requests": {"cpu": "lots"}}, "spec.containers[0].resources.requests.cpu"),
        ({"limits": {"memory": [1]}}, "spec.containers[0].resources.limits.memory"),
    ],
)
def test_malformed_quantity_refuses_naming_the_field(resources: dict[str, Any], path: str) -> None:
    p = pod(priority=5000)
    p["spec"]["containers"][0]["resources"] = resources
    with pytest.raises(ProfileError, match=path.replace("[", r"\[").replace("]", r"\]")):
        mutate(p, profile(labels={"x": "y"}))


def test_a_pod_the_api_would_not_decode_refuses() -> None:
    with pytest.raises(ProfileError, match=r"metadata\.labels"):
        mutate({"metadata": {"labels": {"a": 1}}}, profile())


def test_preemption_policy_of_the_class_is_copied() -> None:
    pcs = {"x": {"value": 10, "preemptionPolicy": "Never"}}
    out = mutate(pod(), profile(priorityClassName="x"), priority_classes=pcs).pod
    assert (out["spec"]["priority"], out["spec"]["preemptionPolicy"]) == (10, "Never")
    with pytest.raises(ProfileError, match="not an int32"):
        mutate(pod(), profile(priorityClassName="x"), priority_classes={"x": {"value": "10"}})
