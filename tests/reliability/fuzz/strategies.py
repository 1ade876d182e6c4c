"""Hypothesis strategies shared by the fuzz tests (tests/reliability/fuzz) and `bench/fuzz.py`: JSON values
and JSON texts (nested far beyond any parser's recursion limit too), documents shaped by the
`apis.gojson` field specs of a typed dataclass (mostly well-typed, often out of range, sometimes of the
wrong JSON type), quantity texts, `slo-controller-config` data, and pods and nodes carrying every
annotation and label the daemons parse.

Inputs come in three grades on purpose: well-formed ones reach deep into a parser, near-misses (a
bound off by one, a wrong suffix, a reversed range) hit its checks, and garbage (wrong types, broken
or deeply nested JSON) hits its error handling.
Imports: hypothesis, the standard library, apis (test code).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from typing import Any

from hypothesis import strategies as st

from apis import constants as c
from apis.gojson import SPEC_KEY, FieldSpec, StructKind
from apis.gojson_base import Kind
from apis.gojson_collections import ListKind, MapKind
from apis.gojson_kinds import (
    BoolKind,
    DurationKind,
    EnumKind,
    FloatKind,
    IntKind,
    IntOrStrKind,
    QuantityKind,
    SelectorKind,
    StrKind,
    TimeKind,
)
from apis.quantity import Quantity, QuantityError
from apis.sloconfig_merge import KEY_DOCUMENTS

Strategy = st.SearchStrategy[Any]

# --- JSON --------------------------------------------------------------------------------------------
INT_EDGES = (0, 1, -1, 2**31 - 1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64, 10**30)
FLOAT_EDGES = (0.0, -0.0, 0.5, 1.5, 100.0, 1e-9, 5e-324, 1e308, -1e308, 0.1 + 0.2)
STR_EDGES = (
    "", "0", "-1", "1e3", "1e9999999", "500m", "1Gi", "true", "null", "NaN", "Infinity", " 1", "0x10",
    "\x00", "\u0661", "\U0001f600", "5m", "-1s", "BE", "LS", "koord-batch",
)  # fmt: skip
KEYS = (
    "a", "cpu", "memory", "resources", "requests", "limits", "policy", "enable", "name", "priority",
    c.BATCH_CPU, c.BATCH_MEMORY, "Object", "",
)  # fmt: skip

ints: Strategy = st.integers(-1000, 100_000) | st.integers(-(2**70), 2**70) | st.sampled_from(INT_EDGES)
floats: Strategy = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(FLOAT_EDGES)
short_text: Strategy = (
    st.text(max_size=10) | st.sampled_from(STR_EDGES) | st.integers(60, 400).map(lambda n: "a" * n)
)
scalars: Strategy = st.none() | st.booleans() | ints | floats | short_text


def json_values(keys: Strategy | None = None, max_leaves: int = 12) -> Strategy:
    """Arbitrary JSON (as Python values) with object keys from ``keys`` or a small vocabulary."""
    names = (st.sampled_from(KEYS) | st.text(max_size=5)) if keys is None else keys
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
        max_leaves=max_leaves,
    )


json_any: Strategy = json_values()


@st.composite
def deep_json_text(draw: st.DrawFn) -> str:
    """JSON nested 30 to 3,000 levels deep (the standard library's parser gives up near 1,000), whole,
    unclosed, or as the value of a field of an otherwise plain object."""
    depth = draw(st.integers(30, 3000) | st.sampled_from((990, 1000, 1001)))
    opener = draw(st.sampled_from(("[", '{"a":', '{"resources":', '{"cpu":')))
    closer = "]" if opener == "[" else "}"
    inner = opener * depth + "1" + closer * depth
    shape = draw(st.sampled_from(("whole", "unclosed", "field")))
    if shape == "unclosed":
        return opener * depth
    if shape == "field":
        return '{"policy": "auto", "x": ' + inner + "}"
    return inner


@st.composite
def mangled(draw: st.DrawFn, text: str) -> str:
    """``text`` cut short or with a few characters replaced (broken JSON near a valid one)."""
    if not text:
        return text
    i = draw(st.integers(0, len(text) - 1))
    if draw(st.booleans()):
        return text[:i]
    return text[:i] + draw(st.text(min_size=1, max_size=3)) + text[i + 1 :]


def json_text(values: Strategy) -> Strategy:
    """JSON text of ``values``, mostly as written, sometimes broken, deeply nested or not JSON at all
    (lone surrogates only as JSON escapes: no Kubernetes object holds one as text)."""
    dumped = values.map(json.dumps)
    return st.one_of(
        dumped,
        dumped,
        dumped,
        dumped.flatmap(mangled),
        deep_json_text(),
        json_any.map(json.dumps),
        short_text,
        st.sampled_from(('"\\ud800"', '{"a": "\\udc00x"}', "\ufeff{}", "{} {}", "[1,]")),
    )


# --- quantities --------------------------------------------------------------------------------------
SUFFIXES = (
    "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    "e3", "E-3", "e+308", "e-999999999", "e9223372036854775808", "e2147483648", "i", "K", "ki", "e", "E+",
)  # fmt: skip
DIGITS = "0123456789"


@st.composite
def quantity_grammar(draw: st.DrawFn) -> str:
    sign = draw(st.sampled_from(("", "", "+", "-")))
    whole = draw(st.text(DIGITS, max_size=25))
    fraction = draw(st.none() | st.text(DIGITS, max_size=12))
    suffix = draw(st.sampled_from(SUFFIXES) | st.from_regex(r"[eE][+-]?[0-9]{1,22}", fullmatch=True))
    return sign + whole + ("" if fraction is None else "." + fraction) + suffix


quantity_texts: Strategy = st.one_of(
    quantity_grammar(),
    quantity_grammar(),
    st.sampled_from(("500m", "1", "2", "4Gi", "100Mi", "1.5", "0", "1e3", "9223372036854775807")),
    st.text(alphabet=DIGITS + ".+-eEKMGTPEimnuk \t", max_size=30),
    short_text,
)
quantity_json: Strategy = quantity_texts | ints | floats | st.none() | st.booleans()
"""What a JSON document may hold where a quantity belongs."""


def _canonical(text: str) -> str:
    try:
        return str(Quantity.parse(text))
    except QuantityError:
        return "1"


canonical_quantities: Strategy = quantity_grammar().map(_canonical) | st.sampled_from(
    ("0", "500m", "4Gi", "2")
)
"""Quantities as an API server hands them over: valid, in canonical form (it validates and rewrites them)."""

# --- documents shaped by apis.gojson field specs -------------------------------------------------------
DURATIONS = ("5m", "1h30m", "300s", "0", "-1s", "1.5h", "bad", "9223372036854775807ns", "1e3s")
TIMES = ("2026-11-22T02:16:47Z", "2026-11-22T02:16:47.123456789+05:30", "0001-01-01T00:00:00Z", "bad")
STRINGS = ("", "x", "usage", "request", "static", "auto", "none", "cfsQuota", "cpuset", "LS", "BE")
SELECTORS: tuple[dict[str, Any], ...] = (
    {},
    {"matchLabels": {"pool": "a"}},
    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a", "b"]}]},
    {"matchExpressions": [{"key": "pool", "operator": "Bad"}]},
    {"matchLabels": {"bad key!": "x"}},
)


def _int_range(kind: IntKind, wrong: bool) -> Strategy:
    bound = 1 << (kind.bits - 1)
    edges = (bound - 1, -bound, 0, 100, 101, -1, *((bound, -bound - 1) if wrong else ()))
    return st.integers(-30, 12_000) | st.sampled_from(edges)


def _typed(spec: FieldSpec | None, kind: Kind, wrong: bool) -> Strategy:
    if spec is not None and spec.enum:
        return st.sampled_from([*spec.enum, "", "bogus"])
    if isinstance(kind, BoolKind):
        return st.booleans()
    if isinstance(kind, IntKind):
        return _int_range(kind, wrong)
    if isinstance(kind, FloatKind):
        return st.floats(min_value=-1, max_value=5) | st.sampled_from(FLOAT_EDGES)
    if isinstance(kind, EnumKind):
        return st.sampled_from([*kind.values, "", "bogus"])
    if isinstance(kind, StrKind):
        return st.sampled_from(STRINGS) | short_text
    if isinstance(kind, QuantityKind):
        return quantity_json if wrong else canonical_quantities
    if isinstance(kind, IntOrStrKind):
        return st.integers(-5, 120) | st.sampled_from(("50%", "50M", "x", "-1", "101%"))
    if isinstance(kind, DurationKind):
        return (st.sampled_from(DURATIONS) | short_text) if wrong else st.sampled_from(DURATIONS[:5])
    if isinstance(kind, TimeKind):
        return (st.sampled_from(TIMES) | short_text) if wrong else st.sampled_from(TIMES[:3])
    if isinstance(kind, ListKind):
        return st.lists(value_for(None, kind.elem, wrong), max_size=3)
    if isinstance(kind, MapKind):
        names = st.sampled_from(("a", "b", "cpu", "memory", c.BATCH_CPU, "avg", "p99")) | short_text
        return st.dictionaries(names, value_for(None, kind.elem, wrong), max_size=3)
    if isinstance(kind, StructKind):
        cls: Any = kind.cls
        return st.deferred(lambda: _gojson_doc(cls, wrong))
    if isinstance(kind, SelectorKind):
        return st.sampled_from(SELECTORS).map(copy.deepcopy)
    return json_values(max_leaves=6)  # AnyKind, ObjectKind, ExtensionsKind: free-form JSON


def value_for(spec: FieldSpec | None, kind: Kind, wrong: bool = True) -> Strategy:
    """Well-typed JSON for a field (often out of range); with ``wrong``, sometimes of another JSON type."""
    typed = _typed(spec, kind, wrong)
    return st.one_of(typed, typed, typed, json_values(max_leaves=4)) if wrong else typed


def gojson_doc(cls: type[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object for the typed dataclass ``cls``: any subset of its fields (inline ones at the same
    level, as Go embeds them), some names in another letter case (Go matches names case-insensitively),
    plus an unknown field now and then. Half of the documents hold well-typed values only (often out of
    range: what is repaired field by field), half a value of the wrong JSON type now and then (what
    rejects a document whole)."""
    key: Any = cls  # classes are hashable; typeshed's type[Any] does not say so
    return _gojson_doc(key, False) | _gojson_doc(key, True)


@functools.cache
def _gojson_doc(cls: Any, wrong: bool) -> st.SearchStrategy[dict[str, Any]]:
    fields: dict[str, Strategy] = {}
    for f in dataclasses.fields(cls):
        spec: FieldSpec = f.metadata[SPEC_KEY]
        if spec.inline:
            assert isinstance(spec.kind, StructKind)
            inner: Any = spec.kind.cls
            fields["\x00inline:" + inner.__qualname__] = _gojson_doc(inner, wrong)
        else:
            fields[spec.name] = value_for(spec, spec.kind, wrong)
    fields["unknownField"] = json_values(max_leaves=3)
    return st.fixed_dictionaries({}, optional=fields).flatmap(_flatten_inline)


def _flatten_inline(doc: dict[str, Any]) -> Strategy:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key.startswith("\x00inline:"):
            out.update(value)
        else:
            out[key] = value
    if not out:
        return st.just(out)
    return st.lists(st.sampled_from(sorted(out)), max_size=2, unique=True).map(
        lambda upper: {(k.upper() if k in upper else k): v for k, v in out.items()}
    )


def slo_key_documents() -> dict[str, Strategy]:
    """Per known ``slo-controller-config`` key: its document's JSON text (``json_text``) or an empty one."""
    empty = st.sampled_from(("", "{}", "null"))
    docs = {key: gojson_doc(cls) for key, cls in KEY_DOCUMENTS.items()}
    return {key: doc.map(json.dumps) | json_text(doc) | empty for key, doc in docs.items()}
