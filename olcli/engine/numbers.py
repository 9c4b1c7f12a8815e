"""Decimal number parsing on byte buffers, inside numba.

Grammar: ``[+-]? digits [. digits] ([eE] [+-]? digits)?`` with at least one
digit in the mantissa (``.5`` and ``5.`` are fine). ``nan``, ``inf`` and
``infinity`` (any case, signed) are recognised so that the caller can report
them as non-finite rather than as garbage.

Accuracy: the value is the correctly rounded double whenever the digits form an
integer mantissa of at most 2**53 (about 15 significant digits) and the decimal
exponent, after moving the point to the end of the mantissa, is within ±22
(Clinger's fast path; it covers ordinary data files such as ``0.0429492`` or
``-122.23``). Otherwise the relative error is below 1e-15 (a few ulp); digits
after the 19th significant one are ignored.
"""

import numpy as np
from olcli.engine.jit import njit

NUMBER_OK = 0
NUMBER_BAD = 1
NUMBER_NONFINITE = 2

# Correctly rounded powers of ten (exact up to 10**22), so that the slow path
# rounds at most twice.
_POW10 = np.array([float(f"1e{k}") for k in range(309)])
_MAX_EXACT = 2 ** 53


@njit(inline="always")
def _lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(inline="always")
def _is_word(buf, start, end, word):
    if end - start != len(word):
        return False
    for j in range(len(word)):
        if _lower(buf[start + j]) != word[j]:
            return False
    return True


_NAN = np.frombuffer(b"nan", dtype=np.uint8).copy()
_INF = np.frombuffer(b"inf", dtype=np.uint8).copy()
_INFINITY = np.frombuffer(b"infinity", dtype=np.uint8).copy()


@njit(inline="always")
def _scale(value, exponent):
    """value * 10**exponent outside the exact range: one or two roundings."""
    if exponent > 308:
        return np.inf
    if exponent >= 0:
        return value * _POW10[exponent]
    if exponent >= -308:
        return value / _POW10[-exponent]
    if exponent < -308 - 308 - 20:
        return 0.0
    return value / 1e308 / _POW10[-exponent - 308]


@njit
def parse_number(buf, start, end):
    """Parse ``buf[start:end]``; returns ``(value, status)`` with a NUMBER_* status."""
    i = start
    if i >= end:
        return 0.0, NUMBER_BAD
    negative = False
    if buf[i] == 43 or buf[i] == 45:  # '+' '-'
        negative = buf[i] == 45
        i += 1
    if _is_word(buf, i, end, _NAN) or _is_word(buf, i, end, _INF) or _is_word(buf, i, end, _INFINITY):
        return np.nan, NUMBER_NONFINITE
    mantissa = np.uint64(0)
    significant = 0
    exponent = 0
    digits = 0
    while i < end and 48 <= buf[i] <= 57:
        if significant < 19:
            mantissa = mantissa * np.uint64(10) + np.uint64(buf[i] - 48)
            if mantissa > 0:
                significant += 1
        else:
            exponent += 1
        digits += 1
        i += 1
    if i < end and buf[i] == 46:  # '.'
        i += 1
        while i < end and 48 <= buf[i] <= 57:
            if significant < 19:
                mantissa = mantissa * np.uint64(10) + np.uint64(buf[i] - 48)
                exponent -= 1
                if mantissa > 0:
                    significant += 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, NUMBER_BAD
    if i < end and (buf[i] == 101 or buf[i] == 69):  # 'e' 'E'
        i += 1
        exp_negative = False
        if i < end and (buf[i] == 43 or buf[i] == 45):
            exp_negative = buf[i] == 45
            i += 1
        exp_digits = 0
        exp_value = 0
        while i < end and 48 <= buf[i] <= 57:
            if exp_value < 100000:
                exp_value = exp_value * 10 + (buf[i] - 48)
            exp_digits += 1
            i += 1
        if exp_digits == 0:
            return 0.0, NUMBER_BAD
        exponent += -exp_value if exp_negative else exp_value
    if i != end:
        return 0.0, NUMBER_BAD
    if mantissa == 0:
        value = 0.0
    elif mantissa <= _MAX_EXACT and -22 <= exponent <= 22:
        value = float(mantissa)
        if exponent >= 0:
            value = value * _POW10[exponent]
        else:
            value = value / _POW10[-exponent]
    else:
        value = _scale(float(mantissa), exponent)
    if negative:
        value = -value
    if not np.isfinite(value):
        return value, NUMBER_NONFINITE
    return value, NUMBER_OK
