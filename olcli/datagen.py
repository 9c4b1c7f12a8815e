"""Seeded synthetic data in VW text format, for the benchmarks and the tests.

    python -m olcli.datagen KIND [--lines N] [--seed S] [-o FILE] [--small] [--block B]

KIND is one of ``click``, ``text``, ``regression``, ``multiclass``. Without ``-o`` (or with
``-o -``) the lines go to stdout; a file is written under a temporary name and renamed at the
end, so an interrupted run never leaves a truncated file that looks finished. ``--lines``
defaults to the kind's full benchmark size (``FULL_LINES``), ``--small`` to its test size
(``SMALL_LINES``):

=============  ==========  ===========  ==================================================
kind           full size   small size   what it exercises
=============  ==========  ===========  ==================================================
click          1,000,000   20,000       few features, heavy-tailed categorical values, CTR
text           200,000     40,000       wide sparse bag of words, Zipf word frequencies
regression     200,000     10,000       real labels, feature scales from 1e-3 to 1e3
multiclass     200,000     10,000       labels 1..K for ``--oaa K`` / ``--softmax K``
=============  ==========  ===========  ==================================================

Why: olcli's defaults must work on kinds of data the benchmarks were not tuned on, and the
speed comparisons with VW need large inputs that anyone can rebuild. Each generator's model is
described in its function's docstring (``click_blocks``, ``text_blocks``,
``regression_blocks``, ``multiclass_blocks``).

Determinism. The output is a function of (kind, lines, seed, model parameters) only:

- Randomness comes from ``numpy.random.Generator(PCG64(...))``. ``click`` keeps the stream of
  the former ``benchmarks/make_click_log.py`` (so the benchmark file is byte for byte the one
  the recorded benchmark results were measured on). The other kinds use one generator per quantity
  (document lengths, words, labels, ...), children of ``SeedSequence(seed)``, and draw only
  uniform doubles from them (``Generator.random``, one 64-bit output per number, the most
  stable part of NumPy's API), turned into Zipf, normal and categorical values by inverse
  CDFs and Box-Muller written here. Each stream is consumed line after line, so drawing a
  block of 7 lines and then 5 gives the same numbers as 12 at once: the block size changes
  the memory used, never the bytes, and a shorter file is the start of a longer one.
  (``click`` draws in fixed units of 200,000 lines, as the old script did, and formats them
  in blocks; it uses NumPy's own ``zipf`` and ``normal``, whose streams NumPy does not
  promise to keep across versions: the pinned hashes in the tests would show a change.)
- Numbers are written with fixed formatting: integers in decimal, reals with a fixed number
  of decimals per feature (``regression``: 4-5 significant digits at the feature's scale).
  A platform whose ``exp``/``log``/``cos`` differ in the last bit could only change a label
  or a digit when a uniform falls within ~1e-16 of a threshold, which does not happen at
  these sizes in practice; ``tests/test_datagen.py`` pins the bytes of small files by hash.

Speed and memory: everything is vectorised; the lines are built as fixed-width byte matrices
padded with NUL bytes, which one boolean mask removes (``_render``). On one core: click 2 s
per million lines, text/regression/multiclass 1-1.5 s per 200,000 (see
``benchmarks/README.md``); memory (65-100 MB peak with Python and NumPy) does not grow with
``--lines``: lines are produced and written ``block`` lines at a time.

Importable: ``blocks(kind, lines, seed, ...)`` yields ``bytes``, ``write(kind, path_or_file,
lines, seed, ...)`` writes them, ``generate(kind, lines, seed, ...)`` returns them all (for
small sizes).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, Callable, Iterator

import numpy as np

DEFAULT_SEED = 7
DEFAULT_BLOCK = 16_384
FULL_LINES = {"click": 1_000_000, "text": 200_000, "regression": 200_000, "multiclass": 200_000}
SMALL_LINES = {"click": 20_000, "text": 40_000, "regression": 10_000, "multiclass": 10_000}

_ZERO, _MINUS, _POINT, _NEWLINE = 48, 45, 46, 10


# ---------------------------------------------------------------------------------------------
# Randomness: uniform doubles only, turned into other distributions here.

def _streams(seed: int, count: int) -> list:
    """``count`` independent generators derived from ``seed`` (children of SeedSequence(seed))."""
    return [np.random.Generator(np.random.PCG64(child))
            for child in np.random.SeedSequence(seed).spawn(count)]


def _normal(rng: np.random.Generator, n: int) -> np.ndarray:
    """n standard normals by Box-Muller, from exactly 2n uniforms (so blocks concatenate)."""
    u = rng.random(2 * n)
    return np.sqrt(-2.0 * np.log1p(-u[0::2])) * np.cos(2.0 * np.pi * u[1::2])


def _zipf_cdf(size: int, exponent: float) -> np.ndarray:
    """CDF of the Zipf law on ranks 1..size: P(rank = r) proportional to r^-exponent."""
    cdf = np.cumsum(np.arange(1, size + 1, dtype=np.float64) ** -exponent)
    return cdf / cdf[-1]


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: the 0-based index of the category each uniform falls in."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _block_sizes(lines: int, block: int) -> Iterator[int]:
    if lines < 0:
        raise ValueError(f"lines must be >= 0, got {lines}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    for start in range(0, lines, block):
        yield min(block, lines - start)


# ---------------------------------------------------------------------------------------------
# Formatting: fixed-width byte matrices, NUL where there is nothing to write.

def _digits(values: np.ndarray, keep: int = 1) -> np.ndarray:
    """(n, width) uint8: decimal digits of non-negative integers, right-aligned; leading zeros
    become NUL except the last ``keep`` digits (``keep`` = 1: zero is written as 0)."""
    values = np.asarray(values, dtype=np.int64)
    width = max(len(str(int(values.max()))) if values.size else 1, keep)
    out = np.empty((len(values), width), np.uint8)
    rest = values
    for i in range(width - 1, -1, -1):  # division by a scalar: NumPy's fast path
        quotient = rest // 10
        out[:, i] = rest - quotient * 10 + _ZERO
        if i < width - keep:
            out[:, i][values < 10 ** (width - 1 - i)] = 0
        rest = quotient
    return out


def _signed(values: np.ndarray) -> np.ndarray:
    """(n, width) uint8: signed integers in decimal."""
    values = np.asarray(values, dtype=np.int64)
    sign = np.where(values < 0, _MINUS, 0).astype(np.uint8)[:, None]
    return np.hstack([sign, _digits(np.abs(values))])


def _fixed(x: np.ndarray, decimals: int) -> np.ndarray:
    """(n, width) uint8: reals with exactly ``decimals`` decimals (rounded half to even; no -0)."""
    units = np.rint(np.asarray(x, dtype=np.float64) * 10.0 ** decimals).astype(np.int64)
    if decimals == 0:
        return _signed(units)
    sign = np.where(units < 0, _MINUS, 0).astype(np.uint8)[:, None]
    digits = _digits(np.abs(units), keep=decimals + 1)
    point = np.full((len(units), 1), _POINT, np.uint8)
    return np.hstack([sign, digits[:, :-decimals], point, digits[:, -decimals:]])


def _render(n: int, parts: list) -> bytes:
    """Lines from columns: each part is bytes (the same in every line) or an (n, w) uint8
    matrix with NUL padding; a newline ends each line; the NULs are dropped."""
    columns = [np.broadcast_to(np.frombuffer(p, np.uint8), (n, len(p))) if isinstance(p, bytes) else p
               for p in parts]
    matrix = np.concatenate(columns + [np.full((n, 1), _NEWLINE, np.uint8)], axis=1)
    return matrix[matrix != 0].tobytes()


def _binary_labels(positive: np.ndarray) -> np.ndarray:
    """(n, 2) uint8: ``1`` or ``-1``."""
    out = np.empty((len(positive), 2), np.uint8)
    out[:, 0] = np.where(positive, 0, _MINUS)
    out[:, 1] = ord("1")
    return out


# ---------------------------------------------------------------------------------------------
# click

CLICK_NAMESPACES = "abcdefghij"
CLICK_CARDINALITY = (10, 50, 200, 1_000, 5_000, 20_000, 100_000, 500_000, 1_000_000, 2_000_000)
CLICK_UNIT = 200_000  # lines drawn at once: part of the stream, so fixed


def click_blocks(lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK, *,
                 bias: float = -1.5, ctr: float | None = None) -> Iterator[bytes]:
    """Categorical click log: ``1 |a a=1 |b b=0 ... |j j=0`` (11 features with the constant).

    Model: 10 namespaces a..j with 10, 50, 200, 1k, 5k, 20k, 100k, 500k, 1M and 2M values.
    Each value is ``min(Zipf(1.3), cardinality) - 1`` (NumPy's Zipf: a few very common values,
    a long tail of rare ones, like ad ids or sites; the tail beyond the cardinality piles up
    on the last value). Every value v of namespace k has a hidden effect ``e_k[v] ~ N(0, 0.6²)``,
    and a line is a click (+1, else -1) with probability ``sigmoid(bias + Σ_k e_k[v_k])``.
    ``bias`` -1.5 gives 22% clicks with seed 7 (19-39% over seeds 1-8: the few common values'
    effects weigh much); ``ctr`` instead picks the bias for that average click rate (e.g. 0.03,
    a realistic CTR: heavy imbalance; within ~0.001 of it for any seed), found by bisection on
    200,000 margins from a separate stream, so the values drawn stay the same.

    Stream (that of the former ``benchmarks/make_click_log.py``, kept so the benchmark files
    do not change): ``Generator(PCG64(seed))`` draws the effects, then per unit of 200,000
    lines (the last one shorter) the 10 value columns and one uniform per line.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    effects = [rng.normal(scale=0.6, size=cardinality) for cardinality in CLICK_CARDINALITY]
    if ctr is not None:
        bias = _click_bias(effects, seed, ctr)
    prefixes = [f" |{ns} {ns}=".encode() for ns in CLICK_NAMESPACES]
    for unit in _block_sizes(lines, CLICK_UNIT):
        values = [np.minimum(rng.zipf(1.3, size=unit), cardinality) - 1 for cardinality in CLICK_CARDINALITY]
        margin = sum(effect[v] for effect, v in zip(effects, values)) + bias
        positive = rng.random(unit) < 1 / (1 + np.exp(-margin))
        for start in range(0, unit, block):
            part = slice(start, min(start + block, unit))
            n = part.stop - part.start
            columns = [_binary_labels(positive[part])]
            for prefix, v in zip(prefixes, values):
                columns += [prefix, _digits(v[part])]
            yield _render(n, columns)


def _click_bias(effects: list, seed: int, ctr: float) -> float:
    if not 0 < ctr < 1:
        raise ValueError(f"ctr must be in (0, 1), got {ctr}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1,))))
    margin = sum(effect[np.minimum(rng.zipf(1.3, size=CLICK_UNIT), len(effect)) - 1] for effect in effects)
    low, high = -50.0, 50.0
    for _ in range(60):
        middle = (low + high) / 2
        if _sigmoid(margin + middle).mean() < ctr:
            low = middle
        else:
            high = middle
    return (low + high) / 2


# ---------------------------------------------------------------------------------------------
# text

def _word_table(vocabulary: int) -> np.ndarray:
    """(vocabulary, w) uint8: a space and the pseudo-word of each rank, NUL-padded. Rank 1 is
    ``a``, then ``b`` .. ``z``, ``aa`` .. (bijective base 26): frequent words are short, as in
    real text, and no word looks like a number."""
    rank = np.arange(1, vocabulary + 1, dtype=np.int64)
    letters = []
    while np.any(rank > 0):
        alive = rank > 0
        letters.append(np.where(alive, (rank - 1) % 26 + ord("a"), 0).astype(np.uint8))
        rank = np.where(alive, (rank - 1) // 26, 0)
    table = np.zeros((vocabulary, len(letters) + 1), np.uint8)
    table[:, 0] = ord(" ")
    table[:, 1:] = np.stack(letters[::-1], axis=1)
    return table


def text_blocks(lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK, *,
                vocabulary: int = 50_000, zipf_exponent: float = 1.0, median_length: float = 20.0,
                length_sigma: float = 0.8, max_length: int = 1_000, informative: float = 0.3,
                stopwords: int = 100, weight_scale: float = 2.0, bias: float = 0.0) -> Iterator[bytes]:
    """Bag of words: ``1 |w c a ba b a nkq ...`` (a word repeated in a document is repeated).

    Model: words are ranks 1..``vocabulary`` of a Zipf law, P(rank r) ∝ r^-``zipf_exponent``,
    written as short pseudo-words (``_word_table``). A document has
    ``clip(round(median_length · exp(length_sigma · Z)), 1, max_length)`` words (log-normal
    lengths: median 20, mean about 27, a long tail), each drawn independently. A random
    ``informative`` fraction of the words below the ``stopwords`` most frequent ranks has a
    weight ``β_w ~ N(0, weight_scale²)``, every other word 0; the label is +1 with probability
    ``sigmoid(bias + Σ_tokens β_w)`` (a logistic model over word counts), else -1. With the
    defaults (200,000 documents): 49% positive; the most frequent word is 9% of the 5.4M words,
    the 1,000th appears ~480 times and half the vocabulary fewer than 20 times; the true model's
    log loss is ~0.34 against 0.693 for the best constant, and a linear learner on the counts
    (the right model, which cannot know the rare words' weights) reaches ~0.53.

    Streams (children of SeedSequence(seed)): 0 the model (informative mask, weights),
    1 lengths (2 uniforms per document), 2 words (1 uniform per word), 3 labels (1 per document).
    """
    if vocabulary < 1:
        raise ValueError(f"vocabulary must be >= 1, got {vocabulary}")
    model, lengths_rng, words_rng, labels_rng = _streams(seed, 4)
    chosen = model.random(vocabulary) < informative
    chosen[:stopwords] = False
    weights = np.where(chosen, weight_scale * _normal(model, vocabulary), 0.0)
    cdf = _zipf_cdf(vocabulary, zipf_exponent)
    table = _word_table(vocabulary)
    width = max(table.shape[1], 6)
    headers = np.zeros((2, width), np.uint8)
    headers[0, :6] = np.frombuffer(b"\n-1 |w", np.uint8)
    headers[1, :5] = np.frombuffer(b"\n1 |w", np.uint8)
    for n in _block_sizes(lines, block):
        length = np.clip(np.rint(median_length * np.exp(length_sigma * _normal(lengths_rng, n))),
                         1, max_length).astype(np.int64)
        words = _draw(cdf, words_rng.random(int(length.sum())))
        line = np.repeat(np.arange(n), length)
        margin = bias + np.bincount(line, weights=weights[words], minlength=n)
        positive = labels_rng.random(n) < _sigmoid(margin)
        # One row per header (newline, label, namespace) and one per word, in file order.
        rows = np.zeros((n + len(words), width), np.uint8)
        first_word = np.cumsum(length) - length
        rows[np.arange(n) + first_word] = headers[positive.astype(np.intp)]
        rows[np.arange(len(words)) + line + 1, :table.shape[1]] = table[words]
        yield rows[rows != 0].tobytes()[1:] + b"\n"


# ---------------------------------------------------------------------------------------------
# regression

def regression_blocks(lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK, *,
                      dense: int = 16, sparse: int = 16, density: float = 0.1,
                      scale_exponents: tuple = (-3.0, 3.0), intercept: float = 2.0,
                      noise: float = 1.0) -> Iterator[bytes]:
    """Real labels, features of very different scales: ``5.1234 |a a0:0.0012 a1:-731.2 ...
    |b b0:... |s s3:0.04``.

    Model: ``dense`` features (namespaces ``a`` and ``b``, half each, always present) and
    ``sparse`` ones (namespace ``s``, each present in a line with probability ``density``,
    else absent). Feature j has its own scale ``c_j = 10^e_j``, the exponents evenly spaced
    over ``scale_exponents`` (-3..3) and assigned to features in a seeded random order.
    Even-numbered features are signed, ``x = c_j · Z``; odd ones positive like prices or
    counts, ``x = c_j · exp(Z / 2)`` (Z standard normal). The label is
    ``intercept + Σ_j β_j x_j / c_j + noise · Z``, ``β_j ~ N(0, 1)``, summed over the features
    present: every feature matters about as much, whatever its scale, so a learner that is not
    scale-free must cope with weights from ~1e-3 to ~1e3 (200,000 lines, squared loss: best
    constant 16.1, noise alone 1.0, ``--scinol2`` 1.07, olcli's default AdaGrad 7.8). Values are
    written with 4-5 significant digits at the feature's scale (``max(0, 4 - floor(e_j))``
    decimals), labels with 4 decimals.

    Streams (children of SeedSequence(seed)): 0 the model (scale order, β), 1 feature values
    (2 uniforms per feature per line), 2 presence of the sparse features (1 uniform per sparse
    feature per line), 3 label noise (2 uniforms per line).
    """
    features = dense + sparse
    if features < 1:
        raise ValueError("need at least one feature")
    model, values_rng, present_rng, noise_rng = _streams(seed, 4)
    exponents = np.linspace(*scale_exponents, features)[np.argsort(model.random(features), kind="stable")]
    scales = 10.0 ** exponents
    beta = _normal(model, features)
    decimals = [max(0, 4 - int(np.floor(e))) for e in exponents]
    names = ([f"a{j}" for j in range(dense // 2)] + [f"b{j}" for j in range(dense - dense // 2)]
             + [f"s{j}" for j in range(sparse)])
    starts = {0: " |a", dense // 2: " |b", dense: " |s"}
    for n in _block_sizes(lines, block):
        z = _normal(values_rng, n * features).reshape(n, features)
        x = np.where(np.arange(features) % 2 == 0, z, np.exp(z / 2)) * scales
        present = np.ones((n, features), bool)
        present[:, dense:] = present_rng.random(n * sparse).reshape(n, sparse) < density
        label = intercept + (np.where(present, x / scales, 0.0) * beta).sum(axis=1) + noise * _normal(noise_rng, n)
        columns = [_fixed(label, 4)]
        for j in range(features):
            if j in starts:
                columns.append(starts[j].encode())
            token = np.hstack([np.broadcast_to(np.frombuffer(f" {names[j]}:".encode(), np.uint8),
                                               (n, len(names[j]) + 2)), _fixed(x[:, j], decimals[j])])
            token[~present[:, j]] = 0
            columns.append(token)
        yield _render(n, columns)


# ---------------------------------------------------------------------------------------------
# multiclass

def multiclass_blocks(lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK, *,
                      classes: int = 10, numeric: int = 20, categorical: tuple = (100, 10_000),
                      temperature: float = 1.5) -> Iterator[bytes]:
    """K classes: ``3 |x x0:0.1234 ... x19:-1.0021 |c c=12 |d d=4410``.

    Model: ``numeric`` standard-normal features (namespace ``x``, 4 decimals) and one
    categorical feature per entry of ``categorical`` (namespaces ``c``, ``d``, ...; values
    0..cardinality-1, Zipf(1.1) over the values, so a few common and a long tail). Class k
    (1..``classes``) has score ``s_k = b_k + temperature · (Σ_j W_kj x_j / √numeric +
    Σ_ns E_k,ns[value])`` with ``W, E ~ N(0, 1)`` and ``b_k ~ N(0, 1)`` (unequal class
    frequencies); the label is drawn from softmax(s). A linear model with one weight vector per
    class is the right model (``--softmax K`` exactly, ``--oaa K`` nearly), and the labels are
    noisy: even the true model errs on a fair share of lines.

    Streams (children of SeedSequence(seed)): 0 the model, 1 numeric features (2 uniforms each),
    2 categorical values (1 uniform each), 3 labels (1 uniform per line).
    """
    if classes < 2:
        raise ValueError(f"classes must be >= 2, got {classes}")
    model, numeric_rng, categorical_rng, labels_rng = _streams(seed, 4)
    class_bias = _normal(model, classes)
    w = _normal(model, classes * numeric).reshape(numeric, classes) / np.sqrt(max(numeric, 1))
    effects = [_normal(model, cardinality * classes).reshape(cardinality, classes) for cardinality in categorical]
    cdfs = [_zipf_cdf(cardinality, 1.1) for cardinality in categorical]
    namespaces = "cdefghijklmnopqrstuvwyz"[:len(categorical)]
    for n in _block_sizes(lines, block):
        x = _normal(numeric_rng, n * numeric).reshape(n, numeric)
        u = categorical_rng.random(n * len(categorical)).reshape(n, len(categorical))
        values = [_draw(cdf, u[:, i]) for i, cdf in enumerate(cdfs)]
        score = x @ w
        for effect, v in zip(effects, values):
            score = score + effect[v]
        score = class_bias + temperature * score
        probability = np.exp(score - score.max(axis=1, keepdims=True))
        cumulative = np.cumsum(probability, axis=1)
        draw = labels_rng.random(n) * cumulative[:, -1]
        label = np.minimum((cumulative <= draw[:, None]).sum(axis=1), classes - 1) + 1
        columns = [_digits(label), b" |x"]
        for j in range(numeric):
            columns += [f" x{j}:".encode(), _fixed(x[:, j], 4)]
        for ns, v in zip(namespaces, values):
            columns += [f" |{ns} {ns}=".encode(), _digits(v)]
        yield _render(n, columns)


# ---------------------------------------------------------------------------------------------
# Entry points

KINDS: dict[str, Callable[..., Iterator[bytes]]] = {
    "click": click_blocks, "text": text_blocks, "regression": regression_blocks,
    "multiclass": multiclass_blocks,
}


def blocks(kind: str, lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK,
           **params) -> Iterator[bytes]:
    """The lines of ``kind`` as consecutive ``bytes`` chunks of at most ``block`` lines."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    return KINDS[kind](lines, seed, block, **params)


def generate(kind: str, lines: int, seed: int = DEFAULT_SEED, block: int = DEFAULT_BLOCK, **params) -> bytes:
    """All the lines at once (small sizes: tests)."""
    return b"".join(blocks(kind, lines, seed, block, **params))


def write(kind: str, out: str | os.PathLike | BinaryIO, lines: int, seed: int = DEFAULT_SEED,
          block: int = DEFAULT_BLOCK, **params) -> None:
    """Write the lines to a binary file object, or to a path (``-`` = stdout) through a
    temporary file renamed at the end."""
    if not isinstance(out, (str, os.PathLike)):
        for chunk in blocks(kind, lines, seed, block, **params):
            out.write(chunk)
        return
    if os.fspath(out) == "-":
        write(kind, sys.stdout.buffer, lines, seed, block, **params)
        sys.stdout.buffer.flush()
        return
    path = os.fspath(out)
    temporary = f"{path}.tmp{os.getpid()}"
    try:
        with open(temporary, "wb") as f:
            write(kind, f, lines, seed, block, **params)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m olcli.datagen", description="Write seeded synthetic data as VW text lines.",
        epilog="Full/small sizes: " + ", ".join(f"{k} {FULL_LINES[k]:,}/{SMALL_LINES[k]:,}" for k in KINDS))
    parser.add_argument("kind", choices=list(KINDS))
    parser.add_argument("--lines", type=int, help="number of lines (default: the kind's full size)")
    parser.add_argument("--small", action="store_true", help="the kind's small (test) size")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"default {DEFAULT_SEED}")
    parser.add_argument("-o", "--output", default="-", help="file to write, '-' = stdout (default)")
    parser.add_argument("--block", type=int, default=DEFAULT_BLOCK,
                        help="lines formatted at a time (memory only; the output is the same)")
    parser.add_argument("--ctr", type=float, help="click: the average click rate (e.g. 0.03)")
    parser.add_argument("--vocabulary", type=int, help="text: number of distinct words (50,000)")
    parser.add_argument("--classes", type=int, help="multiclass: number of classes K (10)")
    args = parser.parse_args(argv)
    params = {name: getattr(args, name) for name, kind in
              (("ctr", "click"), ("vocabulary", "text"), ("classes", "multiclass"))
              if getattr(args, name) is not None}
    for name, kind in (("ctr", "click"), ("vocabulary", "text"), ("classes", "multiclass")):
        if name in params and args.kind != kind:
            parser.error(f"--{name} applies to {kind} only")
    lines = args.lines if args.lines is not None else (SMALL_LINES if args.small else FULL_LINES)[args.kind]
    try:
        write(args.kind, args.output, lines, args.seed, args.block, **params)
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except ValueError as exc:
        parser.error(str(exc))


if __name__ == "__main__":
    main()
