"""Byte-level parsers for VW text and libsvm lines.

A chunk is a uint8 array holding whole lines. One kernel call turns it into flat
arrays: per example ``label`` (NaN when unlabeled), ``importance``, ``base``,
tag span, line number within the chunk, and a CSR layout ``row_ptr`` /
``index`` / ``value`` of hashed features. Malformed lines produce no example;
they are returned as data (an ``errors`` table of codes and byte spans) for
Python to turn into messages.

VW grammar, as VW's own text parser reads it::

    line      := [label_part] ('|' namespace)*
    label_part:= [label [importance [base]]] [tag]
    tag       := the last label-part token if it starts with "'" (stripped) or
                 touches the first '|' (no space between)
    namespace := [name[':' scale]] (ws feature)*   -- name empty: default namespace
    feature   := name[':' value]                    -- value 1 when omitted, 0 drops it

Tokens are separated by spaces or tabs; a trailing '\\r' is ignored; lines of
only white space are skipped. Namespace hash = murmur3(name, hash seed) (for the
default namespace murmur3("", seed): 0 unseeded); feature index = murmur3(name,
namespace hash) & mask: VW's ``--hash all``. With the spec's HASH_STRINGS flag
(VW's default ``--hash strings``) a name of digits only, namespace or feature, is
hashed as its integer plus the seed instead (``name_hash``).

libsvm grammar: ``label (index:value)* [# comment]``; ``qid:`` tokens are
ignored; index is a non-negative integer, taken modulo the table size.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine.features import (
    FLAGS_AT, HASH_STRINGS, IGNORED, LINEAR_IGNORED, MERGE_SCRATCH, N_NAME_END, N_NAME_START, N_NS_END, N_NS_START,
    NAME_COLUMNS, NGRAM_AT, SEED_AT, STAMP_SLOTS, add_ngrams, clear_names, grow, interact, interaction_size, merge_duplicates)
from olcli.engine.borrowed import borrowed
from olcli.engine.murmur import murmur3_32
from olcli.engine.numbers import NUMBER_OK, NUMBER_NONFINITE, parse_number

# Error codes; olcli/parsing.py holds the messages.
ERR_LABEL_NUMBER = 1      # label / importance / base is not a number
ERR_LABEL_TOKENS = 2      # more than label, importance, base and a tag
ERR_LABEL_NOT_BINARY = 3  # the loss needs -1/+1 (or 0/1) labels
ERR_IMPORTANCE = 4        # negative importance
ERR_FEATURE_VALUE = 5     # feat:value with a bad value
ERR_NONFINITE = 6         # NaN or infinite number anywhere
ERR_NAMESPACE_SCALE = 7   # |ns:scale with a bad scale
ERR_LIBSVM_INDEX = 8      # libsvm token that is not index:value
ERR_LIBSVM_LABEL = 9      # libsvm line without a label
ERR_LABEL_NOT_CLASS = 10  # multiclass label that is not one of 1..K
ERR_NUL = 11              # a NUL byte: binary data, not text
ERR_TOO_MANY_FEATURES = 12  # the interactions would generate more features than allowed per example
ERR_LABEL_NEGATIVE = 13   # the loss needs labels >= 0 (poisson)

# Bounds on the work of one kernel call (docs, "Guarantees"): a call
# stops at the first line after MAX_CALL_FEATURES features parsed or generated
# (the caller parses the rest in another call), and an example whose interactions
# would generate more than MAX_EXAMPLE_FEATURES features is refused as a bad line,
# with the count, before any of them is generated. A call then takes about a
# second at most and its arrays stay under ~300 MB.
MAX_CALL_FEATURES = 1 << 21
MAX_EXAMPLE_FEATURES = 1 << 23

# The largest feature value learned from: float32's largest, where VW's (float32) values
# become infinite. A larger value (from a namespace scale or a product of interacting
# values; the input itself cannot be infinite) is dropped, as a 0 is: squared, it would
# overflow the learners' float64 state (x^2 > 1.8e308 from |x| > 1.3e154), and VW never
# learns from it either (gd.cc skips |x| >= FLT_MAX; its predictions with it are NaN).
MAX_FEATURE_VALUE = 3.4028234663852886e38

# label_kind: what labels may be.
LABELS_ANY = 0            # any finite number
LABELS_BINARY = 1         # -1/+1, 0 read as -1
LABELS_HINGE = -1         # any finite number, 0 read as -1 (VW's hinge takes real labels)
LABELS_NONNEGATIVE = -2   # any finite number >= 0 (poisson: a count)
# label_kind K >= 2: classes 1..K

# Columns of the errors table (E_DETAIL: a number for the message, e.g. the feature count).
E_LINE, E_CODE, E_TOKEN_START, E_TOKEN_END, E_LINE_START, E_LINE_END, E_DETAIL = 0, 1, 2, 3, 4, 5, 6
N_ERROR_COLUMNS = 7

_SPACE, _TAB, _NL, _CR, _BAR, _COLON, _QUOTE, _HASH = 32, 9, 10, 13, 124, 58, 39, 35

# The class of each byte for the loops that scan a line: one load from this table per
# byte rather than three or four comparisons (0.06 s less CPU per 1M lines of the click
# log, measured with the line-end loop and the two token loops below changed together).
_C_BLANK, _C_BAR, _C_COLON, _C_NEWLINE, _C_NUL = 1, 2, 4, 8, 16
_CLASS = np.zeros(256, np.uint8)
_CLASS[_SPACE] = _CLASS[_TAB] = _C_BLANK
_CLASS[_BAR] = _C_BAR
_CLASS[_COLON] = _C_COLON
_CLASS[_NL] = _C_NEWLINE
_CLASS[0] = _C_NUL


@njit(inline="always")
def _is_ws(c):
    return c == _SPACE or c == _TAB


@njit(inline="always")
def count_lines(buf):
    """Number of lines in ``buf`` (a final line without '\\n' counts)."""
    n = 0
    for c in buf:
        if c == _NL:
            n += 1
    if len(buf) > 0 and buf[len(buf) - 1] != _NL:
        n += 1
    return n


@njit
def _arrays(n_lines, capacity, record):
    """The arrays a chunk kernel fills, for ``n_lines`` lines and ``capacity`` features."""
    labels = np.empty(n_lines, np.float64)
    importance = np.empty(n_lines, np.float64)
    base = np.empty(n_lines, np.float64)
    tags = np.empty((n_lines, 2), np.int64)
    example_line = np.empty(n_lines, np.int64)
    row_ptr = np.zeros(n_lines + 1, np.int64)
    index = np.empty(capacity, np.int32)
    value = np.empty(capacity, np.float64)
    letters = np.empty(capacity, np.uint8)     # namespace letter of each feature
    feature_count = np.empty(n_lines, np.int64)
    errors = np.zeros((n_lines, N_ERROR_COLUMNS), np.int64)
    names = np.empty((capacity if record else 0, NAME_COLUMNS), np.int64)
    order = np.empty(MERGE_SCRATCH, np.uint64)  # merge_duplicates' scratch
    stamps = np.zeros(STAMP_SLOTS, np.int64)   # merge_duplicates' stamps (any contents will do)
    scratch = np.empty(10, np.int64)           # _parse_vw_label_part's token spans
    return (labels, importance, base, tags, example_line, row_ptr, index, value, letters, names, feature_count,
            errors, order, stamps, scratch)


@njit
def _feature_capacity(length, n_lines):
    # A feature needs at least one byte and a separator, and each line adds one
    # constant, so this bounds the number of features in the chunk.
    return length // 2 + n_lines + 1


@njit
def _allocate(buf, record):
    n_lines = count_lines(buf)
    return _arrays(n_lines, _feature_capacity(len(buf), n_lines), record)


@njit(inline="always")
def _record_error(errors, n_errors, line, code, token_start, token_end, line_start, line_end):
    errors[n_errors, E_LINE] = line
    errors[n_errors, E_CODE] = code
    errors[n_errors, E_TOKEN_START] = token_start
    errors[n_errors, E_TOKEN_END] = token_end
    errors[n_errors, E_LINE_START] = line_start
    errors[n_errors, E_LINE_END] = line_end
    return n_errors + 1


@njit(inline="always")
def _check_label(label, label_kind):
    """Returns (label, error code): the logistic loss takes -1/+1 and maps 0 to
    -1; the hinge loss maps 0 to -1 and takes any other number as it is (VW's
    max(0, 1 - y p) with a real y); multiclass (label_kind = K) takes the
    integers 1..K."""
    if label_kind == LABELS_ANY:
        return label, 0
    if label_kind == LABELS_NONNEGATIVE:
        return label, (0 if label >= 0.0 else ERR_LABEL_NEGATIVE)
    if label_kind >= 2:  # 0 too: VW's --oaa reads labels 0..K-1 once it sees a 0 (learner.py)
        if label == math.floor(label) and 0.0 <= label <= label_kind:
            return label, 0
        return label, ERR_LABEL_NOT_CLASS
    if label == 0.0:
        return -1.0, 0
    if label == 1.0 or label == -1.0 or label_kind == LABELS_HINGE:
        return label, 0
    return label, ERR_LABEL_NOT_BINARY


@njit(inline="always")
def drop_unusable(index, value, lo, hi):
    """Drop the features in [lo, hi) whose |value| exceeds MAX_FEATURE_VALUE (or is
    infinite: a product that overflowed). Returns the new end; VW's feature counts
    still count them."""
    kept = lo
    for j in range(lo, hi):
        if abs(value[j]) <= MAX_FEATURE_VALUE:
            index[kept] = index[j]
            value[kept] = value[j]
            kept += 1
    return kept


@njit(inline="always")
def _line_bounds(buf, pos):
    """(content start, content end without '\\r', start of next line, position
    of the first NUL byte or -1)."""
    end = pos
    n = len(buf)
    nul = -1
    while end < n:
        kind = _CLASS[buf[end]]
        if kind >= _C_NEWLINE:
            if kind == _C_NEWLINE:
                break
            if nul < 0:
                nul = end
        end += 1
    next_pos = end + 1
    if end > pos and buf[end - 1] == _CR:
        end -= 1
    return pos, end, next_pos, nul


@njit(inline="always")
def _blank(buf, start, end):
    for k in range(start, end):
        if not _is_ws(buf[k]):
            return False
    return True


@njit(cache=True, nogil=True)
def count_lines_and_examples(buf):
    """(lines, lines the parser reads as examples) of ``buf``, by the parser's own rule
    (``_line_bounds`` and ``_blank``, as ``_parse_vw_chunk`` walks lines): a line of
    spaces and tabs only (one '\\r' before its end aside) is skipped, a line with a NUL
    byte is a bad line, any other is an example (or a bad line that a parse would find:
    telling those apart costs a parse). A final line without '\\n' counts."""
    n = len(buf)
    lines = 0
    examples = 0
    pos = 0
    while pos < n:
        start, end, next_pos, nul = _line_bounds(buf, pos)
        pos = next_pos
        lines += 1
        if nul < 0 and not _blank(buf, start, end):
            examples += 1
    return lines, examples


@njit
def _parse_vw_label_part(buf, start, bar, has_bar, scratch):
    """Label-part tokens; returns (label, importance, base, tag_start, tag_end,
    error code, error token start, error token end). ``scratch``: int64[10],
    allocated once per chunk (an allocation per line cost a third of parsing)."""
    starts = scratch[:5]
    ends = scratch[5:]
    n_tokens = 0
    k = start
    while k < bar:
        while k < bar and _is_ws(buf[k]):
            k += 1
        if k >= bar:
            break
        token_start = k
        while k < bar and not _is_ws(buf[k]):
            k += 1
        if n_tokens == 5:
            return np.nan, 1.0, 0.0, 0, 0, ERR_LABEL_TOKENS, token_start, k
        starts[n_tokens] = token_start
        ends[n_tokens] = k
        n_tokens += 1
    tag_start = 0
    tag_end = 0
    if n_tokens > 0:
        last = n_tokens - 1
        if buf[starts[last]] == _QUOTE or (has_bar and ends[last] == bar):
            tag_start = starts[last]
            tag_end = ends[last]
            if buf[tag_start] == _QUOTE:
                tag_start += 1
            n_tokens -= 1
    if n_tokens > 3:
        return np.nan, 1.0, 0.0, 0, 0, ERR_LABEL_TOKENS, starts[3], ends[n_tokens - 1]
    label, importance, base = np.nan, 1.0, 0.0
    for t in range(n_tokens):
        number, status = parse_number(buf, starts[t], ends[t])
        if status != NUMBER_OK:
            code = ERR_NONFINITE if status == NUMBER_NONFINITE else ERR_LABEL_NUMBER
            return np.nan, 1.0, 0.0, 0, 0, code, starts[t], ends[t]
        if t == 0:
            label = number
        elif t == 1:
            importance = number
        else:
            base = number
    if importance < 0.0:
        return np.nan, 1.0, 0.0, 0, 0, ERR_IMPORTANCE, starts[1], ends[1]
    return label, importance, base, tag_start, tag_end, 0, 0, 0


@njit(inline="always")
def name_hash(buf, start, end, seed, strings):
    """The hash of the name buf[start:end] seeded with ``seed``: MurmurHash3 (VW's
    ``--hash all``); with ``strings`` (VW's default ``--hash strings``, its
    hashstring) a name of ASCII digits only, the empty name included, is instead
    its integer plus the seed, in 64-bit unsigned arithmetic as VW's (a longer
    number wraps around 2^64), so ``|f 3:1`` is row hash(f) + 3."""
    if strings:
        number = np.uint64(0)
        k = start
        while k < end:
            digit = buf[k]
            if digit < 48 or digit > 57:
                return murmur3_32(buf, start, end, seed)
            number = number * np.uint64(10) + np.uint64(digit - 48)
            k += 1
        return number + np.uint64(seed)
    return murmur3_32(buf, start, end, seed)


@njit(inline="always")
def _parse_vw_features(buf, bar, end, mask, namespace_mode, index, value, letters, names, n_features):
    """Namespaces and features from the first '|' to the end of the line; features
    of --ignore'd namespaces are checked but not kept.
    Returns (n_features, error code, error token start, error token end)."""
    k = bar
    seed = np.uint64(namespace_mode[SEED_AT]) if len(namespace_mode) > SEED_AT else np.uint64(0)
    strings = len(namespace_mode) > FLAGS_AT and (namespace_mode[FLAGS_AT] & HASH_STRINGS) != 0
    default_hash = murmur3_32(buf, bar, bar, seed)  # the default namespace's: murmur3("", seed), 0 unseeded
    namespace_hash = default_hash
    scale = 1.0
    letter = _SPACE
    namespace_start = namespace_end = bar
    while k < end:
        c = buf[k]
        if _is_ws(c):
            k += 1
            continue
        if c == _BAR:
            k += 1
            name_start = k
            while k < end and (_CLASS[buf[k]] & (_C_BLANK | _C_BAR | _C_COLON)) == 0:
                k += 1
            namespace_hash = name_hash(buf, name_start, k, seed, strings) if k > name_start else default_hash
            letter = buf[name_start] if k > name_start else _SPACE
            namespace_start, namespace_end = name_start, k
            scale = 1.0
            if k < end and buf[k] == _COLON:
                scale_start = k + 1
                k = scale_start
                while k < end and not _is_ws(buf[k]) and buf[k] != _BAR:
                    k += 1
                scale, status = parse_number(buf, scale_start, k)
                if status != NUMBER_OK:
                    code = ERR_NONFINITE if status == NUMBER_NONFINITE else ERR_NAMESPACE_SCALE
                    return n_features, code, name_start, k
            continue
        token_start = k
        colon = -1
        while k < end:  # to a blank or a '|'; the first ':' ends the name
            kind = _CLASS[buf[k]]
            if kind != 0:
                if kind == _C_COLON:
                    if colon < 0:
                        colon = k
                elif kind <= _C_BAR:
                    break
            k += 1
        name_end = k if colon < 0 else colon
        x = 1.0
        if colon >= 0:
            x, status = parse_number(buf, colon + 1, k)
            if status != NUMBER_OK:
                code = ERR_NONFINITE if status == NUMBER_NONFINITE else ERR_FEATURE_VALUE
                return n_features, code, token_start, k
        x *= scale
        if x == 0.0 or namespace_mode[letter] == IGNORED:
            continue
        h = name_hash(buf, token_start, name_end, namespace_hash, strings)
        index[n_features] = np.int32(h & np.uint64(mask))
        value[n_features] = x
        letters[n_features] = letter
        if names.shape[0] > 0:
            clear_names(names, n_features)
            names[n_features, N_NS_START] = namespace_start
            names[n_features, N_NS_END] = namespace_end
            names[n_features, N_NAME_START] = token_start
            names[n_features, N_NAME_END] = name_end
        n_features += 1
    return n_features, 0, 0, 0


@njit
def _parse_vw_line(buf, start, end, mask, label_kind, namespace_mode, index, value, letters, names, n_features,
                   scratch):
    """One VW line. Returns (label, importance, base, tag_start, tag_end,
    n_features, error code, error token start, error token end).

    Not inlined into the chunk kernel: that saved another 0.1 s of CPU per 1M lines of
    the click log, but cost compile time in every kernel that inlines the parser (in an
    empty cache the vw kernel ~11 -> ~17 s, the libsvm one ~3.5 -> ~13.5 s, since Numba
    inlines before it drops the branch a kernel does not take; olcli serve's reply
    kernels inline the parser too), and CI from a clean checkout took 21 minutes with
    it. _parse_vw_features is inlined into it, drop_unusable and merge_duplicates into
    the chunk kernel, at no compile cost measured.
    """
    bar = start
    while bar < end and buf[bar] != _BAR:
        bar += 1
    label, weight, offset, tag_start, tag_end, code, bad_start, bad_end = \
        _parse_vw_label_part(buf, start, bar, bar < end, scratch)
    if code == 0 and not np.isnan(label):
        label, code = _check_label(label, label_kind)
        if code != 0:
            bad_start, bad_end = start, bar
    if code == 0:
        n_features, code, bad_start, bad_end = _parse_vw_features(
            buf, bar, end, mask, namespace_mode, index, value, letters, names, n_features)
    return label, weight, offset, tag_start, tag_end, n_features, code, bad_start, bad_end


@njit
def _parse_libsvm_line(buf, start, end, table_size, keep, index, value, letters, names, n_features):
    """Returns (label, n_features, error code, error token start, error token end)."""
    k = start
    label = np.nan
    while k < end:
        while k < end and _is_ws(buf[k]):
            k += 1
        if k >= end or buf[k] == _HASH:
            break
        token_start = k
        colon = -1
        while k < end and not _is_ws(buf[k]):
            if buf[k] == _COLON and colon < 0:
                colon = k
            k += 1
        if np.isnan(label):
            if colon >= 0:
                return label, n_features, ERR_LIBSVM_LABEL, token_start, k
            label, status = parse_number(buf, token_start, k)
            if status != NUMBER_OK:
                code = ERR_NONFINITE if status == NUMBER_NONFINITE else ERR_LABEL_NUMBER
                return np.nan, n_features, code, token_start, k
            continue
        if colon == token_start + 3 and buf[token_start] == 113 and buf[token_start + 1] == 105 \
                and buf[token_start + 2] == 100:  # "qid:"
            continue
        if colon <= token_start:
            return label, n_features, ERR_LIBSVM_INDEX, token_start, k
        feature = np.int64(0)
        for d in range(token_start, colon):
            digit = buf[d] - 48
            if digit < 0 or digit > 9:
                return label, n_features, ERR_LIBSVM_INDEX, token_start, k
            feature = (feature * 10 + digit) % table_size
        x, status = parse_number(buf, colon + 1, k)
        if status != NUMBER_OK:
            code = ERR_NONFINITE if status == NUMBER_NONFINITE else ERR_FEATURE_VALUE
            return label, n_features, code, token_start, k
        if x == 0.0 or not keep:
            continue
        index[n_features] = np.int32(feature)
        value[n_features] = x
        letters[n_features] = _SPACE  # libsvm features live in the default namespace
        if names.shape[0] > 0:  # the name is the index as written
            clear_names(names, n_features)
            names[n_features, N_NS_START] = token_start
            names[n_features, N_NS_END] = token_start
            names[n_features, N_NAME_START] = token_start
            names[n_features, N_NAME_END] = colon
        n_features += 1
    return label, n_features, 0, 0, 0


@njit
def _parse_libsvm_example(buf, start, end, mask, label_kind, namespace_mode, index, value, letters, names,
                          n_features):
    """One libsvm line, in the shape of _parse_vw_line (importance 1, base 0, no tag)."""
    label, n_features, code, bad_start, bad_end = _parse_libsvm_line(
        buf, start, end, np.int64(mask) + 1, namespace_mode[_SPACE] != IGNORED, index, value, letters, names,
        n_features)
    if code == 0 and np.isnan(label):
        code, bad_start, bad_end = ERR_LIBSVM_LABEL, start, end
    if code == 0:
        label, code = _check_label(label, label_kind)
        bad_start, bad_end = start, end
    return label, 1.0, 0.0, 0, 0, n_features, code, bad_start, bad_end


@njit
def _parse_chunk(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                 max_generated, budget, arrays, libsvm, interacting):
    """The chunk parser's one body (parse_lines says what it does and returns), filling
    ``arrays`` (``_arrays``'s, large enough for ``buf``; grown if interactions need more).
    ``buf`` and ``namespace_mode`` are borrowed views. ``libsvm`` (libsvm lines, else VW text)
    is None or True, a type: Numba compiles one format's line parser per signature (both in one
    loop made the libsvm parse ~20% slower); ``interacting`` (generate the interactions) is a
    run-time bool, so one compiled body per format serves lines with and without interactions
    (the build's cost is Numba typing and lowering each copy: benchmarks/results/install_time_s38.md).
    A function of its own, not inlined: ``parse_chunk`` and the compiled callers of
    ``parse_into`` (olcli serve's one-call entries) call the same dispatcher's bodies."""
    (labels, importance, base, tags, example_line, row_ptr, index, value, letters, names, feature_count, errors,
     order, stamps, scratch) = arrays
    # The loop works on borrowed views (engine/borrowed.py) of the feature arrays and the
    # scratch: arrays that a loop may replace (grow) and passes to calls had their references
    # counted at every line, atomically, ~a fifth of the text parse (perf). ``owners`` holds
    # the arrays the views are of (``arrays``' own, then each grown set, last the current one).
    owners = [(index, value, letters, names)]
    index, value, letters, names = borrowed(index), borrowed(value), borrowed(letters), borrowed(names)
    order, stamps, scratch = borrowed(order), borrowed(stamps), borrowed(scratch)
    some_linear_ignored = False
    for letter in range(256):
        if namespace_mode[letter] == LINEAR_IGNORED:
            some_linear_ignored = True
    # the feature spec's tail (features.NGRAM_AT...): n-grams of some namespace, interaction flags
    has_ngrams = False
    flags = np.int64(0)
    if len(namespace_mode) > FLAGS_AT:
        flags = np.int64(namespace_mode[FLAGS_AT])
        for letter in range(256):
            if namespace_mode[NGRAM_AT + letter] >= 2:
                has_ngrams = True
    # np.int64(0), not 0: a literal 0 would make Numba type (and compile) each
    # callee twice, once for the first iteration's literal and once for int64.
    n_examples = np.int64(0)
    n_features = np.int64(0)
    n_errors = np.int64(0)
    pos = np.int64(0)
    line = np.int64(0)
    work = np.int64(0)  # features parsed and generated in this call
    while pos < len(buf):
        if budget > 0 and work >= budget:
            break  # the caller parses the rest of the buffer in another call
        start, end, next_pos, nul = _line_bounds(buf, pos)
        pos = next_pos
        line += 1
        if _blank(buf, start, end):
            continue
        if nul >= 0:
            n_errors = _record_error(errors, n_errors, line, ERR_NUL, nul, nul + 1, start, end)
            continue
        needed = n_features + (end - start) // 2 + 2
        if needed > len(index):  # only interactions make the first estimate too small
            index, value, letters, names = _grown(owners, needed)
        first_feature = n_features
        if libsvm is not None:
            parsed = _parse_libsvm_example(buf, start, end, mask, label_kind, namespace_mode,
                                           index, value, letters, names, n_features)
        else:
            parsed = _parse_vw_line(buf, start, end, mask, label_kind, namespace_mode,
                                    index, value, letters, names, n_features, scratch)
        label, weight, offset, tag_start, tag_end, n_features, code, bad_start, bad_end = parsed
        if code != 0:
            n_features = first_feature
            n_errors = _record_error(errors, n_errors, line, code, bad_start, bad_end, start, end)
            continue
        if has_ngrams:  # --ngram: n-grams join their namespace, so interactions and --ignore-linear see them
            size = len(index)
            new_index, new_value, new_letters, new_names, n_features = add_ngrams(
                index, value, letters, names, first_feature, n_features, n_features, namespace_mode, mask)
            index, value, letters, names = _kept(owners, size, new_index, new_value, new_letters, new_names)
        linear_end = n_features
        work += linear_end - first_feature + 1
        if interacting:
            generated = interaction_size(letters, first_feature, linear_end, interactions, lengths, flags)
            if generated > max_generated:
                n_features = first_feature
                n_errors = _record_error(errors, n_errors, line, ERR_TOO_MANY_FEATURES, start, start, start, end)
                errors[n_errors - 1, E_DETAIL] = np.int64(min(generated, 9.0e18))
                continue
            work += np.int64(generated)
            needed = n_features + np.int64(generated) + 2
            if needed > len(index):  # one allocation of the right size, not many doublings
                index, value, letters, names = _grown(owners, needed)
            size = len(index)
            new_index, new_value, new_letters, new_names, n_features = interact(
                index, value, letters, names, first_feature, linear_end, n_features, interactions, lengths,
                mask, flags)
            index, value, letters, names = _kept(owners, size, new_index, new_value, new_letters, new_names)
        linear_ignored = 0
        if some_linear_ignored and not record:
            # --ignore-linear: such features only feed interactions; VW still counts them.
            # (Record mode keeps them: products name their components by position,
            # and VW's --audit lists them too.)
            kept = first_feature
            for j in range(first_feature, n_features):
                if j < linear_end and namespace_mode[letters[j]] == LINEAR_IGNORED:
                    linear_ignored += 1
                    continue
                index[kept] = index[j]
                value[kept] = value[j]
                letters[kept] = letters[j]
                kept += 1
            n_features = kept
        counted = n_features - first_feature + linear_ignored
        if not record:  # record mode names every occurrence, so it keeps repeats apart
            n_features = drop_unusable(index, value, first_feature, n_features)
            n_features = merge_duplicates(index, value, first_feature, n_features, order, stamps, n_examples + 1)
        if constant_index >= 0:
            if n_features == len(index):
                index, value, letters, names = _grown(owners, n_features + 1)
            index[n_features] = constant_index
            value[n_features] = 1.0
            if record:
                clear_names(names, n_features)
            n_features += 1
            counted += 1
        labels[n_examples] = label
        importance[n_examples] = weight
        base[n_examples] = offset
        tags[n_examples, 0] = tag_start
        tags[n_examples, 1] = tag_end
        example_line[n_examples] = line
        feature_count[n_examples] = counted
        n_examples += 1
        row_ptr[n_examples] = n_features
    index, value, letters, names = owners[len(owners) - 1]
    return (n_examples, labels, importance, base, tags, example_line, row_ptr,
            index, value, feature_count, n_errors, errors, line, names, pos)


@njit(inline="always")
def _grown(owners, needed):
    """``_parse_chunk``'s feature arrays grown to ``needed`` (``features.grow`` of the current
    owners, appended to ``owners``): borrowed views of the new ones."""
    index, value, letters, names = owners[len(owners) - 1]
    grown = grow(index, value, letters, names, needed)
    owners.append(grown)
    return borrowed(grown[0]), borrowed(grown[1]), borrowed(grown[2]), borrowed(grown[3])


@njit(inline="always")
def _kept(owners, size, index, value, letters, names):
    """The arrays ``add_ngrams`` or ``interact`` returned, given borrowed views of ``size``
    features: the same views when they did not grow, else the new arrays (they grow all four,
    to more than ``size``, names only in record mode), kept in ``owners``, as borrowed views."""
    if len(index) != size:
        if names.shape[0] == 0:   # not record mode: names is the (empty) array it always was
            names = owners[len(owners) - 1][3]
        owners.append((index, value, letters, names))
    return borrowed(index), borrowed(value), borrowed(letters), borrowed(names)



@njit(cache=True, nogil=True)
def parse_chunk(text, mask, constant_index, label_kind, spec, interactions, lengths, record, max_generated,
                budget, libsvm, interacting):
    """``parse_lines``' kernel: ``libsvm`` None or True (a type: one signature per format),
    ``interacting`` a bool (``_parse_chunk``). The kernel releases the GIL."""
    # Borrowed views (engine/borrowed.py): the helpers called per line and per
    # token take them without counting references (the caller holds the arrays).
    buf, namespace_mode = borrowed(text), borrowed(spec)
    return _parse_chunk(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                        max_generated, budget, _allocate(buf, record), libsvm, interacting)


def parse_lines(buf, libsvm, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                max_generated=MAX_EXAMPLE_FEATURES, budget=0):
    """Parse the whole VW lines (libsvm lines if ``libsvm``; their features are in
    the default namespace ' ') in ``buf``. ``constant_index`` < 0 means no
    constant; ``namespace_mode`` (256 entries, by first letter) says which
    namespaces are ignored or kept only for interactions; ``interactions`` rows
    (``lengths`` used) are namespace letters, features.WILDCARD for ':'.

    ``max_generated``: an example whose interactions would generate more features
    is a bad line (ERR_TOO_MANY_FEATURES, the count in E_DETAIL); ``budget`` > 0:
    stop at the first line that starts after ``budget`` features were parsed or
    generated.

    Returns (n_examples, labels, importance, base, tags, example_line, row_ptr,
    index, value, feature_count, n_errors, errors, n_lines, names, consumed);
    arrays are over-allocated, the counts say how much is valid; ``n_lines`` and
    ``consumed`` are the lines and bytes parsed (less than the buffer when the
    budget stopped the call). ``feature_count`` is each
    example's feature number as VW counts it. With ``record`` (--audit,
    --invert-hash) repeats are not merged and ``names`` (features.N_* columns)
    says where each feature's name is, or which features a product is made of.
    The kernel releases the GIL.
    """
    return parse_chunk(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                       float(max_generated), np.int64(budget), True if libsvm else None, len(lengths) > 0)


@njit(cache=True)
def parse_buffers(length):
    """Arrays for ``parse_into`` to fill, allocated once by a caller that parses many small
    buffers (``olcli serve``'s single-example path): enough for any buffer of whole lines up
    to ``length`` bytes (every line takes at least one byte)."""
    record = length < 0  # False, typed as a run-time bool
    return _arrays(length + 1, _feature_capacity(length, length + 1), record)


@njit(inline="always")
def parse_into(text, mask, constant_index, label_kind, spec, interactions, lengths, max_generated, buffers,
               libsvm, interacting):
    """``parse_lines``' kernel (the same ``_parse_chunk``, without record mode or budget) for
    compiled callers, filling ``buffers`` (``parse_buffers``') instead of allocating its arrays:
    no allocation per call for a buffer they fit (else new arrays, as ``parse_lines``). Returns
    what ``parse_lines`` returns; the arrays are ``buffers`` (or the new ones), valid until the
    next call. ``libsvm`` and ``interacting``: None or True (the entries' argument types;
    ``_parse_chunk`` takes ``interacting`` as a run-time bool)."""
    buf, namespace_mode = borrowed(text), borrowed(spec)
    (labels, importance, base, tags, example_line, row_ptr, index, value, letters, names, feature_count, errors,
     order, stamps, scratch) = buffers
    n_lines = count_lines(buf)
    record = n_lines < 0  # False, typed as a run-time bool
    # borrowed views: the caller holds the buffers; counting references to them was ~1 µs a call
    arrays = (borrowed(labels), borrowed(importance), borrowed(base), borrowed(tags), borrowed(example_line),
              borrowed(row_ptr), borrowed(index), borrowed(value), borrowed(letters), borrowed(names),
              borrowed(feature_count), borrowed(errors), borrowed(order), borrowed(stamps),
              borrowed(scratch))
    if n_lines > len(labels) or _feature_capacity(len(buf), n_lines) > len(index):
        arrays = _allocate(buf, record)
    else:  # as _arrays leaves them: row_ptr starts at 0, an error's E_DETAIL is 0 unless set
        row_ptr[0] = 0
        for line in range(n_lines):
            errors[line, E_DETAIL] = 0
    return _parse_chunk(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                        max_generated, np.int64(0), arrays, libsvm, interacting is not None)


@njit(cache=True, nogil=True)
def csr_examples(indptr, indices, data, labels, mask, constant_index, label_kind, keep):
    """The rows of a sparse matrix (CSR, column indices increasing within a row) as
    examples, exactly as the libsvm parser makes them from the lines
    ``label j:x_j ...``: zeros dropped, index j modulo the table size, repeated
    rows merged (engine/features.py), the constant last; ``keep`` False drops the
    features (--ignore of the default namespace). Labels are checked as the
    parser checks them (NaN = unlabeled).

    Returns (labels, row_ptr, index, value, feature_count, bad row or -1)."""
    n = len(indptr) - 1
    capacity = indptr[n] - indptr[0] + n
    out_labels = np.empty(n, np.float64)
    row_ptr = np.zeros(n + 1, np.int64)
    index = np.empty(capacity, np.int32)
    value = np.empty(capacity, np.float64)
    feature_count = np.empty(n, np.int64)
    order = np.empty(MERGE_SCRATCH, np.uint64)
    stamps = np.zeros(STAMP_SLOTS, np.int64)
    table_size = np.int64(mask) + 1
    n_features = np.int64(0)
    for e in range(n):
        label = labels[e]
        if not np.isnan(label):
            label, code = _check_label(label, label_kind)
            if code != 0:
                return out_labels, row_ptr, index, value, feature_count, e
        out_labels[e] = label
        first = n_features
        if keep:
            for k in range(indptr[e], indptr[e + 1]):
                x = data[k]
                if x == 0.0:
                    continue
                index[n_features] = np.int32(indices[k] % table_size)
                value[n_features] = x
                n_features += 1
        counted = n_features - first
        n_features = drop_unusable(index, value, first, n_features)
        n_features = merge_duplicates(index, value, first, n_features, order, stamps, e + 1)
        if constant_index >= 0:
            index[n_features] = constant_index
            value[n_features] = 1.0
            n_features += 1
            counted += 1
        feature_count[e] = counted
        row_ptr[e + 1] = n_features
    return out_labels, row_ptr, index, value, feature_count, np.int64(-1)
