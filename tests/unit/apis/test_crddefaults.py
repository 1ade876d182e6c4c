"""Structural defaulting as the API server does it: defaults fill missing properties of present
objects only, through maps and lists, and never change given values."""

from __future__ import annotations

from typing import Any

from apis.crddefaults import nodeslo_spec_with_defaults, with_defaults

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "default": 1},
        "obj": {
            "type": "object",
            "properties": {"b": {"type": "string", "default": "x"}, "c": {"type": "integer"}},
        },
        "list": {
            "type": "array",
            "items": {"type": "object", "properties": {"d": {"type": "boolean", "default": True}}},
        },
        "map": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"e": {"default": 0}}},
        },
    },
}


def test_defaults_fill_missing_properties_of_present_objects() -> None:
    assert with_defaults({}, SCHEMA) == {"a": 1}
    assert with_defaults({"a": 5, "obj": {}}, SCHEMA) == {"a": 5, "obj": {"b": "x"}}
    assert with_defaults({"list": [{}, {"d": False}]}, SCHEMA)["list"] == [{"d": True}, {"d": False}]
    assert with_defaults({"map": {"k": {}}}, SCHEMA)["map"] == {"k": {"e": 0}}
    assert with_defaults({"obj": {"b": "y", "c": 2}}, SCHEMA)["obj"] == {"b": "y", "c": 2}


def test_input_is_not_modified() -> None:
    value: dict[str, Any] = {"obj": {}}
    with_defaults(value, SCHEMA)
    assert value == {"obj": {}}


def test_nodeslo_network_qos_defaults() -> None:
    spec = {"resourceQOSStrategy": {"beClass": {"networkQOS": {"enable": True}}}}
    got = nodeslo_spec_with_defaults(spec)["resourceQOSStrategy"]["beClass"]["networkQOS"]
    assert got == {
        "enable": True,
        "ingressRequest": 0,
        "ingressLimit": 100,
        "egressRequest": 0,
        "egressLimit": 100,
    }
    assert nodeslo_spec_with_defaults({}) == {}
