"""apis.gojson / apis.gojson_kinds: the kinds NodeMetric added (time, enum, free-form objects, always-
written ints and strings, non-nullable lists and maps), the Go zero value and the CRD generator."""

# ruff: noqa: RUF009  -- jf() returns a dataclasses.field() with a default or default_factory
from __future__ import annotations

import enum
import importlib.util
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from apis.duration import Duration
from apis.gojson import GoStruct, StructKind, decode_into, go_zero, jf, struct_openapi
from apis.gojson_base import DecodeError, FieldError
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import DurationKind, EnumKind, IntKind, ObjectKind, QuantityKind, StrKind, TimeKind
from apis.quantity import Quantity
from apis.rfc3339 import format_rfc3339, parse_rfc3339

REPO = Path(__file__).resolve().parents[3]


class Color(enum.StrEnum):
    RED = "red"
    BLUE = "blue"
    NONE = ""


@dataclass
class Inner(GoStruct):
    n: int = jf("n", IntKind(32, pointer=False), required=True)


@dataclass
class Doc(GoStruct):
    when: datetime | None = jf("when", TimeKind())
    color: Color = jf("color", EnumKind(Color))
    mode: Color | None = jf("mode", EnumKind(Color, pointer=True))
    word: str = jf("word", StrKind(nullable=False))
    meta: dict[str, Any] = jf("meta", ObjectKind(pointer=False))
    blobs: list[dict[str, Any]] | None = jf(
        "blobs", ListKind(ObjectKind(), keep_empty=True, null_items=False)
    )
    items: list[Inner] = jf("items", ListKind(StructKind(Inner, pointer=False), nullable=False))
    usage: dict[Color, Quantity] = jf(
        "usage", MapKind(QuantityKind(), keys=Color, nullable=False, dotted=True)
    )
    inner: Inner = jf("inner", StructKind(Inner, pointer=False))
    opt: Inner | None = jf("opt", StructKind(Inner), default_factory=Inner)
    span: Duration = jf("span", DurationKind(null_ok=True))


def _errors(raw: dict[str, Any]) -> list[FieldError]:
    with pytest.raises(DecodeError) as info:
        Doc.from_dict(raw)
    return info.value.errors


def test_zero_value_and_always_written_fields() -> None:
    doc = Doc()
    assert doc.opt == Inner()  # the constructor default ...
    assert go_zero(Doc).opt is None  # ... is not what Go decodes into
    assert Doc.from_dict({}).opt is None
    assert doc.to_dict() == {"meta": {}, "inner": {"n": 0}, "opt": {"n": 0}, "span": "0s"}
    assert Doc.from_dict({}).to_dict() == {"meta": {}, "inner": {"n": 0}, "span": "0s"}
    assert (doc.word, doc.items, doc.usage, doc.color) == ("", [], {}, Color.NONE)


def test_round_trip_and_go_forms() -> None:
    raw: dict[str, Any] = {
        "when": "2026-11-22T10:16:47.5+08:00",
        "color": "red",
        "mode": "blue",
        "word": "w",
        "meta": {"a": [1, {"b": None}]},
        "blobs": [{"x": 1}],
        "items": [{"n": 1}, {}],
        "usage": {"red": 1500, "blue": "2Gi"},
        "span": "90s",
    }
    doc = Doc.from_dict(raw)
    assert doc.when == datetime(2026, 11, 22, 2, 16, 47, 500000, tzinfo=UTC)
    assert doc.color is Color.RED and doc.mode is Color.BLUE
    assert list(doc.usage) == [Color.RED, Color.BLUE]
    out = doc.to_dict()
    assert out["when"] == "2026-11-22T02:16:47Z"
    assert list(out["usage"]) == ["blue", "red"]  # Go's sorted map keys
    assert out["usage"] == {"blue": "2Gi", "red": "1500"}
    assert out["items"] == [{"n": 1}, {"n": 0}]
    assert out["span"] == "1m30s"
    raw["meta"]["a"][1]["b"] = 2
    assert doc.meta == {"a": [1, {"b": None}]}  # deep-copied
    # nulls: pointers reset, non-pointers keep their value, non-nullable containers become empty
    nulls = {"when": None, "mode": None, "color": None, "items": None, "span": None, "meta": None}
    again, errs = decode_into(doc, nulls)
    assert errs == [] and again.meta == doc.meta
    assert again.when is None and again.mode is None and again.color is Color.RED
    assert again.items == [] and again.span == Duration.parse("90s")
    # an empty list stays apart from an absent one when keep_empty is set
    assert Doc.from_dict({"blobs": []}).blobs == []
    assert Doc.from_dict({}).blobs is None


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ({"when": "2026-11-22 02:16:47"}, "when"),
        ({"when": "2026-02-30T00:00:00Z"}, "when"),
        ({"when": 12}, "when"),
        ({"color": "green"}, "color"),
        ({"mode": 1}, "mode"),
        ({"meta": []}, "meta"),
        ({"blobs": [None]}, "blobs[0]"),
        ({"blobs": [1]}, "blobs[0]"),
        ({"usage": {"green": "1"}}, "usage"),
        ({"usage": {"red": "x"}}, "usage.red"),
        ({"items": [{"n": 2**31}]}, "items[0].n"),
        ({"word": 3}, "word"),
    ],
)
def test_bad_values_name_the_path(raw: dict[str, Any], path: str) -> None:
    (err,) = _errors(raw)
    assert err.path == path


def test_time_format_rules() -> None:
    assert format_rfc3339(datetime(999, 1, 2, 3, 4, 5, 999999, tzinfo=UTC)) == "0999-01-02T03:04:05Z"
    assert format_rfc3339(datetime(2026, 1, 1, 8, tzinfo=timezone(timedelta(hours=8)))) == (
        "2026-01-01T00:00:00Z"
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        format_rfc3339(datetime(2026, 1, 1))
    assert parse_rfc3339("0999-01-02t03:04:05.1234567-01:30") == datetime(
        999, 1, 2, 4, 34, 5, 123456, tzinfo=UTC
    )
    for bad in ("2026-11-22T02:16:47", "2026-11-22T02:16:47+0800", "2026-11-22T24:00:00Z", None):
        with pytest.raises(ValueError):
            parse_rfc3339(bad)


def test_openapi_of_the_new_kinds() -> None:
    schema = struct_openapi(Doc)
    props = schema["properties"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["color"] == {"type": "string", "enum": ["red", "blue", ""]}
    assert props["meta"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert props["items"]["items"]["required"] == ["n"]
    assert props["usage"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert "pattern" in props["usage"]["additionalProperties"]


def test_committed_crds_equal_a_fresh_generation() -> None:
    spec = importlib.util.spec_from_file_location("gen_crds", REPO / "hack" / "gen_crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.check() == []
