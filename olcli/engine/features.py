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

The result matches ``vw --audit`` indices and VW's feature counts.
"""

import numpy as np
from numba import njit

WILDCARD = 256
MAX_INTERACTION = 7
FNV_PRIME = np.uint64(16777619)

# namespace_mode values (per first letter)
NORMAL, IGNORED, LINEAR_IGNORED = 0, 1, 2

# Columns of the `names` table kept in record mode (--audit, --invert-hash): for a
# linear feature the byte spans of its namespace and name in the chunk; for a
# generated one, the positions of its component features (-1 beyond its length).
N_NS_START, N_NS_END, N_NAME_START, N_NAME_END, N_COMPONENTS = 0, 1, 2, 3, 4
NAME_COLUMNS = N_COMPONENTS + MAX_INTERACTION


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
def _key(combo, length):
    """The sorted letters of a combination, packed (order-free identity)."""
    ordered = combo[:length].copy()
    _sort_small(ordered, length)
    key = np.int64(length)
    for p in range(length):
        key = key * 257 + ordered[p]
    return key


@njit
def interact(index, value, letters, names, lo, hi, n_features, interactions, lengths, mask):
    """Append the interaction features of the linear features [lo, hi) at n_features.

    Returns (index, value, letters, names, n_features): the arrays grow when needed.
    """
    n = hi - lo
    if n == 0 or len(lengths) == 0:
        return index, value, letters, names, n_features
    counts = np.zeros(257, np.int64)
    for j in range(lo, hi):
        counts[letters[j] + 1] += 1
    starts = np.cumsum(counts)  # starts[l]: first slot of letter l in `order`
    order = np.empty(n, np.int64)
    fill = starts[:256].copy()
    for j in range(lo, hi):
        order[fill[letters[j]]] = j
        fill[letters[j]] += 1
    present = np.empty(256, np.int64)
    n_present = 0
    for letter in range(256):
        if counts[letter + 1] > 0:
            present[n_present] = letter
            n_present += 1
    seen = np.empty(16, np.int64)
    n_seen = 0
    combo = np.empty(MAX_INTERACTION, np.int64)
    for s in range(len(lengths)):
        length = lengths[s]
        n_wild = 0
        for p in range(length):
            if interactions[s, p] == WILDCARD:
                n_wild += 1
        total = n_present ** n_wild
        for c in range(total):
            rest = c
            for p in range(length - 1, -1, -1):  # the first wildcard varies slowest
                if interactions[s, p] == WILDCARD:
                    combo[p] = present[rest % n_present]
                    rest //= n_present
                else:
                    combo[p] = interactions[s, p]
            if n_wild > 0:
                _sort_small(combo, length)
            usable = True
            for p in range(length):
                if counts[combo[p] + 1] == 0:
                    usable = False
            if not usable:
                continue
            key = _key(combo, length)
            duplicate = False
            for k in range(n_seen):
                if seen[k] == key:
                    duplicate = True
            if duplicate:
                continue
            if n_seen == len(seen):
                bigger = np.empty(2 * len(seen), np.int64)
                for k in range(n_seen):
                    bigger[k] = seen[k]
                seen = bigger
            seen[n_seen] = key
            n_seen += 1
            index, value, letters, names, n_features = _emit(
                index, value, letters, names, n_features, combo, length, counts, starts, order, mask)
    return index, value, letters, names, n_features


@njit
def _emit(index, value, letters, names, n_features, combo, length, counts, starts, order, mask):
    """All features of one letter combination (combinations with repetition for
    consecutive equal letters)."""
    position = np.zeros(length, np.int64)
    for p in range(1, length):
        if combo[p] == combo[p - 1]:
            position[p] = position[p - 1]
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
            position[q] = position[q - 1] if combo[q] == combo[q - 1] else 0
    return index, value, letters, names, n_features


@njit
def _sort_pairs(keys, values):
    """Stable bottom-up merge sort of (keys, values) by key, in place, so that
    repeats are summed in the order they appear. Hand-written: numba's
    np.argsort compiles slowly."""
    n = len(keys)
    other_keys = np.empty_like(keys)
    other_values = np.empty_like(values)
    width = 1
    source_keys, source_values, target_keys, target_values = keys, values, other_keys, other_values
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if source_keys[j] < source_keys[i]:
                    target_keys[k] = source_keys[j]
                    target_values[k] = source_values[j]
                    j += 1
                else:
                    target_keys[k] = source_keys[i]
                    target_values[k] = source_values[i]
                    i += 1
                k += 1
            while i < mid:
                target_keys[k] = source_keys[i]
                target_values[k] = source_values[i]
                i += 1
                k += 1
            while j < hi:
                target_keys[k] = source_keys[j]
                target_values[k] = source_values[j]
                j += 1
                k += 1
        source_keys, target_keys = target_keys, source_keys
        source_values, target_values = target_values, source_values
        width *= 2
    if source_keys is not keys:
        for k in range(n):
            keys[k] = source_keys[k]
            values[k] = source_values[k]


@njit
def merge_duplicates(index, value, lo, hi, bloom):
    """Sum the values of repeated indices in [lo, hi) (a repeated token, or two
    features hashed to one row), so every algorithm sees a proper sparse vector,
    as the papers define them; entries that sum to 0 are dropped. ``bloom`` is a
    uint64[64] scratch filter (short examples compare pairs instead): without a
    repeat (the common case) the example is left as it is; with one, the
    entries are sorted by index. Returns the new end."""
    if hi - lo < 2:
        return hi
    repeated = False
    if hi - lo <= 16:  # short examples: comparing pairs is cheaper than the filter
        for j in range(lo + 1, hi):
            for k in range(lo, j):
                if index[j] == index[k]:
                    repeated = True
    else:
        for w in range(len(bloom)):
            bloom[w] = 0
        for j in range(lo, hi):
            bit = index[j] & 4095
            word = bit >> 6
            flag = np.uint64(1) << np.uint64(bit & 63)
            if bloom[word] & flag:
                repeated = True
                break
            bloom[word] |= flag
    if not repeated:
        return hi
    sorted_index = index[lo:hi].copy()
    sorted_value = value[lo:hi].copy()
    _sort_pairs(sorted_index, sorted_value)
    real_repeat = False
    for k in range(1, hi - lo):
        if sorted_index[k] == sorted_index[k - 1]:
            real_repeat = True
            break
    if not real_repeat:  # a false alarm of the filter: keep the example as it is
        return hi
    out = lo
    for k in range(hi - lo):
        if out > lo and sorted_index[k] == index[out - 1]:
            value[out - 1] += sorted_value[k]
        else:
            index[out] = sorted_index[k]
            value[out] = sorted_value[k]
            out += 1
    kept = lo
    for j in range(lo, out):
        if value[j] != 0.0:
            index[kept] = index[j]
            value[kept] = value[j]
            kept += 1
    return kept
