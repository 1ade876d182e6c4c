"""The quota core's units and Go helpers (docs/rules/scheduler-elasticquota.md#units): rounding away from
zero, no int64 saturation, LessThanOrEqual over the limit's names, printResourceList's exact text."""

from __future__ import annotations

from apis.quantity import Quantity
from scheduler.plugins.elasticquota import resources as r


def test_units_round_away_from_zero_without_saturation() -> None:
    assert r.to_int("cpu", Quantity.parse("1.0001")) == 1001
    assert r.to_int("cpu", Quantity.parse("-1.0001")) == -1001
    assert r.to_int("memory", Quantity.parse("1.5")) == 2
    assert r.to_int("cpu", Quantity.parse("1844674407370955161")) == 1844674407370955161000
    assert r.whole_value("cpu", 1) == 1 and r.whole_value("cpu", -1) == -1 and r.whole_value("cpu", 0) == 0


def test_less_than_or_equal_checks_the_limits_names_only() -> None:
    assert r.less_than_or_equal({"cpu": 5, "gpu": 100}, {"cpu": 5, "memory": 1}) == (True, [])
    assert r.less_than_or_equal({"memory": 2, "cpu": 6}, {"cpu": 5, "memory": 1}) == (
        False,
        ["cpu", "memory"],
    )
    assert r.less_than_or_equal({"cpu": 6}, {}) == (True, [])


def test_print_resource_list() -> None:
    assert r.print_resource_list({}) == "<empty>"
    text = r.print_resource_list({"memory": 1536 * 2**20, "cpu": 1500, "nvidia.com/gpu": 1000, "a": 0})
    assert text == "a:0,cpu:1500m,memory:1536Mi,nvidia.com/gpu:1k"
    assert r.print_resource_list({"memory": Quantity.parse("1G")}) == "memory:1G"  # as written
    assert r.go_list(["a", "b"]) == "[a b]" and r.go_list([]) == "[]"


def test_subtract_and_mask() -> None:
    assert r.subtract({"cpu": 1}, {"memory": 2}) == {"cpu": 1, "memory": -2}
    assert r.mask({"cpu": 1, "memory": 2}, {"cpu": 0}) == {"cpu": 1}
    assert r.limited({"cpu": 5, "gpu": 9}, {"cpu": 3}) == {"cpu": 3, "gpu": 9}
    assert r.to_json({"memory": 2**30, "cpu": 250}) == {"cpu": "250m", "memory": "1Gi"}
