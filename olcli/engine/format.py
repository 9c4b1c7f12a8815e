"""Write predictions as text, inside numba: one line per example, VW style.

Each line is the number with six decimals (VW prints ``%f``), then a space and
the example's tag when it has one. Numbers of magnitude 1e15 or more use
scientific notation with six decimals; NaN and infinities are written as
``nan``, ``inf`` and ``-inf``.
"""

import math

import numpy as np
from olcli.engine.jit import njit

_DIGITS = 6
_SCALE = 10 ** _DIGITS
_FIXED_LIMIT = 1e15
_EXACT_LIMIT = 2.0 ** 63 / _SCALE   # below it, x 10^6 rounded fits an int64


@njit
def _write_int(out, pos, number, min_width):
    """Decimal digits of a non-negative int64, zero-padded to min_width, written right to left
    into ``out`` itself (no scratch array: a server's reply and -p's lines allocate nothing per
    number)."""
    n = 1
    rest = number // 10
    while rest > 0:
        n += 1
        rest //= 10
    if n < min_width:
        n = min_width
    end = pos + n
    for k in range(1, n + 1):
        out[end - k] = 48 + number % 10
        number //= 10
    return end


@njit
def _write_text(out, pos, text):
    for k in range(len(text)):
        out[pos + k] = text[k]
    return pos + len(text)


_NAN = np.frombuffer(b"nan", dtype=np.uint8).copy()
_INF = np.frombuffer(b"inf", dtype=np.uint8).copy()


@njit
def _write_number(out, pos, x):
    if np.isnan(x):
        return _write_text(out, pos, _NAN)
    if x < 0.0:
        out[pos] = 45  # '-'
        pos += 1
        x = -x
    if np.isinf(x):
        return _write_text(out, pos, _INF)
    exponent = 0
    if x >= _FIXED_LIMIT:
        exponent = int(math.floor(math.log10(x)))
        x = x / 10.0 ** exponent
        if x >= 10.0:
            x /= 10.0
            exponent += 1
    if x < _EXACT_LIMIT:
        scaled = np.int64(round(x * _SCALE))
        whole, fraction = scaled // _SCALE, scaled % _SCALE
    else:  # x 10^6 would overflow an int64: the fraction part alone (exact here: x > 2^43)
        whole = np.int64(x)
        fraction = np.int64(round((x - whole) * _SCALE))
        if fraction == _SCALE:
            whole, fraction = whole + 1, np.int64(0)
    pos = _write_int(out, pos, whole, 1)
    out[pos] = 46  # '.'
    pos = _write_int(out, pos + 1, fraction, _DIGITS)
    if exponent != 0:
        out[pos] = 101  # 'e'
        out[pos + 1] = 43  # '+'
        pos = _write_int(out, pos + 2, exponent, 2)
    return pos


@njit
def _end_line(out, pos, tags, e, chunk):
    """Example e's tag (if it has one, after a space) and the newline, written at ``pos``: the
    end of every prediction line (format_predictions, and the server's reply in single.py)."""
    if tags[e, 1] > tags[e, 0]:
        out[pos] = 32
        pos += 1
        for k in range(tags[e, 0], tags[e, 1]):
            out[pos] = chunk[k]
            pos += 1
    out[pos] = 10
    return pos + 1


@njit
def write_lines(out, values, n, tags, chunk, integers):
    """The text lines of values[0:n] (as integers when ``integers``: class numbers; tags are
    (start, end) spans into chunk) written into ``out``, which must hold them (32 bytes per
    line and its tag suffice); returns their length. format_predictions allocates ``out``; the
    server's one-call path (single.py) writes into a buffer it keeps."""
    pos = 0
    for e in range(n):
        if integers:
            pos = _write_int(out, pos, np.int64(values[e]), 1)
        else:
            pos = _write_number(out, pos, values[e])
        pos = _end_line(out, pos, tags, e, chunk)
    return pos


@njit(cache=True)
def format_predictions(values, n, tags, chunk, integers):
    """Text lines for values[0:n] (as integers when ``integers``: class numbers);
    tags are (start, end) spans into chunk."""
    size = 0
    for e in range(n):
        size += 32 + (tags[e, 1] - tags[e, 0]) + 1
    out = np.empty(size, np.uint8)
    return out[:write_lines(out, values, n, tags, chunk, integers)]
