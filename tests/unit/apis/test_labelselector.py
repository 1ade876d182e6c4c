"""metav1.LabelSelector parsing, validation and matching (apis/labelselector.py)."""

from __future__ import annotations

from typing import Any

import pytest

from apis.labelselector import LabelSelector, LabelSelectorError, Requirement, selector_matches


def sel(data: Any) -> LabelSelector:
    return LabelSelector.from_dict(data)


def test_nil_selector_matches_nothing_and_empty_matches_everything() -> None:
    assert not selector_matches(None, {})
    assert not selector_matches(None, {"a": "b"})
    empty = sel({})
    assert empty.is_empty()
    assert selector_matches(empty, {})
    assert selector_matches(empty, {"a": "b"})
    assert sel({"matchLabels": None, "matchExpressions": None}).is_empty()
    assert sel({"matchLabels": {}, "matchExpressions": []}).to_dict() == {}


def test_match_labels_all_required() -> None:
    s = sel({"matchLabels": {"pool": "a", "zone": "z1"}})
    assert s.matches({"pool": "a", "zone": "z1", "extra": "x"})
    assert not s.matches({"pool": "a"})
    assert not s.matches({"pool": "b", "zone": "z1"})


@pytest.mark.parametrize(
    ("expr", "labels", "expected"),
    [
        ({"key": "k", "operator": "In", "values": ["a", "b"]}, {"k": "a"}, True),
        ({"key": "k", "operator": "In", "values": ["a", "b"]}, {"k": "c"}, False),
        ({"key": "k", "operator": "In", "values": ["a"]}, {}, False),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "b"}, True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {}, True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, {"k": "a"}, False),
        ({"key": "k", "operator": "Exists"}, {"k": ""}, True),
        ({"key": "k", "operator": "Exists"}, {}, False),
        ({"key": "k", "operator": "DoesNotExist"}, {}, True),
        ({"key": "k", "operator": "DoesNotExist"}, {"k": "x"}, False),
    ],
)
def test_match_expressions(expr: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert sel({"matchExpressions": [expr]}).matches(labels) is expected


def test_labels_and_expressions_are_anded() -> None:
    s = sel(
        {
            "matchLabels": {"pool": "a"},
            "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
        }
    )
    assert s.matches({"pool": "a", "gpu": "1"})
    assert not s.matches({"pool": "a"})
    assert not s.matches({"gpu": "1"})


@pytest.mark.parametrize(
    ("data", "field", "type_error"),
    [
        ([], "", True),
        ({"matchLabels": ["a"]}, "matchLabels", True),
        ({"matchLabels": {"a": 1}}, "matchLabels[a]", True),
        ({"matchExpressions": {}}, "matchExpressions", True),
        ({"matchExpressions": [5]}, "matchExpressions[0]", True),
        ({"matchExpressions": [{"key": 1, "operator": "In"}]}, "matchExpressions[0].key", True),
        (
            {"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]},
            "matchExpressions[0].values",
            True,
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "in", "values": ["a"]}]},
            "matchExpressions[0].operator",
            False,
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]},
            "matchExpressions[0].operator",
            False,
        ),
        ({"matchExpressions": [{"key": "k", "operator": "In"}]}, "matchExpressions[0].values", False),
        (
            {"matchExpressions": [{"key": "k", "operator": "NotIn", "values": []}]},
            "matchExpressions[0].values",
            False,
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["a"]}]},
            "matchExpressions[0].values",
            False,
        ),
        (
            {"matchExpressions": [{"key": "k", "operator": "DoesNotExist", "values": ["a"]}]},
            "matchExpressions[0].values",
            False,
        ),
        ({"matchExpressions": [{"key": "", "operator": "Exists"}]}, "matchExpressions[0].key", False),
        ({"matchLabels": {"bad key": "v"}}, "matchLabels[bad key]", False),
        ({"matchLabels": {"k": "bad value!"}}, "matchLabels[k]", False),
        ({"matchLabels": {"Upper.Case/k": "v"}}, "matchLabels[Upper.Case/k]", False),
        ({"matchLabels": {"k": "v" * 64}}, "matchLabels[k]", False),
    ],
)
def test_invalid_selectors_name_the_field(data: Any, field: str, type_error: bool) -> None:
    with pytest.raises(LabelSelectorError) as info:
        sel(data)
    assert info.value.field == field
    assert info.value.type_error is type_error
    assert field in str(info.value) or field == ""


def test_error_message_names_operator_and_value() -> None:
    with pytest.raises(LabelSelectorError, match=r"matchExpressions\[0\]\.operator='Gt'"):
        sel({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]})


def test_valid_keys_and_values() -> None:
    s = sel(
        {
            "matchLabels": {"node.koordinator.sh/pool": "a-b_c.d", "k": ""},
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]}],
        }
    )
    assert s.matches({"node.koordinator.sh/pool": "a-b_c.d", "k": "", "kubernetes.io/hostname": "n2"})


def test_null_values_and_case_insensitive_keys_like_go() -> None:
    s = sel(
        {"MatchLabels": {"a": "b"}, "matchexpressions": [{"Key": "k", "OPERATOR": "Exists", "values": None}]}
    )
    assert s.match_labels == {"a": "b"}
    assert s.match_expressions == (Requirement("k", "Exists"),)
    assert sel({"matchLabels": {"a": None}}).match_labels == {"a": ""}


def test_round_trip_and_hash() -> None:
    data = {
        "matchLabels": {"pool": "a"},
        "matchExpressions": [
            {"key": "k", "operator": "In", "values": ["x", "y"]},
            {"key": "j", "operator": "DoesNotExist"},
        ],
    }
    s = sel(data)
    assert s.to_dict() == data
    assert sel(s.to_dict()) == s
    assert hash(s) == hash(sel(data))
