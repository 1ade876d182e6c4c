"""percentageOfNodesToScore in the configuration (docs/architecture.md#sampling-nodes): unset everywhere
means every node is filtered; the root value applies to every profile that does not set its own; a
profile's value wins; 0..100 integers only (the error names the field and value); no longer listed as
ignored; each profile's Framework gets its value."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.config import ConfigError, parse_config
from scheduler.registry import KNOWN, build_framework


def doc(version: str = "v1", **root: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"kubescheduler.config.k8s.io/{version}",
        "kind": "KubeSchedulerConfiguration",
        **root,
    }


def test_unset_means_every_node() -> None:
    for config in (parse_config(None, KNOWN), parse_config(doc(), KNOWN)):
        assert config.percentage_of_nodes_to_score is None
        assert [p.percentage_of_nodes_to_score for p in config.profiles] == [None]
        assert build_framework(config.profiles[0]).percentage is None


@pytest.mark.parametrize("version", ["v1beta1", "v1"])
def test_root_value_reaches_every_profile_unless_a_profile_sets_its_own(version: str) -> None:
    profiles = [{"schedulerName": "a"}, {"schedulerName": "b", "percentageOfNodesToScore": 100}]
    config = parse_config(doc(version, percentageOfNodesToScore=0, profiles=profiles), KNOWN)
    assert config.percentage_of_nodes_to_score == 0
    a, b = config.profile("a"), config.profile("b")
    assert a is not None and b is not None
    assert (a.percentage_of_nodes_to_score, b.percentage_of_nodes_to_score) == (0, 100)
    assert (build_framework(a).percentage, build_framework(b).percentage) == (0, 100)
    assert not any("percentageOfNodesToScore" in line for line in config.ignored)


def test_profile_value_without_a_root_value() -> None:
    profiles = [{"schedulerName": "a", "percentageOfNodesToScore": 30}, {"schedulerName": "b"}]
    config = parse_config(doc(profiles=profiles), KNOWN)
    assert [p.percentage_of_nodes_to_score for p in config.profiles] == [30, None]
    assert not any("percentageOfNodesToScore" in line for line in config.ignored)


@pytest.mark.parametrize(
    ("root", "message"),
    [
        ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore=101: must be an integer in 0..100"),
        ({"percentageOfNodesToScore": 50.5}, "percentageOfNodesToScore=50.5: must be an integer in 0..100"),
        ({"percentageOfNodesToScore": True}, "percentageOfNodesToScore=True: must be an integer in 0..100"),
        (
            {"profiles": [{"percentageOfNodesToScore": -1}]},
            "profiles[0].percentageOfNodesToScore=-1: must be an integer in 0..100",
        ),
        (
            {"profiles": [{"percentageOfNodesToScore": "50"}]},
            "profiles[0].percentageOfNodesToScore='50': must be an integer in 0..100",
        ),
    ],
)
def test_bad_values_name_the_field_and_value(root: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(doc(**root), KNOWN)
    assert str(e.value) == message
