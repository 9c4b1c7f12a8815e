import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli.engine import adagrad
from olcli.engine.records import C_MIN_LABEL
from olcli.inputs import Chunk, detect_format, read_chunks
from olcli.learner import Learner
from olcli.parsing import parse_chunk
from tests import naive

BITS = 18
CONSTANT = 1 << BITS


def parse(text, fmt="vw", bits=BITS, constant=True, binary=False):
    data = text.encode() if isinstance(text, str) else text
    chunk = Chunk("test.vw", 1, np.frombuffer(data, dtype=np.uint8))
    parsed = parse_chunk(chunk, fmt, bits, constant, binary)
    examples = []
    for e in range(parsed.n_examples):
        lo, hi = parsed.row_ptr[e], parsed.row_ptr[e + 1]
        t0, t1 = parsed.tags[e]
        examples.append({
            "label": parsed.labels[e], "importance": parsed.importance[e], "base": parsed.base[e],
            "tag": data[t0:t1].decode(), "line": int(parsed.example_line[e]),
            "features": list(zip(parsed.index[lo:hi].tolist(), parsed.value[lo:hi].tolist())),
        })
    return examples, parsed.bad_lines


def idx(namespace, name):
    return naive.vw_feature_index(namespace, name, BITS)


def test_label_importance_base_tag_and_namespaces():
    (ex,), bad = parse("1 2 0.5 'row7 |f a:2 b |g:0.5 c |  d:-3\n")
    assert not bad
    assert (ex["label"], ex["importance"], ex["base"], ex["tag"]) == (1.0, 2.0, 0.5, "row7")
    assert ex["features"] == [(idx("f", "a"), 2.0), (idx("f", "b"), 1.0), (idx("g", "c"), 0.5),
                              (idx("", "d"), -3.0), (CONSTANT, 1.0)]


def test_tag_touching_the_bar_without_quote():
    (ex,), _ = parse("-1 mytag|f a\n")
    assert ex["label"] == -1.0 and ex["tag"] == "mytag"


def test_unlabeled_lines_and_tag_only():
    examples, bad = parse("|f a\n'just_a_tag |f a\n")
    assert not bad
    assert all(math.isnan(e["label"]) for e in examples)
    assert examples[1]["tag"] == "just_a_tag"


def test_line_without_bar_is_label_only():
    (ex,), _ = parse("1\n")
    assert ex["label"] == 1.0 and ex["features"] == [(CONSTANT, 1.0)]


def test_zero_values_are_dropped_and_scale_multiplies():
    (ex,), _ = parse("1 |n:3 a:0 b:2 c\n")
    assert ex["features"] == [(idx("n", "b"), 6.0), (idx("n", "c"), 3.0), (CONSTANT, 1.0)]


def test_repeated_features_are_summed_but_counted_as_vw_does():
    chunk = Chunk("t.vw", 1, np.frombuffer(b"1 |f a b a:2 |g c\n", np.uint8))
    parsed = parse_chunk(chunk, "vw", BITS, True, False)
    a, b, c = idx("f", "a"), idx("f", "b"), idx("g", "c")
    got = list(zip(parsed.index[:parsed.row_ptr[1]].tolist(), parsed.value[:parsed.row_ptr[1]].tolist()))
    assert got == [(a, 3.0), (b, 1.0), (c, 1.0), (CONSTANT, 1.0)]   # each index where it first occurs
    assert parsed.feature_count[0] == 5  # VW counts every occurrence (and the constant)


def test_noconstant():
    (ex,), _ = parse("1 |f a\n", constant=False)
    assert ex["features"] == [(idx("f", "a"), 1.0)]


def test_empty_lines_crlf_and_tabs():
    examples, bad = parse("\n  \n1 |f\ta  b\r\n\r\n-1 |f a\r\n")
    assert not bad
    assert [e["label"] for e in examples] == [1.0, -1.0]
    assert [e["line"] for e in examples] == [3, 5]
    assert examples[0]["features"] == [(idx("f", "a"), 1.0), (idx("f", "b"), 1.0), (CONSTANT, 1.0)]


def test_final_line_without_newline():
    examples, _ = parse("1 |f a\n-1 |f b")
    assert [e["label"] for e in examples] == [1.0, -1.0]


def test_bom_is_dropped(tmp_path):
    path = tmp_path / "bom.vw"
    path.write_bytes(b"\xef\xbb\xbf1 |f a\n")
    (chunk,) = list(read_chunks([str(path)]))
    parsed = parse_chunk(chunk, "vw", BITS, True, False)
    assert parsed.n_examples == 1 and parsed.labels[0] == 1.0 and not parsed.bad_lines


def test_binary_labels_map_zero_and_reject_others():
    examples, bad = parse("0 |f a\n1 |f a\n2 |f a\n", binary=True)
    assert [e["label"] for e in examples] == [-1.0, 1.0]
    assert len(bad) == 1 and bad[0].line == 3 and "-1 or +1" in bad[0].message


@pytest.mark.parametrize("line,message,token", [
    ("abc |f a", "not a number", "abc"),
    ("1 |f a:xyz", "feature value is not a number", "a:xyz"),
    ("1 |f a:", "feature value is not a number", "a:"),
    ("1 |f a:nan", "NaN or infinite", "a:nan"),
    ("inf |f a", "NaN or infinite", "inf"),
    ("1 -2 |f a", "negative", "-2"),
    ("1 2 3 4 5 |f a", "too many tokens", ""),
    ("1 |f:abc a", "namespace scale", "f:abc"),
])
def test_bad_lines_name_line_and_token(line, message, token):
    examples, bad = parse(f"1 |f ok\n{line}\n-1 |f ok\n")
    assert [e["line"] for e in examples] == [1, 3]
    assert len(bad) == 1
    assert bad[0].line == 2 and bad[0].source == "test.vw"
    assert message in bad[0].message and token in bad[0].token
    assert bad[0].text == line
    assert "test.vw line 2" in str(bad[0])


def test_libsvm_lines():
    examples, bad = parse("1 3:1 7:0.5 qid:4\n-1 0:2 # a comment\n+1\n", fmt="libsvm")
    assert not bad
    assert [e["label"] for e in examples] == [1.0, -1.0, 1.0]
    assert examples[0]["features"] == [(3, 1.0), (7, 0.5), (CONSTANT, 1.0)]
    assert examples[1]["features"] == [(0, 2.0), (CONSTANT, 1.0)]


def test_libsvm_index_wraps_modulo_table_size():
    (ex,), _ = parse(f"1 {2**4 + 3}:1 {10**30 + 5}:2\n", fmt="libsvm", bits=4)
    assert ex["features"] == [(3, 1.0), ((10**30 + 5) % 16, 2.0), (16, 1.0)]


@pytest.mark.parametrize("line", ["1 a:1", "1 -3:1", "1 3:x", "1 3", "3:1 4:1"])
def test_libsvm_bad_lines(line):
    examples, bad = parse(f"1 1:1\n{line}\n", fmt="libsvm")
    assert len(examples) == 1 and len(bad) == 1 and bad[0].line == 2


def test_format_detection():
    assert detect_format(np.frombuffer(b"\n\n1 |f a\n", np.uint8)) == "vw"
    assert detect_format(np.frombuffer(b"1 3:1 4:1\n", np.uint8)) == "libsvm"


def test_chunks_split_on_line_boundaries(tmp_path):
    lines = [f"{1 if i % 2 else -1} |f a{i}:{i + 1} b" for i in range(500)]
    path = tmp_path / "d.vw"
    path.write_text("\n".join(lines) + "\n")
    whole, _ = parse(path.read_bytes())
    pieces = []
    for chunk in read_chunks([str(path)], chunk_bytes=97):
        parsed = parse_chunk(chunk, "vw", BITS, True, False)
        for e in range(parsed.n_examples):
            pieces.append((chunk.first_line + parsed.example_line[e] - 1, parsed.labels[e],
                           parsed.index[parsed.row_ptr[e]:parsed.row_ptr[e + 1]].tolist()))
    assert [p[0] for p in pieces] == list(range(1, 501))
    assert [p[2] for p in pieces] == [[i for i, _ in e["features"]] for e in whole]


# --- property tests: generate examples, write them as text, parse, compare ---

names = st.text(st.characters(codec="utf-8", exclude_characters=" \t\n\r|:'\x00"), min_size=1, max_size=8)
namespace_names = names.filter(lambda s: not s[0].isspace())
# Values written as decimal text inside the range where the parser is exact
# (olcli/engine/numbers.py); accuracy outside it is tested in test_numbers.py.
value_texts = st.builds(lambda m, e: f"{m}e{e}" if e else str(m),
                        st.integers(-10**12, 10**12).filter(bool), st.integers(-16, 6))
values = st.one_of(st.just("1"), value_texts)
decimal = st.integers(-999, 999).map(lambda i: i / 8)  # exactly representable as text
example = st.fixed_dictionaries({
    "label": st.one_of(st.none(), decimal),
    "importance": st.one_of(st.none(), st.integers(0, 50).map(lambda i: i / 4)),
    "tag": st.one_of(st.none(), names.filter(lambda s: not s.startswith("'"))),
    "namespaces": st.lists(st.tuples(st.one_of(st.just(""), namespace_names),
                                     st.lists(st.tuples(names, values), max_size=5)), max_size=4),
})


def to_line(ex):
    head = []
    if ex["label"] is not None:
        head.append(repr(ex["label"]))
        if ex["importance"] is not None:
            head.append(repr(ex["importance"]))
    if ex["tag"] is not None:
        head.append("'" + ex["tag"])
    parts = [" ".join(head) + " "]
    for ns, features in ex["namespaces"]:
        tokens = [f if v == "1" else f"{f}:{v}" for f, v in features]
        parts.append("|" + ns + " " + " ".join(tokens) + " ")
    if not ex["namespaces"]:
        parts.append("|")  # keeps the line from being blank (blank lines are no example)
    return "".join(parts)


@settings(max_examples=200, deadline=None)
@given(st.lists(example, min_size=1, max_size=6), st.sampled_from([4, 10, 18]))
def test_round_trip_vw(examples, bits):
    text = "\n".join(to_line(e) for e in examples) + "\n"
    parsed, bad = parse(text, bits=bits)
    assert not bad
    assert len(parsed) == len(examples)
    for got, want in zip(parsed, examples):
        if want["label"] is None:
            assert math.isnan(got["label"])
        else:
            assert got["label"] == want["label"]
            assert got["importance"] == (1.0 if want["importance"] is None else want["importance"])
        assert got["tag"] == (want["tag"] or "")
        expected = naive.merge_repeats([(naive.vw_feature_index(ns, f, bits), float(v))
                                        for ns, fs in want["namespaces"] for f, v in fs])
        expected.append((1 << bits, 1.0))
        assert got["features"] == expected
        assert all(0 <= i <= (1 << bits) for i, _ in got["features"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**12), value_texts), max_size=8), st.sampled_from([3, 18]))
def test_round_trip_libsvm_and_indices_in_range(features, bits):
    line = "1 " + " ".join(f"{i}:{v}" for i, v in features) + "\n"
    (ex,), bad = parse(line, fmt="libsvm", bits=bits)
    assert not bad
    expected = naive.merge_repeats([(i % (1 << bits), float(v)) for i, v in features]) + [(1 << bits, 1.0)]
    assert ex["features"] == expected


def _long_example(draw_indices, draw_values, repeats):
    """(index, value) pairs: the drawn ones, then ``repeats`` of them again (each with a
    value of its own, or the negative of the first, so that some sums are 0)."""
    pairs = list(zip(draw_indices, draw_values))
    again = [(pairs[k % len(pairs)][0], -pairs[k % len(pairs)][1] if k % 3 == 0 else float(k % 7 + 1))
             for k in range(repeats)]
    return pairs + again


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["spread", "cluster and one far", "cluster"]), st.integers(40, 700), st.integers(1, 200),
       st.integers(0, 2**31 - 1), st.sampled_from([10, 18, 24]))
def test_long_examples_with_repeats_are_summed_in_order(shape, count, repeats, seed, bits):
    """Examples longer than the parser's merge scratch (features.MERGE_SCRATCH), with
    indices spread, or clustered around one index with one far from them, or only
    clustered (the table's probes run long): the same sparse vector, in the same order,
    as the naive merge."""
    rng = np.random.default_rng(seed)
    top = 1 << bits
    if shape == "spread":
        indices = rng.integers(0, top, count)
    else:
        start = int(rng.integers(0, top - count))
        indices = start + rng.permutation(count)
        if shape == "cluster and one far":
            indices[int(rng.integers(0, count))] = top - 1 if start < top // 2 else 0
    values = [float(v) if v != 0 else 0.5 for v in rng.integers(-9, 10, count)]
    features = _long_example([int(i) for i in indices], values, repeats)
    order = rng.permutation(len(features))
    features = [features[k] for k in order]
    line = "1 " + " ".join(f"{i}:{v!r}" for i, v in features) + "\n"
    (ex,), bad = parse(line, fmt="libsvm", bits=bits)
    assert not bad
    assert ex["features"] == naive.merge_repeats(features) + [(top, 1.0)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(names, st.integers(-20, 20).filter(bool)), min_size=1, max_size=10, unique_by=lambda t: t[0]),
       st.randoms(use_true_random=False))
def test_feature_order_does_not_change_the_prediction(features, rng):
    learner = Learner("adagrad", bits=BITS)
    learner.model.state = np.random.default_rng(0).normal(size=(CONSTANT + 1, len(adagrad.SLOTS)))
    learner.model.counters[C_MIN_LABEL:] = -np.inf, np.inf
    shuffled = list(features)
    rng.shuffle(shuffled)
    predictions = []
    for order in (features, shuffled):
        (ex,), _ = parse("1 |f " + " ".join(f"{n}:{v}" for n, v in order) + "\n")
        index = learner.model.pool.rows_for(np.array([i for i, _ in ex["features"]], np.int32), False)
        value = np.array([v for _, v in ex["features"]])
        predictions.append(adagrad.predict(learner.table(), learner.settings(False), index, value, 0, len(index), 0,
                                           False, 1.0))
    assert predictions[0] == pytest.approx(predictions[1], rel=1e-12)


def test_hinge_takes_real_labels_as_vw_does(cli, tmp_path):
    """VW's hinge loss is max(0, 1 - y p) for any real y (VW test 578: regression
    labels); olcli keeps reading 0 as -1. The logistic loss still wants -1/0/+1."""
    (tmp_path / "r.vw").write_text("0.5 |f a\n2.5 |f b\n0 |f a\n-0.25 |f b\n1 |f a\n")
    code, out, err = cli("test", "r.vw", "-i", _zero_model(cli, tmp_path, "hinge"), "-p", "-", "--report", "h.json")
    assert code == 0 and "skipping" not in err, err
    report = json.loads((tmp_path / "h.json").read_text())
    assert report["bad_lines"] == 0
    # a zero model predicts 0: each loss is max(0, 1 - 0) = 1, labels as read: 0 -> -1
    assert report["average_loss"] == 1.0 and report["weighted_label_sum"] == 0.5 + 2.5 - 1 - 0.25 + 1
    code, _, err = cli("test", "r.vw", "-i", _zero_model(cli, tmp_path, "logistic"), "--report", "l.json")
    assert json.loads((tmp_path / "l.json").read_text())["bad_lines"] == 3


def _zero_model(cli, tmp_path, loss):
    path = tmp_path / f"{loss}.olm"
    assert cli("train", "-f", path, "--loss", loss, "--quiet", stdin=b"|f a\n")[0] == 0  # unlabeled: learns nothing
    return path
