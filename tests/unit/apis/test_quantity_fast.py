"""apis.quantity's shortcut for the forms reporters write (``_parse_canonical``): it reads exactly the texts
it claims, and reads them as the general parser (``_parse_general``) does.

Expected values are worked out by hand from Go's suffix tables (notation: (m, e) means m * 10**e, m free of
trailing zeros; 2^63-1 = 9223372036854775807 is the cap, docs/upstream.md#quantity-limits).
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from apis import _quantity_format, quantity
from apis.quantity import Format, Quantity

DSI, BSI = Format.DECIMAL_SI, Format.BINARY_SI
CAP = 9223372036854775807
SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
NOT_SUFFIXES = ["i", "mi", "K", "ki", "KI", "e3", "E3", "e", "Kib", " ", "m ", "\n"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1234m", (1234, -3, DSI)),  # 1.234
        ("1000m", (1, 0, DSI)),  # trailing zeros move into the exponent
        ("8589934592", (8589934592, 0, DSI)),  # bytes, as a koordlet writes memory
        ("120000", (12, 4, DSI)),
        ("512Mi", (536870912, 0, BSI)),  # 512 * 2^20
        ("1Ki", (1024, 0, BSI)),
        ("3k", (3, 3, DSI)),
        ("7n", (7, -9, DSI)),
        ("250u", (25, -5, DSI)),
        ("0", (0, 0, DSI)),
        ("0m", (0, 0, DSI)),
        ("0Ki", (0, 0, BSI)),  # zero keeps its suffix's format, as the general parser
        ("007", (7, 0, DSI)),  # leading zeros are digits like any
        ("999999999999999999", (999999999999999999, 0, DSI)),  # 18 digits: the longest taken
        ("9223372036854775807E", (CAP, 0, DSI)),  # 19 digits: not taken (checked below), same value
        ("10E", (CAP, 0, DSI)),  # 10^19 > 2^63-1: capped
        ("9E", (9, 18, DSI)),  # 9 * 10^18 < 2^63-1: exact
        ("8Ei", (CAP, 0, BSI)),  # 8 * 2^60 = 2^63: capped
        ("7Ei", (8070450532247928832, 0, BSI)),  # 7 * 2^60
    ],
)
def test_canonical_values(text: str, expected: tuple[int, int, Format]) -> None:
    assert quantity._parse_general(text) == expected
    fast = quantity._parse_canonical(text)
    assert fast == (expected if len(text.rstrip("numkMGTPEi")) <= 18 else None)


@pytest.mark.parametrize(
    "text",
    ["", "m", "Ki", "+1", "-1", "1.5", ".5", "1e3", "1E3", "1mi", "1i", "1K", " 1", "1 ", "1\n", "١٢٣",
     "1٢", "²", "1234567890123456789", "0x10", "1_000"],
)  # fmt: skip
def test_other_texts_go_to_the_general_parser(text: str) -> None:
    assert quantity._parse_canonical(text) is None


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet="0123456789", min_size=1, max_size=18) | st.integers(0, 10**18 - 1).map(str),
    st.sampled_from(SUFFIXES),
)
def test_shortcut_reads_every_canonical_text_as_the_general_parser(digits: str, suffix: str) -> None:
    text = digits + suffix
    assert quantity._parse_canonical(text) == quantity._parse_general(text)


def _parse_general_or_error(text: str) -> tuple[int, int, Format] | str:
    try:
        return quantity._parse_general(text)
    except quantity.QuantityError as e:
        return str(e)


canonicalish = st.builds(
    lambda sign, digits, suffix: sign + digits + suffix,
    st.sampled_from(["", "", "", "+", "-"]),
    st.text(alphabet="0123456789", min_size=0, max_size=21) | st.text(min_size=0, max_size=3),
    st.sampled_from(SUFFIXES + NOT_SUFFIXES),
)


@settings(max_examples=60, deadline=None)
@given(canonicalish | st.text(alphabet="0123456789mkMGTPEiKnu.+-eE ", max_size=22))
@example("18446744073709551615")  # 20 digits
@example("999999999999999999Ei")
@example("000000000000000000Ki")
def test_shortcut_agrees_with_the_general_parser(text: str) -> None:
    fast = quantity._parse_canonical(text)
    digits = text.removesuffix("i")[:-1] if text.endswith("i") else text.rstrip("numkMGTPE")
    shaped = (
        0 < len(digits) <= 18 and digits.isascii() and digits.isdigit() and text[len(digits) :] in SUFFIXES
    )
    assert (fast is not None) == shaped, text  # it takes exactly the canonical shapes...
    if fast is not None:
        assert fast == _parse_general_or_error(text)  # ...and reads them as the general parser
    # Every way in gives the general parser's value and format (from_json trims Go's spaces first).
    for parse, given_text in (
        (Quantity.parse, text),
        (Quantity, text),
        (Quantity.from_json, text.strip(quantity._GO_SPACE)),
    ):
        expected = _parse_general_or_error(given_text)
        try:
            q = parse(text)
        except quantity.QuantityError as e:
            assert str(e) == expected
        else:
            assert (q._m, q._e, q.format) == expected


# --- value() / milli_value(): the whole-number shortcut ----------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("1234m", 2, 1234),  # 1.234 rounds away from zero to 2
        ("-1234m", -2, -1234),
        ("3006477107", 3006477107, 3006477107000),
        ("9223372036854775807", CAP, CAP),  # milli saturates
        ("-9223372036854775807", -CAP, -CAP),
        ("9E", 9 * 10**18, CAP),
        ("1n", 1, 1),  # rounds up at both scales
        ("0", 0, 0),
    ],
)
def test_values(text: str, value: int, milli: int) -> None:
    q = Quantity(text)
    assert (q.value(), q.milli_value()) == (value, milli)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(-(2**70), 2**70) | st.integers(-(10**6), 10**6),
    st.integers(-12, 22),
    st.sampled_from([0, -3]),
)
def test_to_scale_rounds_away_from_zero_and_saturates(m: int, e: int, scale: int) -> None:
    """Its whole-number shortcut included: the exact value at that scale, rounded away from zero,
    saturated at +-(2^63-1)."""
    exact = Fraction(m) * Fraction(10) ** (e - scale)
    magnitude = math.ceil(abs(exact))
    want = (1 if exact > 0 else -1) * min(magnitude, _quantity_format.INT64_MAX) if exact else 0
    assert _quantity_format.to_scale(m, e, scale) == want
