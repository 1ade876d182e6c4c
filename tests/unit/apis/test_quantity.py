"""apis.quantity: Kubernetes resource.Quantity with Go's exact parse / rounding / canonical-string rules.

Expected values are worked out from k8s.io/apimachinery/pkg/api/resource (quantity.go, amount.go,
suffix.go, scale_int.go), not from this implementation. Notation below: (m, e) means m * 10**e.
"""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apis import quantity_plain
from apis.quantity import (
    Format,
    Quantity,
    QuantityError,
    format_resource_list,
    parse_resource_list,
)
from apis.quantity_plain import PLAIN_MAX_CHARS, all_plain
from tests.reliability.fuzz.strategies import quantity_texts

MAX = 2**63 - 1
DSI, BSI, DEX = Format.DECIMAL_SI, Format.BINARY_SI, Format.DECIMAL_EXPONENT

# input, Value(), MilliValue(), String(), Format after parsing
PARSE_CASES: list[tuple[str, int, int, str, Format]] = [
    ("0", 0, 0, "0", DSI),
    ("0Ki", 0, 0, "0", BSI),
    ("00012", 12, 12000, "12", DSI),
    # nano / micro: parse rounds away from zero to 1e-9; Value/MilliValue round away from zero
    ("1n", 1, 1, "1n", DSI),
    ("0.5n", 1, 1, "1n", DSI),
    ("3.001n", 1, 1, "4n", DSI),  # 3.001e-9 -> 4e-9
    ("0.00000012345", 1, 1, "124n", DSI),
    ("1500n", 1, 1, "1500n", DSI),  # 1.5e-6: MilliValue ceil(0.0015) = 1
    ("1u", 1, 1, "1u", DSI),
    ("2500u", 1, 3, "2500u", DSI),  # 2.5m -> MilliValue 3
    # milli
    ("500m", 1, 500, "500m", DSI),
    ("1000m", 1, 1000, "1", DSI),
    ("2500m", 3, 2500, "2500m", DSI),
    ("0.1", 1, 100, "100m", DSI),
    (".5", 1, 500, "500m", DSI),
    ("5.", 5, 5000, "5", DSI),
    ("+1", 1, 1000, "1", DSI),
    ("1.G", 10**9, 10**12, "1G", DSI),
    # decimal SI: mantissa stripped of tens, exponent lowered to a multiple of 3
    ("12k", 12000, 12_000_000, "12k", DSI),
    ("1.5k", 1500, 1_500_000, "1500", DSI),  # (15, 2) -> 1500e0
    ("10700", 10700, 10_700_000, "10700", DSI),  # (107, 2) -> 10700e0
    ("1M", 10**6, 10**9, "1M", DSI),
    ("120G", 120 * 10**9, 120 * 10**12, "120G", DSI),  # (12, 10) -> 120e9
    ("2T", 2 * 10**12, 2 * 10**15, "2T", DSI),
    ("3P", 3 * 10**15, 3 * 10**18, "3P", DSI),
    ("1E", 10**18, MAX, "1E", DSI),  # MilliValue 1e21 overflows int64 in Go; saturates here
    # binary SI: largest power of 1024 dividing the integer; |v| < 1024 or fractional -> DecimalSI text
    ("1Ki", 1024, 1_024_000, "1Ki", BSI),
    ("1.5Ki", 1536, 1_536_000, "1536", BSI),
    ("8Mi", 8 * 2**20, 8 * 2**20 * 1000, "8Mi", BSI),
    ("1024Mi", 2**30, 2**30 * 1000, "1Gi", BSI),
    ("1.5Gi", 1_610_612_736, 1_610_612_736_000, "1536Mi", BSI),
    ("1Ti", 2**40, 2**40 * 1000, "1Ti", BSI),
    ("1Pi", 2**50, 2**50 * 1000, "1Pi", BSI),
    ("1Ei", 2**60, MAX, "1Ei", BSI),
    ("7Ei", 7 * 2**60, MAX, "7Ei", BSI),
    ("0.3Ki", 308, 307_200, "307200m", BSI),  # 307.2: fractional -> printed as DecimalSI
    (".001Ki", 2, 1024, "1024m", BSI),  # 1.024 (>= 1 so the format stays BinarySI)
    ("100.035Ki", 102_436, 102_435_840, "102435840m", BSI),  # 102435.84 -> (10243584, -2) -> e-3
    ("0.000000000001Ki", 1, 1, "2n", DSI),  # 1.024e-9 rounds up to 2n; 0 < v < 1 becomes DecimalSI
    # decimal exponent
    ("1e3", 1000, 1_000_000, "1e3", DEX),
    ("1E3", 1000, 1_000_000, "1e3", DEX),
    ("1e+3", 1000, 1_000_000, "1e3", DEX),
    ("1e-3", 1, 1, "1e-3", DEX),
    ("1E-9", 1, 1, "1e-9", DEX),
    ("1e-10", 1, 1, "1e-9", DEX),  # rounded up to nano
    ("1.2e3", 1200, 1_200_000, "1200", DEX),  # (12, 2) -> 1200e0: no suffix
    ("1.3E+6", 1_300_000, 1_300_000_000, "1300e3", DEX),  # (13, 5) -> 1300e3
    ("5e-1", 1, 500, "500e-3", DEX),
    # negative: Value/MilliValue round away from zero
    ("-500m", -1, -500, "-500m", DSI),
    ("-0.5", -1, -500, "-500m", DSI),
    ("-1.5", -2, -1500, "-1500m", DSI),
    ("-2.5u", -1, -1, "-2500n", DSI),
    ("-1n", -1, -1, "-1n", DSI),
    ("-1.5Gi", -1_610_612_736, -1_610_612_736_000, "-1536Mi", BSI),
    ("-12k", -12000, -12_000_000, "-12k", DSI),
    # 2^63-1 and beyond: every format is capped at 2^63-1 when parsed (Go caps BinarySI only;
    # docs/upstream.md#quantity-limits), so huge exponents cost nothing
    ("9223372036854775807", MAX, MAX, "9223372036854775807", DSI),
    ("9223372036854775808", MAX, MAX, "9223372036854775807", DSI),
    ("9223372036854775807.000000001", MAX, MAX, "9223372036854775807", DSI),  # rounded to nano, then capped
    ("9223372036854775806.9999999999", MAX, MAX, "9223372036854775807", DSI),  # rounds up to the cap
    ("9223372036854775806.999999999", MAX, MAX, "9223372036854775806999999999n", DSI),
    ("12E", MAX, MAX, "9223372036854775807", DSI),
    ("1e19", MAX, MAX, "9223372036854775807", DEX),
    ("1e999999999", MAX, MAX, "9223372036854775807", DEX),
    ("-1e2147483647", -MAX, -MAX, "-9223372036854775807", DEX),
    ("8191Pi", 8191 * 2**50, MAX, "8191Pi", BSI),
    ("8Ei", MAX, MAX, "9223372036854775807", BSI),
    ("9Ei", MAX, MAX, "9223372036854775807", BSI),
    ("9223372036854775807Ki", MAX, MAX, "9223372036854775807", BSI),
    ("-8Ei", -MAX, -MAX, "-9223372036854775807", BSI),
]


@pytest.mark.parametrize(("text", "value", "milli", "canonical", "fmt"), PARSE_CASES)
def test_parse_table(text: str, value: int, milli: int, canonical: str, fmt: Format) -> None:
    q = Quantity.parse(text)
    assert (q.value(), q.milli_value(), str(q), q.format) == (value, milli, canonical, fmt)
    assert q.to_json() == canonical
    again = Quantity.parse(canonical)
    assert again == q


def test_parse_table_is_large_and_covers_every_suffix() -> None:
    assert len(PARSE_CASES) >= 40
    texts = " ".join(case[0] for case in PARSE_CASES)
    for suffix in [
        "n",
        "u",
        "m",
        "k",
        "M",
        "G",
        "T",
        "P",
        "E",
        "Ki",
        "Mi",
        "Gi",
        "Ti",
        "Pi",
        "Ei",
        "e",
        "E-",
    ]:
        assert suffix in texts


def test_exact_values() -> None:
    assert Quantity.parse("1.5Gi").as_fraction() == Fraction(1_610_612_736)
    assert Quantity.parse("0.5n").as_fraction() == Fraction(1, 10**9)
    assert Quantity.parse("-2.5u").as_fraction() == Fraction(-25, 10**7)
    assert Quantity.parse("9E").as_fraction() == 9 * 10**18
    assert Quantity.parse("12E").as_fraction() == MAX  # capped in every format
    assert float(Quantity.parse("1536Mi")) == 1_610_612_736.0
    assert float(Quantity.parse("250m")) == 0.25
    assert float(Quantity.parse("1e999999999")) == float(MAX)
    assert float(Quantity.parse("1e18") + Quantity.parse("1e18")) == 2e18  # sums are not capped


def test_exponent_is_truncated_to_int32_like_go() -> None:
    # suffix.go: strconv.ParseInt(..., 64) then int32(parsed): 2^32 wraps to 0, 2^31 to -2^31.
    assert str(Quantity.parse("1e4294967296")) == "1"
    assert str(Quantity.parse("1e4294967299")) == "1e3"
    with pytest.raises(QuantityError):
        Quantity.parse("1e9223372036854775808")  # beyond int64: ParseInt fails


def test_decimal_si_beyond_exa_prints_with_exponent() -> None:
    # Only sums and constructors get beyond the parse cap. Older Go printed only the mantissa ("1") here;
    # upstream now falls back to the exponent form.
    q = Quantity.from_int(10**21)
    assert (str(q), q.format) == ("1e21", DSI)
    assert Quantity.parse(str(q)) == Quantity.from_int(MAX)  # parsed back capped
    assert str(Quantity.from_int(1234 * 10**18)) == "1234E"


def test_negative_fractional_nano_rounds_away_from_zero() -> None:
    # Go's big-decimal path (scale_int.go scaledValue) adds +1 after truncating, so Go returns +1 here;
    # docs/upstream.md#conventions says away from zero, which is also what Go's int64 path does for "-1n".
    q = Quantity.parse("-0.5n")
    assert (str(q), q.value(), q.milli_value()) == ("-1n", -1, -1)
    assert Quantity.parse("-0.1Ki").value() == -103  # -102.4; Go's big-decimal path gives -101


# --- constructors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "canonical"),
    [
        (Quantity.from_int(12000), "12k"),  # 12 cores of batch-cpu (milli-core integer)
        (Quantity.from_int(10700), "10700"),  # 10.7 cores
        (Quantity.from_int(1000), "1k"),
        (Quantity.from_int(1234000), "1234k"),
        (Quantity.from_int(0), "0"),
        (Quantity.from_int(-3), "-3"),
        (Quantity.from_milli(int(2.5 * 1000)), "2500m"),
        (Quantity.from_milli(3000), "3"),
        (Quantity.from_milli(1), "1m"),
        (Quantity.from_milli(1234000), "1234"),
        (Quantity.from_milli(2500, DSI), "2500m"),
        (Quantity.from_int(8 * 2**30, BSI), "8Gi"),
        (Quantity.from_int(1536 * 2**20, BSI), "1536Mi"),
        (Quantity.from_int(3006477107, BSI), "3006477107"),
        (Quantity.from_int(1024, BSI), "1Ki"),
        (Quantity.from_int(2**20, BSI), "1Mi"),
        (Quantity.from_int(1025, BSI), "1025"),
        (Quantity.from_int(-1024, BSI), "-1Ki"),
        (Quantity.from_int(512, BSI), "512"),
        (Quantity.from_int(1023, BSI), "1023"),
        # |v| < 1024 prints as DecimalSI, so Go's NewQuantity(1000, BinarySI).String() is "1k", not "1000"
        (Quantity.from_int(1000, BSI), "1k"),
        (Quantity.from_milli(1024, BSI), "1024m"),  # Go TestMilliNewSet
        (Quantity.from_milli(1024 * 1024, BSI), "1048576m"),  # 1048.576: fractional -> DecimalSI
        (Quantity.from_milli(2048 * 1000, BSI), "2Ki"),
        (Quantity.from_int(1000, DEX), "1e3"),
        (Quantity.from_milli(1500, DEX), "1500e-3"),
        (Quantity.from_int(2**70, BSI), "1024Ei"),  # beyond Go's suffix table: stays exact
        (Quantity.from_fraction(Fraction(1, 3), DSI), "333333334n"),  # rounded up to nano
        (Quantity.from_fraction(Fraction(-3, 2), DSI), "-1500m"),
        (Quantity.from_fraction(Fraction(3 * 2**30), BSI), "3Gi"),
    ],
)
def test_constructors(q: Quantity, canonical: str) -> None:
    assert str(q) == canonical


def test_constructor_values_and_formats() -> None:
    q = Quantity.from_milli(2500)
    assert (q.value(), q.milli_value(), q.format) == (3, 2500, DSI)
    assert Quantity.from_int(3006477107, BSI).format is BSI
    assert Quantity.from_milli(500, BSI).format is BSI  # keeps the format; only printing changes
    assert Quantity.from_int(7).as_fraction() == 7
    with pytest.raises(TypeError):
        Quantity.from_int(2.5)  # type: ignore[arg-type]


# --- invalid text ---------------------------------------------------------------------------------

INVALID = [
    "",
    "abc",
    "1.2.3",
    "12x",
    "1 Gi",
    " 1",
    "1 ",
    "1\n",
    "Gi",
    "k",
    "1e",
    "1E+",
    "1e-",
    "-3.01e-",
    "--1",
    "+-1",
    "1ki",
    "1K",
    "1i",
    ".5i",
    "0.1mi",
    "0.1am",
    "1Mi3",
    ".",
    "-.",
    "+",
    "-",
    "e3",
    "1e3.5",
    "1.1.M",
    "1+1.0M",
    "1_000",
    "١",  # non-ASCII digit
    "inf",
    "nan",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        Quantity.parse(text)
    assert str(info.value).startswith(f"invalid quantity {json.dumps(text, ensure_ascii=False)}: ")


def test_invalid_message_names_suffix() -> None:
    with pytest.raises(QuantityError, match=r'^invalid quantity "12x": unknown suffix "x"$'):
        Quantity.parse("12x")
    assert issubclass(QuantityError, ValueError)


def test_very_long_inputs() -> None:
    digits = "1" + "0" * 5000
    assert Quantity.parse(digits) == Quantity.parse("1e5000")
    assert Quantity.parse("0." + "0" * 5000 + "1") == Quantity.parse("1n")
    assert Quantity.parse("7" * 5000) == Quantity.parse("9223372036854775807")  # capped
    assert str(Quantity.parse("0." + "7" * 5000)) == "777777778n"
    assert str(Quantity.from_int(7 * (10**5000 - 1) // 9)) == "7" * 5000  # printing is not capped
    with pytest.raises(QuantityError) as info:
        Quantity.parse("x" * 10_000)
    assert len(str(info.value)) < 600


# --- JSON and resource lists ----------------------------------------------------------------------


def test_from_json() -> None:
    assert str(Quantity.from_json(12)) == "12"
    assert str(Quantity.from_json(1.5)) == "1500m"
    assert str(Quantity.from_json(0.1)) == "100m"
    assert str(Quantity.from_json(1e16)) == "10e15"  # repr "1e+16": a DecimalExponent literal
    assert str(Quantity.from_json("1Gi")) == "1Gi"
    assert str(Quantity.from_json(" 1Gi\n")) == "1Gi"  # UnmarshalJSON trims spaces
    assert Quantity.from_json(None).is_zero()
    assert Quantity.from_json(-1).value() == -1
    assert Quantity.from_json(10**30) == Quantity.parse("1e30")
    q = Quantity.parse("5m")
    assert Quantity.from_json(q) is q
    for bad in [True, False, float("nan"), float("inf"), [], {}, b"1", "12x"]:
        with pytest.raises(QuantityError):
            Quantity.from_json(bad)


def test_resource_lists() -> None:
    parsed = parse_resource_list(
        {"cpu": "500m", "memory": "1.5Gi", "kubernetes.io/batch-cpu": 12000, "pods": None}
    )
    assert parsed["cpu"].milli_value() == 500
    assert format_resource_list(parsed) == {
        "cpu": "500m",
        "memory": "1536Mi",
        "kubernetes.io/batch-cpu": "12k",
        "pods": "0",
    }
    with pytest.raises(QuantityError) as info:
        parse_resource_list({"cpu": "1", "memory": "12x"})
    assert '"memory"' in str(info.value) and '"12x"' in str(info.value)
    with pytest.raises(QuantityError):
        parse_resource_list(["cpu"])  # type: ignore[arg-type]


# --- value semantics ------------------------------------------------------------------------------


def test_equality_hash_and_order_ignore_format() -> None:
    assert Quantity.parse("1Ki") == Quantity.from_int(1024) == Quantity.parse("1.024k")
    assert hash(Quantity.parse("1Ki")) == hash(Quantity.parse("1024"))
    assert Quantity.parse("1000m") == Quantity.parse("1") == Quantity.parse("1e0")
    assert len({Quantity.parse("1"), Quantity.parse("1000m"), Quantity.parse("1e0")}) == 1
    assert Quantity.parse("100m") > Quantity.parse("50m")
    assert Quantity.parse("10000T") > Quantity.parse("100Gi")
    assert Quantity.parse("-1") < Quantity.parse("1n") <= Quantity.parse("1n") < Quantity.parse("1u")
    assert sorted([Quantity.parse(s) for s in ["1Gi", "1G", "-1", "0"]]) == [
        Quantity.parse(s) for s in ["-1", "0", "1G", "1Gi"]
    ]
    assert Quantity.parse("1").cmp(Quantity.parse("2")) == -1
    assert Quantity.parse("-1").sign() == -1 and Quantity.parse("0").sign() == 0
    assert Quantity.parse("1") != "1"


def test_arithmetic_formats_follow_go() -> None:
    total = Quantity.parse("1Gi") + Quantity.parse("512Mi")
    assert (str(total), total.format) == ("1536Mi", BSI)
    mixed = Quantity.parse("1") + Quantity.parse("1Ki")
    assert (str(mixed), mixed.format) == ("1025", DSI)
    # Go Add/Sub: a zero left operand takes the right operand's format
    zero = Quantity.parse("0")
    assert str(zero + Quantity.parse("1Gi")) == "1Gi"
    assert str(Quantity.parse("1Gi") + zero) == "1Gi"
    assert str(zero - Quantity.parse("1Gi")) == "-1Gi"
    assert str(Quantity.parse("100m") - Quantity.parse("100m")) == "0"
    assert str(Quantity.parse("1") - Quantity.parse("1500m")) == "-500m"
    assert str(-Quantity.parse("9.01")) == "-9010m"
    assert sum([Quantity.parse("250m")] * 4, Quantity.from_int(0)) == Quantity.parse("1")
    big = Quantity.parse("8Ei") + Quantity.parse("8Ei")  # no cap in arithmetic
    assert big.as_fraction() == 2 * MAX


def test_immutable_copyable_picklable() -> None:
    q = Quantity.parse("1536Mi")
    with pytest.raises(AttributeError):
        q._m = 3
    assert copy.copy(q) is q and copy.deepcopy(q) is q
    restored = pickle.loads(pickle.dumps(q))
    assert restored == q and restored.format is BSI and str(restored) == "1536Mi"
    assert repr(q) == "Quantity('1536Mi')"
    assert Quantity("1536Mi") == q


# --- properties -----------------------------------------------------------------------------------

int64s = st.integers(min_value=-MAX, max_value=MAX)
formats = st.sampled_from(list(Format))


def _check_round_trip(q: Quantity) -> None:
    text = str(q)
    again = Quantity.parse(text)
    assert again == q
    if q.format is not BSI:
        assert str(again) == text
    else:
        # Go is not string-stable here: BinarySI 3000 prints "3000", which parses as DecimalSI "3k".
        # One more round trip is always a fixed point.
        assert str(Quantity.parse(str(again))) == str(again)


@given(int64s, formats)
def test_round_trip_int(value: int, fmt: Format) -> None:
    q = Quantity.from_int(value, fmt)
    _check_round_trip(q)
    assert q.value() == value


@given(int64s, formats)
def test_round_trip_milli(milli: int, fmt: Format) -> None:
    q = Quantity.from_milli(milli, fmt)
    _check_round_trip(q)
    assert q.milli_value() == milli
    away = -((-abs(milli)) // 1000)  # ceil(|milli| / 1000)
    assert q.value() == (away if milli >= 0 else -away)


@given(st.one_of(st.text(), st.text(alphabet="0123456789.+-eEinumkKMGTP \n")))
def test_parse_only_raises_quantity_error(text: str) -> None:
    with contextlib.suppress(QuantityError):
        Quantity.parse(text)


@given(st.from_regex(r"\A[+-]?[0-9]{0,25}(\.[0-9]{0,25})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,9})?\Z"))
def test_round_trip_of_quantity_text(text: str) -> None:
    try:
        q = Quantity.parse(text)
    except QuantityError:
        assert not any(c.isdigit() for c in text.split("e")[0].split("E")[0])  # only digit-less text fails
        return
    _check_round_trip(q)


# --- all_plain: many texts checked at once -------------------------------------------------------------
@given(
    st.lists(
        quantity_texts | st.from_regex(r"\A[+-]?[0-9]{0,30}(\.[0-9]{0,30})?[eEiKMGTPmnuk]{0,2}[0-9]{0,20}\Z")
    )
)
def test_plain_texts_all_parse(texts: list[str]) -> None:
    if all_plain(texts):
        for text in texts:
            assert len(text) <= PLAIN_MAX_CHARS
            Quantity.parse(text)


@pytest.mark.parametrize(
    "text",
    ["0", "500m", "1.5Gi", ".5", "1.", "+1e3", "-2", "7E", "1Ei", "1e18", "1E-999999999999999999", "9" * 64],
)
def test_plain_texts(text: str) -> None:
    Quantity.parse(text)
    assert all_plain([text]) and all_plain(["1", text, "2"])


@pytest.mark.parametrize(
    "text",
    [
        "",
        ".",
        "+",
        "Gi",
        "1 ",
        " 1",
        "1\n2",
        "1Gi\n",
        "1e",
        "1e1234567890123456789",
        "1K",
        "1ki",
        "\u0661",
        "1" * 65,
    ],
)
def test_texts_that_are_not_plain(text: str) -> None:
    """Not plain, whether or not they parse (the longest exponent and "1\n2" as two texts are not)."""
    assert not all_plain([text]) and not all_plain(["1", text])
    assert all_plain([]) and all_plain(["1"])


def test_the_shapes_remembered_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quantity_plain, "_plain_shapes", set())
    monkeypatch.setattr(quantity_plain, "_PLAIN_SHAPES_MAX", 10)
    for digits in range(1, 20):
        for point in range(digits):
            assert all_plain(["1" * point + "." + "2" * (digits - point)])
    assert 0 < len(quantity_plain._plain_shapes) <= 10
    assert all_plain(["3.5", "1.5Gi"]) and not all_plain(["3.5", "1.5Gj"])
