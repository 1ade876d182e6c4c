"""Quantity limits (docs/upstream.md#quantity-limits): every parsed quantity is capped at 2^63-1 in every
format, so any text the API server accepts (exponents up to int64, wrapped to int32 as Go does; mantissas
of any length) parses in time linear in its length and costs microseconds in arithmetic; and quantities
survive ``str()`` → parse round trips."""

from __future__ import annotations

import math
import time
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from apis.quantity import Format, Quantity

MAX = 2**63 - 1

# Texts that cost seconds to hours before the cap: exact values with millions of digits.
ADVERSARIAL = [
    "1e9999999",
    "1e999999999",
    "1e2147483647",  # the largest int32 exponent
    "-1e2147483647",
    "1e-2147483648",
    "1e9223372036854775807",  # int64 exponent, wrapped to int32 (-1): 100m
    "1E9223372036854775807",
    "9" * 100_000,
    "0." + "0" * 100_000 + "1",
    "1." + "7" * 100_000 + "Ki",
    "0." + "9" * 100_000 + "Ei",
    "123456789" * 10_000 + "e-90000",
]


def test_the_reported_sum_is_instant_and_exact() -> None:
    start = time.perf_counter()
    total = Quantity.parse("1e9999999") + Quantity.parse("100m")
    assert str(total) == "9223372036854775807100e-3"  # the left operand's format
    assert time.perf_counter() - start < 0.05  # was minutes: 10**9999999 built digit by digit


def test_adversarial_texts_cost_microseconds_per_operation() -> None:
    small = Quantity.parse("100m")
    start = time.perf_counter()
    for text in ADVERSARIAL:
        q = Quantity.parse(text)
        assert abs(q.as_fraction()) <= MAX
        for result in (q + small, q - small, small - q, -q):
            assert Quantity.parse(str(result)).as_fraction() == _capped(result.as_fraction())
        assert q.value() == q.value() and q.milli_value() == q.milli_value()
        assert (q < small) or (q >= small)
    # The long texts are read once (linear); everything else is a handful of small-int operations.
    assert time.perf_counter() - start < 2.0


def test_long_mantissas_round_exactly() -> None:
    # 1.777…Ki = 1024 + 0.777…·1024: rounded up to the nano after the binary multiplication.
    q = Quantity.parse("1." + "7" * 100_000 + "Ki")
    exact = (1 + Fraction(7, 9) * (1 - Fraction(1, 10**100_000))) * 1024
    assert q.as_fraction() == Fraction(math.ceil(exact * 10**9), 10**9)
    assert Quantity.parse("0." + "9" * 100_000 + "Ei").as_fraction() == 2**60  # just below: rounds up
    assert Quantity.parse("0." + "0" * 100_000 + "1Ki") == Quantity.parse("1n")
    assert Quantity.parse("-0." + "0" * 100_000 + "1") == Quantity.parse("-1n")


def test_json_numbers_are_capped_like_text() -> None:
    assert Quantity.from_json(10**30) == Quantity.parse("1e30") == Quantity.from_int(MAX)
    assert Quantity.from_json(-(10**30)).as_fraction() == -MAX
    assert Quantity.from_json(1e300) == Quantity.from_int(MAX)


def _capped(value: Fraction) -> Fraction:
    return max(Fraction(-MAX), min(Fraction(MAX), value))


# Quantity text as Go's grammar allows it, with exponents anywhere in int64 and long mantissas.
quantity_texts = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.from_regex(r"\A[0-9]{1,40}\Z"),
    st.one_of(st.just(""), st.from_regex(r"\A\.[0-9]{0,40}\Z")),
    st.one_of(
        st.sampled_from(
            ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        ),
        st.builds(
            lambda e, sign, n: f"{e}{sign}{n}",
            st.sampled_from("eE"),
            st.sampled_from(["", "+", "-"]),
            st.one_of(st.integers(0, 40), st.integers(0, 2**63 - 1)),
        ),
    ),
)


@given(quantity_texts)
def test_parsed_quantities_are_bounded_and_round_trip(text: str) -> None:
    q = Quantity.parse(text)
    value = q.as_fraction()
    assert abs(value) <= MAX and (value * 10**9).denominator == 1  # capped, nano-rounded
    again = Quantity.parse(str(q))
    assert again == q
    assert str(Quantity.parse(str(again))) == str(again)  # a fixed point after at most one more trip
    if q.format is not Format.BINARY_SI:
        assert str(again) == str(q)


@given(quantity_texts, quantity_texts)
def test_sums_round_trip_up_to_the_cap(a: str, b: str) -> None:
    qa, qb = Quantity.parse(a), Quantity.parse(b)
    for result, exact in (
        (qa + qb, qa.as_fraction() + qb.as_fraction()),
        (qa - qb, qa.as_fraction() - qb.as_fraction()),
    ):
        assert result.as_fraction() == exact
        assert Quantity.parse(str(result)).as_fraction() == _capped(exact)
