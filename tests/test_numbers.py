import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli.engine.numbers import NUMBER_BAD, NUMBER_NONFINITE, NUMBER_OK, parse_number


def parse(text: str):
    data = text.encode()
    buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, np.uint8)
    return parse_number(buf, 0, len(buf))


@pytest.mark.parametrize("text,value", [
    ("1", 1.0), ("-1", -1.0), ("+2", 2.0), ("0.5", 0.5), (".5", 0.5), ("5.", 5.0),
    ("1e3", 1000.0), ("2.5E-3", 0.0025), ("-0", -0.0), ("000123", 123.0), ("1e-320", 1e-320),
    ("123456789012345678901234", 1.2345678901234568e23),
])
def test_valid_numbers(text, value):
    parsed, status = parse(text)
    assert status == NUMBER_OK
    assert parsed == pytest.approx(value, rel=1e-15)


@pytest.mark.parametrize("text", ["", "-", "+", ".", "e5", "1e", "1e+", "abc", "1.2.3", "1x", "--1", "0x10", "1 "])
def test_garbage_is_rejected(text):
    assert parse(text)[1] == NUMBER_BAD


@pytest.mark.parametrize("text", ["nan", "NaN", "-inf", "inf", "+Infinity", "1e400", "-1e999"])
def test_non_finite_is_reported(text):
    assert parse(text)[1] == NUMBER_NONFINITE


@settings(max_examples=400, deadline=None)
@given(st.integers(-10**15, 10**15), st.integers(-22, 22))
def test_fast_path_is_correctly_rounded(mantissa, exponent):
    text = f"{mantissa}e{exponent}"
    value, status = parse(text)
    assert status == NUMBER_OK
    assert value == float(text)


@settings(max_examples=400, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_repr_round_trip_within_two_ulp(x):
    value, status = parse(repr(x))
    assert status == NUMBER_OK
    assert value == pytest.approx(x, rel=5e-16, abs=1e-320)
