"""Interactions and namespace filters against VW's own numbers and a naive generator."""

import json
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli.inputs import Chunk
from olcli.parsing import FeatureSpec, parse_chunk
from tests import naive

FNV = 16777619


def parse(text, specs=(), bits=18, constant=False, **filters):
    data = text.encode()
    chunk = Chunk("t.vw", 1, np.frombuffer(data, np.uint8))
    parsed = parse_chunk(chunk, "vw", bits, constant, False, FeatureSpec.build(tuple(specs), **filters))
    return [(parsed.index[parsed.row_ptr[e]:parsed.row_ptr[e + 1]].tolist(), int(parsed.feature_count[e]))
            for e in range(parsed.n_examples)]


# `vw --hash all --audit -b 18` (vowpalwabbit 9.11.9) on "1 |T abc |f x:2 y:3": the indices of
# the generated features, in VW's order.
LINE = "1 |T abc |f x:2 y:3\n"
VW_AUDIT = {
    ("Tf",): [148442, 196205],
    ("fT",): [138934, 60915],
    ("Tf", "fT"): [148442, 196205],
    ("::",): [219908, 148442, 196205, 198248, 244703, 84122],
    ("Tff",): [129666, 83765, 201356],
    ("f:T",): [93664, 118871, 129666, 83765, 201356],
    (":T:",): [30014, 93664, 118871, 129666, 83765, 201356],
    ("fT:f",): [187660, 155835, 225262, 28682, 52669, 167796, 238975],
}


@pytest.mark.parametrize("specs,expected", list(VW_AUDIT.items()))
def test_interaction_indices_equal_vw_audit(specs, expected):
    ((indices, count),) = parse(LINE, specs)
    assert indices[3:] == expected
    assert count == 3 + len(expected)


# `total feature number` that VW 9.11.9 prints for sample_data/vw_0002.dat with each option.
VW_TOTAL_FEATURES = [
    ([], 14996),
    (["-q", "Tf"], 27992),
    (["-q", "ff"], 105944),
    (["--ignore", "T"], 13996),
    (["-q", "TT"], 15996),
    (["--cubic", "Tff"], 105944),
    (["-q", "::"], 119940),
    (["--keep", "f"], 13996),
    (["--ignore-linear", "T", "-q", "Tf"], 27992),
]


@pytest.mark.parametrize("args,expected", VW_TOTAL_FEATURES)
def test_total_feature_number_equals_vw(cli, sample, args, expected):
    code, _, err = cli("train", sample / "vw_0002.dat", *args, "--report", "r.json")
    assert code == 0, err
    assert json.load(open("r.json"))["total_features"] == expected
    assert f"total feature number = {expected}" in err


def naive_interactions(features, specs, bits, permutations=False, leave=False):
    """VW 9's rules, written out: features are (letter, index, value) in order.
    A letter sequence with a repeated letter is sorted; without --leave_duplicate_
    interactions a wildcard sequence is sorted too and a sequence whose sorted
    letters were generated before is skipped; equal neighbours take j >= i unless
    --permutations."""
    mask = (1 << bits) - 1
    letters = sorted({f[0] for f in features})
    groups = {letter: [f for f in features if f[0] == letter] for letter in letters}
    seen, out = set(), []
    for spec in specs:
        choices = [letters if c == ":" else [c] for c in spec]
        for combo in product(*choices):
            if len(set(combo)) < len(combo) or (":" in spec and not leave):
                combo = tuple(sorted(combo))
            if any(c not in groups for c in combo):
                continue
            if not leave:
                if tuple(sorted(combo)) in seen:
                    continue
                seen.add(tuple(sorted(combo)))

            def walk(p, start, h, x):
                if p == len(combo):
                    out.append((h & mask, x))
                    return
                members = groups[combo[p]]
                first = start if p > 0 and combo[p] == combo[p - 1] and not permutations else 0
                for k in range(first, len(members)):
                    i = members[k][1]
                    walk(p + 1, k, i if p == 0 else ((FNV * h) ^ i), x * members[k][2])

            walk(0, 0, 0, 1.0)
    return out


namespace_letters = st.sampled_from("abcT")
features_st = st.lists(st.tuples(namespace_letters, st.sampled_from(["x", "y", "z", "w"]),
                                 st.sampled_from([1.0, 2.0, -0.5])), min_size=1, max_size=8)
spec_st = st.lists(st.text(st.sampled_from("abcT:"), min_size=2, max_size=4), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(features_st, spec_st, st.sampled_from([4, 18]))
def test_interactions_match_the_naive_generator(features, specs, bits):
    line = "1 " + " ".join(f"|{ns} {name}:{value}" for ns, name, value in features) + "\n"
    ((indices, count),) = parse(line, specs, bits)
    linear = [(ns, naive.vw_feature_index(ns, name, bits), value) for ns, name, value in features]
    expected = naive_interactions(linear, specs, bits)
    merged = naive.merge_repeats([(i, v) for _, i, v in linear] + expected)
    assert indices == [i for i, _ in merged]
    assert count == len(linear) + len(expected)


@settings(max_examples=150, deadline=None)
@given(features_st, spec_st, st.sampled_from([4, 18]), st.booleans(), st.booleans())
def test_interaction_flags_match_the_naive_generator(features, specs, bits, permutations, leave):
    line = "1 " + " ".join(f"|{ns} {name}:{value}" for ns, name, value in features) + "\n"
    ((indices, count),) = parse(line, specs, bits, permutations=permutations, leave_duplicates=leave)
    linear = [(ns, naive.vw_feature_index(ns, name, bits), value) for ns, name, value in features]
    expected = naive_interactions(linear, specs, bits, permutations, leave)
    merged = naive.merge_repeats([(i, v) for _, i, v in linear] + expected)
    assert indices == [i for i, _ in merged]
    assert count == len(linear) + len(expected)


def naive_ngrams(features, ngram, skips, bits):
    """VW's n-grams (parse_example.cc addgrams), written out: for each namespace
    letter l with n = ngram[l] >= 2 and its tokens t_0.. in line order, for every
    g = 1..n-1 and gap tuple (s_1..s_g) with sum <= skips[l], in lexicographic
    order, the tokens at i, i + 1 + s_1, i + 2 + s_1 + s_2, ...: index
    h = h * 27942141 + next index (64-bit), value 1."""
    mask = (1 << bits) - 1
    out = []
    for letter in sorted({f[0] for f in features}):
        tokens = [f[1] for f in features if f[0] == letter]
        n, k = ngram.get(letter, 0), skips.get(letter, 0)
        for g in range(1, n):
            for gaps in product(range(k + 1), repeat=g):
                if sum(gaps) > k:
                    continue
                offsets = [p + 1 + sum(gaps[:p + 1]) for p in range(g)]
                for i in range(len(tokens) - offsets[-1]):
                    h = tokens[i]
                    for offset in offsets:
                        h = (h * 27942141 + tokens[i + offset]) % (1 << 64)
                    out.append((letter, h & mask, 1.0))
    return out


@settings(max_examples=150, deadline=None)
@given(features_st, st.sampled_from([4, 18]), st.dictionaries(st.sampled_from("abcT"), st.integers(0, 4)),
       st.dictionaries(st.sampled_from("abcT"), st.integers(0, 3)), st.lists(st.sampled_from(["ab", "::", "aa"]),
                                                                              max_size=2))
def test_ngrams_match_the_naive_generator(features, bits, ngram, skips, specs):
    line = "1 " + " ".join(f"|{ns} {name}:{value}" for ns, name, value in features) + "\n"
    ngram_specs = [f"{letter}{n}" for letter, n in ngram.items()]
    skip_specs = [f"{letter}{k}" for letter, k in skips.items()] if any(n >= 2 for n in ngram.values()) else []
    ((indices, count),) = parse(line, specs, bits, ngram=ngram_specs, skips=skip_specs)
    linear = [(ns, naive.vw_feature_index(ns, name, bits), value) for ns, name, value in features]
    grams = naive_ngrams(linear, ngram, skips if skip_specs else {}, bits)
    # n-grams join their namespace: interactions take them in (a's tokens, then a's n-grams)
    with_grams = []
    for letter in sorted({f[0] for f in linear}):
        with_grams += [f for f in linear if f[0] == letter] + [f for f in grams if f[0] == letter]
    generated = naive_interactions(with_grams, specs, bits)
    expected = [(i, v) for _, i, v in linear] + [(i, v) for _, i, v in grams] + generated
    assert count == len(expected)
    assert sorted(indices) == sorted(i for i, _ in naive.merge_repeats(expected))


def test_namespace_filters():
    line = "1 |a x |b y |alpha z |  w\n"
    a, b, alpha, default = (naive.vw_feature_index(ns, f, 18) for ns, f in
                            (("a", "x"), ("b", "y"), ("alpha", "z"), ("", "w")))
    assert parse(line, ignore="a") == [([b, default], 2)]           # 'alpha' starts with a too
    assert parse(line, keep="b") == [([b], 1)]
    assert parse(line, ignore=" ") == [([a, b, alpha], 3)]         # the default namespace is ' '
    pairs = parse(line, ["ab"], ignore_linear="a")[0]
    assert pairs[0][:2] == [b, default] and len(pairs[0]) == 4      # a only inside the two pairs
    assert pairs[1] == 2 + 2 + 2                                    # VW still counts a's linear features


def test_interactions_grow_beyond_the_first_capacity_estimate():
    line = "1 |f " + " ".join(f"v{i}" for i in range(60)) + "\n"
    ((indices, count),) = parse(line * 3, ["ff", "fff"])[:1]
    assert count == 60 + 60 * 61 // 2 + 60 * 61 * 62 // 6


def test_model_keeps_input_options_and_refuses_others(cli, sample):
    assert cli("train", sample / "vw_0002.dat", "-q", "Tf", "--ignore", "x", "-f", "m.olm", "--quiet")[0] == 0
    _, out, _ = cli("inspect", "m.olm")
    assert "interactions: Tf" in out.decode() and "ignore: x" in out.decode()
    code, _, err = cli("test", sample / "vw_0002.dat", "-i", "m.olm", "--report", "r.json", "--quiet")
    assert code == 0 and json.load(open("r.json"))["total_features"] == 27992
    code, _, err = cli("train", sample / "vw_0002.dat", "-i", "m.olm", "-q", "ff")
    assert code == 2 and "interactions" in err


@pytest.mark.parametrize("args,message", [(["-q", "abc"], "expected 2"), (["--cubic", "ab"], "expected 3"),
                                          (["--interactions", "a"], "2 to 7")])
def test_malformed_interactions_are_usage_errors(cli, args, message):
    code, _, err = cli("train", *args, stdin=b"1 |a x\n")
    assert code == 2 and message in err
