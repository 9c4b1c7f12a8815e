"""Feature generation after parsing: interactions (VW's -q, --cubic, --interactions).

An interaction is a sequence of namespace letters (a namespace is known by the
first character of its name, ' ' for the default namespace, as in VW), with
WILDCARD (':') matching any namespace present in the example. For each example:

- wildcards expand to the letters present, the first position varying slowest,
  and an interaction with a wildcard is generated in sorted letter order
  (``f:T`` gives ``TTf`` and ``Tff``), while explicit ones keep their order
  (``-q fT`` hashes f first), as VW does;
- a letter sequence whose sorted letters equal an earlier one's is skipped, so
  ``-q ab -q ba`` or ``-q ::`` generate each namespace combination once (VW's
  default, without --leave_duplicate_interactions);
- consecutive equal letters take combinations with repetition, not permutations
  (``-q ff`` pairs feature i with features j >= i), as VW does by default;
- a generated feature's index is VW's FNV-style combination of the masked
  indices, ``h = i1; h = (FNV_PRIME * h) ^ i_k`` for each next feature, masked,
  and its value is the product of the values.

With ``--leave-duplicate-interactions`` (flag LEAVE_DUPLICATES) nothing is
skipped and wildcards expand to every sequence of present letters (``-q ::``
gives ab and ba); with ``--permutations`` (flag PERMUTATIONS) equal letters pair
every feature with every feature (``-q ff``: i with all j). An interaction with a
repeated letter is generated with its letters sorted (``--cubic aba`` is aab),
in every mode, as VW 9 does (FeatureSpec.build sorts the explicit ones).

N-grams (``--ngram``, ``--skips``, add_ngrams): VW's n-grams over the token
sequence of a namespace, added to that namespace before interactions.

The result matches ``vw --audit`` indices and VW's feature counts.
"""

import numpy as np
from olcli.engine.jit import njit

WILDCARD = 256
MAX_INTERACTION = 7
FNV_PRIME = np.uint64(16777619)

# namespace_mode values (per first letter)
NORMAL, IGNORED, LINEAR_IGNORED = 0, 1, 2

# The parser's feature spec vector (parsing.FeatureSpec.namespace_mode, int64): the
# 256 namespace modes, then per namespace letter its n-gram length and skips, the
# interaction flags and the hash seed.
NGRAM_AT, SKIPS_AT, FLAGS_AT, SEED_AT = 256, 512, 768, 769
SPEC_SIZE = 770
PERMUTATIONS, LEAVE_DUPLICATES = 1, 2   # bits of spec[FLAGS_AT]
HASH_STRINGS = 4                         # bit of spec[FLAGS_AT]: VW's --hash strings (parse.name_hash)
NGRAM_PRIME = np.uint64(27942141)       # VW's quadratic_constant: h = h * P + next token's index
NGRAM_NAME = -2                          # names[:, N_NAME_START] of an n-gram (its tokens are its components)

# Columns of the `names` table kept in record mode (--audit, --invert-hash): for a
# linear feature the byte spans of its namespace and name in the chunk; for a
# generated one, the positions of its component features (-1 beyond its length).
N_NS_START, N_NS_END, N_NAME_START, N_NAME_END, N_COMPONENTS = 0, 1, 2, 3, 4
NAME_COLUMNS = N_COMPONENTS + MAX_INTERACTION


def namespace_letters(text: str) -> bytes:
    """The namespace bytes of option letters (--ignore, --keep, -q ...): each
    character stands for the namespaces whose names start with it, i.e. with the
    first byte of its UTF-8 encoding, which is how the parser knows a namespace.
    Any Unicode letter works; letters that share a first byte (Cyrillic а..п all
    start with 0xD0) name the same namespaces, as in VW, which keys namespaces by
    their first byte. Arguments the OS could not decode (surrogate escapes) give
    back their original bytes."""
    out = bytearray()
    for character in text:
        out.append(character.encode("utf-8", "surrogateescape")[0])
    return bytes(out)


@njit
def grow(index, value, letters, names, needed):
    """Bigger feature arrays holding at least ``needed`` entries (contents kept);
    ``names`` grows too in record mode (it has no rows otherwise)."""
    size = max(2 * len(index), needed)
    new_index = np.empty(size, np.int32)
    new_value = np.empty(size, np.float64)
    new_letters = np.empty(size, np.uint8)
    # Plain loops: numba compiles slice assignment slowly (seconds), loops instantly.
    for k in range(len(index)):
        new_index[k] = index[k]
        new_value[k] = value[k]
        new_letters[k] = letters[k]
    if names.shape[0] > 0:
        new_names = np.empty((size, NAME_COLUMNS), np.int64)
        for k in range(names.shape[0]):
            for c in range(NAME_COLUMNS):
                new_names[k, c] = names[k, c]
        names = new_names
    return new_index, new_value, new_letters, names


@njit(inline="always")
def clear_names(names, position):
    """Row ``position`` of the names table to -1 (no name, no components)."""
    for c in range(NAME_COLUMNS):
        names[position, c] = -1


@njit
def _sort_small(values, length):
    """Insertion sort of values[:length] in place (length <= MAX_INTERACTION).
    Hand-written: numba compiles np.sort slowly, and this is all we need."""
    for i in range(1, length):
        v = values[i]
        j = i - 1
        while j >= 0 and values[j] > v:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = v


@njit
def _fixed_sorted(interactions, lengths, s, out):
    """The fixed (non-wildcard) letters of interaction ``s``, sorted, in ``out``;
    returns how many."""
    n = 0
    for p in range(lengths[s]):
        if interactions[s, p] != WILDCARD:
            out[n] = interactions[s, p]
            n += 1
    _sort_small(out, n)
    return n


@njit
def _covered_by_earlier(combo, length, s, interactions, lengths, fixed):
    """Whether an earlier interaction r < s generates the letter combination
    ``combo`` (sorted; all its letters present). Interaction r generates every
    present combination of its length that contains its fixed letters (as a
    multiset), so this is VW's rule "skip a combination seen before" without
    keeping the combinations seen."""
    for r in range(s):
        if lengths[r] != length:
            continue
        n_fixed = _fixed_sorted(interactions, lengths, r, fixed)
        i = 0  # two pointers over the sorted fixed letters and the sorted combination
        for p in range(length):
            if i < n_fixed and fixed[i] == combo[p]:
                i += 1
        if i == n_fixed:
            return True
    return False


@njit
def _letter_counts(letters, lo, hi):
    """counts[l + 1] = features of namespace letter l in [lo, hi); the present letters."""
    counts = np.zeros(257, np.int64)
    for j in range(lo, hi):
        counts[letters[j] + 1] += 1
    present = np.empty(256, np.int64)
    n_present = 0
    for letter in range(256):
        if counts[letter + 1] > 0:
            present[n_present] = letter
            n_present += 1
    return counts, present, n_present


@njit(inline="always")
def _multisets(count, m):
    """C(count + m - 1, m): the features of m equal consecutive letters (combinations
    with repetition), as a float (it may be astronomically large)."""
    r = 1.0
    for k in range(m):
        r = r * (count + k) / (k + 1)
    return r


@njit
def interaction_size(letters, lo, hi, interactions, lengths, flags=0):
    """How many features the interactions generate for the linear features [lo, hi),
    computed without generating them (an upper bound: combinations an earlier
    interaction already generated are counted again). Explicit interactions: the
    product over runs of equal letters of C(c + m - 1, m); with wildcards, a sum
    over the present letters' multiplicities (a small dynamic program), since the
    letters of a wildcard combination are sorted."""
    if hi <= lo or len(lengths) == 0:
        return 0.0
    counts, present, n_present = _letter_counts(letters, lo, hi)
    total = 0.0
    if (flags & (PERMUTATIONS | LEAVE_DUPLICATES)) != 0:  # not HASH_STRINGS, a bit of the same word
        # --permutations / --leave-duplicate-interactions: the product of the
        # namespaces' sizes (every feature of a wildcard position), a bound
        for s in range(len(lengths)):
            product = 1.0
            for p in range(lengths[s]):
                letter = interactions[s, p]
                product *= (hi - lo) if letter == WILDCARD else counts[letter + 1]
            total += product
        return total
    dp = np.empty(MAX_INTERACTION + 1)
    step = np.empty(MAX_INTERACTION + 1)
    for s in range(len(lengths)):
        length = lengths[s]
        n_wild = 0
        usable = True
        for p in range(length):
            letter = interactions[s, p]
            if letter == WILDCARD:
                n_wild += 1
            elif counts[letter + 1] == 0:
                usable = False
        if not usable:
            continue
        if n_wild == 0:
            product = 1.0
            p = 0
            while p < length:
                q = p
                while q + 1 < length and interactions[s, q + 1] == interactions[s, p]:
                    q += 1
                product *= _multisets(counts[interactions[s, p] + 1], q - p + 1)
                p = q + 1
            total += product
            continue
        for u in range(n_wild + 1):
            dp[u] = 0.0
        dp[0] = 1.0
        for j in range(n_present):
            letter = present[j]
            fixed = 0
            for p in range(length):
                if interactions[s, p] == letter:
                    fixed += 1
            for u in range(n_wild + 1):
                step[u] = 0.0
            for u in range(n_wild + 1):
                if dp[u] == 0.0:
                    continue
                for t in range(n_wild - u + 1):
                    m = fixed + t
                    factor = _multisets(counts[letter + 1], m) if m > 0 else 1.0
                    step[u + t] += dp[u] * factor
            for u in range(n_wild + 1):
                dp[u] = step[u]
        total += dp[n_wild]
    return total


@njit
def _has_repeat(combo, length):
    for p in range(1, length):
        for q in range(p):
            if combo[p] == combo[q]:
                return True
    return False


@njit
def interact(index, value, letters, names, lo, hi, n_features, interactions, lengths, mask, flags=0):
    """Append the interaction features of the linear features [lo, hi) at n_features.

    Returns (index, value, letters, names, n_features): the arrays grow when needed.
    A wildcard interaction enumerates its wildcard letters as non-decreasing
    sequences in order (the first wildcard varying slowest): exactly the distinct
    sorted combinations, in the order of their first appearance among all
    sequences, so no combination is visited twice and the work is proportional
    to the features generated (see interaction_size). ``flags``: PERMUTATIONS,
    LEAVE_DUPLICATES (module docstring).
    """
    permutations = (flags & PERMUTATIONS) != 0
    leave = (flags & LEAVE_DUPLICATES) != 0
    n = hi - lo
    if n == 0 or len(lengths) == 0:
        return index, value, letters, names, n_features
    counts, present, n_present = _letter_counts(letters, lo, hi)
    starts = np.cumsum(counts)  # starts[l]: first slot of letter l in `order`
    order = np.empty(n, np.int64)
    fill = starts[:256].copy()
    for j in range(lo, hi):
        order[fill[letters[j]]] = j
        fill[letters[j]] += 1
    combo = np.empty(MAX_INTERACTION, np.int64)
    fixed = np.empty(MAX_INTERACTION, np.int64)
    digits = np.zeros(MAX_INTERACTION, np.int64)
    for s in range(len(lengths)):
        length = lengths[s]
        n_wild = 0
        usable = True
        for p in range(length):
            if interactions[s, p] == WILDCARD:
                n_wild += 1
            elif counts[interactions[s, p] + 1] == 0:
                usable = False
        if not usable:
            continue
        for w in range(n_wild):
            digits[w] = 0
        while True:
            w = 0
            for p in range(length):
                if interactions[s, p] == WILDCARD:
                    combo[p] = present[digits[w]]
                    w += 1
                else:
                    combo[p] = interactions[s, p]
            if leave:
                if _has_repeat(combo, length):
                    _sort_small(combo, length)
                covered = False
            elif n_wild > 0:
                _sort_small(combo, length)
                covered = _covered_by_earlier(combo, length, s, interactions, lengths, fixed)
            else:
                ordered = combo[:length].copy()
                _sort_small(ordered, length)
                covered = _covered_by_earlier(ordered, length, s, interactions, lengths, fixed)
            if not covered:
                index, value, letters, names, n_features = _emit(
                    index, value, letters, names, n_features, combo, length, counts, starts, order, mask,
                    permutations)
            # the next sequence of wildcard letters: every one (leave), else the non-decreasing ones
            w = n_wild - 1
            while w >= 0 and digits[w] == n_present - 1:
                w -= 1
            if w < 0:
                break
            digits[w] += 1
            for v in range(w + 1, n_wild):
                digits[v] = 0 if leave else digits[w]
    return index, value, letters, names, n_features


@njit
def _emit(index, value, letters, names, n_features, combo, length, counts, starts, order, mask, permutations):
    """All features of one letter combination (combinations with repetition for
    consecutive equal letters, every pair with ``permutations``)."""
    position = np.zeros(length, np.int64)
    mask64 = np.uint64(mask)
    while True:
        h = np.uint64(0)
        x = 1.0
        for p in range(length):
            j = order[starts[combo[p]] + position[p]]
            i = np.uint64(index[j])
            h = i if p == 0 else (FNV_PRIME * h) ^ i
            x *= value[j]
        if n_features == len(index):
            index, value, letters, names = grow(index, value, letters, names, n_features + 1)
        index[n_features] = np.int32(h & mask64)
        value[n_features] = x
        letters[n_features] = 0
        if names.shape[0] > 0:
            clear_names(names, n_features)
            for p in range(length):
                names[n_features, N_COMPONENTS + p] = order[starts[combo[p]] + position[p]]
        n_features += 1
        p = length - 1
        while p >= 0:
            position[p] += 1
            if position[p] < counts[combo[p] + 1]:
                break
            p -= 1
        if p < 0:
            break
        for q in range(p + 1, length):
            position[q] = position[q - 1] if combo[q] == combo[q - 1] and not permutations else 0
    return index, value, letters, names, n_features


@njit
def add_ngrams(index, value, letters, names, lo, hi, n_features, spec, mask):
    """Append VW's n-grams and skip-grams of the linear features [lo, hi) at
    n_features (VW's generateGrams/addgrams, parse_example.cc).

    For each namespace letter l with n = spec[NGRAM_AT + l] >= 2, over the
    sequence t_0, t_1, ... of its features in the order of the line (all
    namespaces starting with l, as VW's feature group): for g = 1 .. n-1 extra
    tokens and every gap vector (s_1..s_g) with s_1 + ... + s_g <= the letter's
    skips (in lexicographic order), the features t_i, t_{i+m_1}, ..., t_{i+m_g}
    with m_k = k + s_1 + ... + s_k, for every i where the last one exists. Index
    ``h = i_0; h = h * 27942141 + i_k`` (uint64, masked), value 1, namespace l.
    Returns (index, value, letters, names, n_features)."""
    record = names.shape[0] > 0
    mask64 = np.uint64(mask)
    gaps = np.zeros(MAX_INTERACTION, np.int64)
    offsets = np.zeros(MAX_INTERACTION, np.int64)
    for letter in range(256):
        n = spec[NGRAM_AT + letter]
        if n < 2:
            continue
        count = 0
        for j in range(lo, hi):
            if letters[j] == letter:
                count += 1
        if count < 2:
            continue
        positions = np.empty(count, np.int64)
        c = 0
        for j in range(lo, hi):
            if letters[j] == letter:
                positions[c] = j
                c += 1
        skips = spec[SKIPS_AT + letter]
        for g in range(1, n):
            for k in range(g):
                gaps[k] = 0
            while True:
                total = 0
                for k in range(g):
                    total += gaps[k]
                    offsets[k] = k + 1 + total
                last = count - offsets[g - 1]
                if last > 0:
                    needed = n_features + last
                    if needed > len(index):
                        index, value, letters, names = grow(index, value, letters, names, needed)
                    for i in range(last):
                        h = np.uint64(index[positions[i]])
                        for k in range(g):
                            h = h * NGRAM_PRIME + np.uint64(index[positions[i + offsets[k]]])
                        index[n_features] = np.int32(h & mask64)
                        value[n_features] = 1.0
                        letters[n_features] = letter
                        if record:
                            clear_names(names, n_features)
                            names[n_features, N_NAME_START] = NGRAM_NAME
                            names[n_features, N_COMPONENTS] = positions[i]
                            for k in range(g):
                                names[n_features, N_COMPONENTS + 1 + k] = positions[i + offsets[k]]
                        n_features += 1
                # the next gap vector with sum <= skips (lexicographic)
                k = g - 1
                while k >= 0:
                    gaps[k] += 1
                    total = 0
                    for q in range(g):
                        total += gaps[q]
                    if total <= skips:
                        break
                    gaps[k] = 0
                    k -= 1
                if k < 0:
                    break
    return index, value, letters, names, n_features


_SIGN = 1 << 31  # int32 indices + _SIGN: non-negative, in the same order


STAMP_SLOTS = 4096  # merge_duplicates' table of stamps, by an index's low 12 bits


@njit(inline="always")
def merge_duplicates(index, value, lo, hi, order, stamps, stamp):
    """Sum the values of repeated indices in [lo, hi) (a repeated token, or two
    features hashed to one row), so every algorithm sees a proper sparse vector,
    as the papers define them: each index once, at its first occurrence, with the
    sum of its values x_1 + x_2 + ... left to right; entries that sum to 0 are
    dropped. Without a repeat (the common case) the example is left as it is.
    ``order``: a uint64[MERGE_SCRATCH] scratch. Returns the new end.

    A repeat is found with ``stamps`` (int64[STAMP_SLOTS]), which keeps, for the
    low 12 bits of an index, the last ``stamp`` that had one there: the caller
    gives each example of a call its own stamp, so a slot holding this one is a
    possible repeat, checked against the entries before it. Whatever ``stamps``
    holds, the result is the same (a stale stamp only costs that check), so the
    table is never cleared. One load and store per feature: it replaced a pass
    over every pair of a short example and a bit filter cleared per example
    (0.12 of 0.62 s of parsing the 1M-line click log)."""
    if not has_repeat(index, lo, hi, stamps, stamp):
        return hi
    return _merge_repeated(index, value, lo, hi, order)


@njit(inline="always")
def has_repeat(index, lo, hi, stamps, stamp):
    """Whether an index occurs twice in [lo, hi), found with ``stamps`` and ``stamp``
    as ``merge_duplicates`` says."""
    if hi - lo < 2:
        return False
    for j in range(lo, hi):
        slot = index[j] & (STAMP_SLOTS - 1)
        if stamps[slot] == stamp:
            for k in range(lo, j):
                if index[k] == index[j]:
                    return True
        stamps[slot] = stamp
    return False


MERGE_SCRATCH = 3 * 1024  # merge_duplicates' scratch (uint64): _merge_repeated's table and arrays
_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: the table's multiplicative hash
_EMPTY = np.uint64(0)   # _merge_repeated's empty slot (a full one holds 1 + its place in its low half)


@njit
def _merge_repeated(index, value, lo, hi, order):
    """merge_duplicates' work once it found a repeat in [lo, hi): the distinct indices in
    the order of their first occurrence, each with the sum of its values in the order they
    appear, sums of 0 dropped. An open-addressing table (``size`` >= 2 x the entries, a power
    of two; linear probing from the multiplicative hash of the index) whose slot holds
    (i + 2^31) * 2^32 + 1 + the index's place among the distinct ones (0: empty; any int32
    index fits): one pass, no sort. ``order``: uint64[MERGE_SCRATCH] holds the table and the
    arrays for up to 512 entries; a longer example uses arrays of its own."""
    n = hi - lo
    bits = 6
    while (1 << bits) < 2 * n:
        bits += 1
    size = 1 << bits
    if size + 2 * n <= len(order):
        table = order[:size]
        sums = order[size:size + n].view(np.float64)
        firsts = order[size + n:size + 2 * n].view(np.int64)
    else:
        table = np.empty(size, np.uint64)
        sums = np.empty(n, np.float64)
        firsts = np.empty(n, np.int64)
    for t in range(size):
        table[t] = _EMPTY
    shift = np.uint64(64 - bits)
    last = np.uint64(size - 1)
    d = 0
    for j in range(lo, hi):
        i = np.int64(index[j])
        shifted = np.uint64(i + _SIGN)
        slot = (np.uint64(i) * _FIBONACCI) >> shift
        while True:
            held = table[slot]
            if held == _EMPTY:
                table[slot] = (shifted << np.uint64(32)) | np.uint64(d + 1)
                firsts[d] = i
                sums[d] = value[j]
                d += 1
                break
            if held >> np.uint64(32) == shifted:
                sums[np.int64(held & np.uint64(0xFFFFFFFF)) - 1] += value[j]
                break
            slot = (slot + np.uint64(1)) & last
    kept = lo
    for a in range(d):
        if sums[a] != 0.0:
            index[kept] = np.int32(firsts[a])
            value[kept] = sums[a]
            kept += 1
    return kept
