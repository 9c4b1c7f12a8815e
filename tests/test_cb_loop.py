"""``--cbify``'s chunk kernel (olcli/engine/cb_loop.py) against the per-line loop it replaces
(``cb_sim.Cbify.step``, itself checked step by step against tests/naive_cb.py in test_cb_sim.py) and its
parts against their definitions: NumPy's summation order, VW's merand48 draw, the epsilon floor."""

import json
import random
from pathlib import Path

import numpy as np
import pytest

import naive_cb as nc
from olcli import cb, cb_sim, cbify_input
from olcli.engine import cb_loop


def test_pairwise_sum_is_numpys_sum_to_the_last_bit():
    rng = np.random.default_rng(7)
    for n in list(range(0, 300)) + [511, 512, 1000, 1025, 4097]:
        a = rng.standard_normal(n + 3) * 10.0 ** rng.integers(-6, 6, n + 3)
        assert cb_loop.pairwise_sum(a, 3, n) == a[3:3 + n].sum(), n


def test_leaf_sums_combined_are_numpys_sum_to_the_last_bit():
    """The kernel's scores: each leaf of the pairwise order summed on its own (``_block``), then combined as
    NumPy combines them (``_pairwise_tree`` over the leaf sums)."""
    rng = np.random.default_rng(8)
    stack = np.empty((4, 64), np.int64)
    for n in list(range(1, 300)) + [383, 384, 385, 511, 512, 1000, 1025, 4097, 20000]:
        a = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)
        lengths = np.empty(n // 32 + 2, np.int64)   # the kernel's size: a leaf of a split is over 32 long
        count = cb_loop.leaves(n, lengths, stack)
        assert lengths[:count].sum() == n and all(8 * (n > 128) <= m <= 128 for m in lengths[:count]), n
        starts = np.concatenate([[0], np.cumsum(lengths[:count])])
        sums = np.array([cb_loop._block(a, starts[i], lengths[i]) for i in range(count)] + [np.nan])
        assert cb_loop._pairwise_tree(sums, 0, n, stack, np.empty(64), True) == a.sum(), n


def test_the_draw_is_vws():
    rnd = random.Random(11)
    for seed in range(300):
        k = rnd.randint(1, 8)
        p = np.array([rnd.random() for _ in range(k)])
        p[rnd.randrange(k)] = 0.0
        s = nc.VW_APP_SEED + seed
        assert cb_loop.sample_index(s, p, k) == nc.sample_after_normalizing(s, list(p))
        assert cb_loop.merand48_first(s) == nc.merand48(s)[0]


def test_the_epsilon_floor_is_the_policys():
    rnd = random.Random(3)
    for _ in range(200):
        k = rnd.randint(1, 9)
        p = np.array([rnd.random() for _ in range(k)])
        p /= p.sum()
        eps = rnd.choice([0.0, 0.01, 0.05, 0.3, 0.9995])
        want = cb.enforce_minimum_probability(p, eps)
        got = p.copy()
        cb_loop.enforce_minimum_probability(got, eps, np.empty(k))
        assert got.tolist() == want.tolist()


def stream(n=700, k=5, seed=4, odd=False, names=60, most=150):
    """Multiclass lines with unlabelled, weighted, tagged and blank lines, repeated and colliding features; with
    ``odd`` also lines the block reader leaves to the per-line one: a CRLF line end, a lone '\\r', a feature
    value the parser refuses, a label outside 1..K, a tab in the label part, spaces-only and tab-only lines."""
    r = random.Random(seed)
    out = []
    for i in range(n):
        if r.random() < 0.02:
            out.append("")
            continue
        if odd and r.random() < 0.03:
            out.append(r.choice(["2 |a f1:1 f2:0.5\r", "1 |a f1\rf2", "3 |a f1:x", f"{k + 1} |a f1", "2\t|a f3",
                                 "   ", "\t", "'only_tag|a f1", "1 2 3 |a f1", "4 -1 |a f1", "1\x0b |a f1"]))
            continue
        feats = " ".join(f"f{r.randint(0, names)}:{r.uniform(-2, 2):.3f}" for _ in range(r.randint(0, most)))
        label = "" if r.random() < 0.05 else (f"{r.randint(1, k)}" if r.random() < 0.7
                                              else f"{r.randint(1, k)} {r.uniform(0, 3):.2f}")
        tag = f"'t{i}" if r.random() < 0.1 else ""
        out.append(f"{label} {tag}|a {feats} |b z{r.randint(0, 5)}".lstrip())
    return "\n".join(out) + "\n"


RULES = [["--epsilon", "0.1"], ["--epsilon", "0.2", "--first_only"], ["--squarecb"],
         ["--squarecb", "--epsilon", "0.05", "--gamma_scale", "3"], ["--first", "40", "--epsilon", "0.02"]]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("learner, costs", [([], []), (["--sgd", "-l", "0.1"], ["--loss0", "0.2", "--loss1", "1.5"]),
                                             (["--l1", "1e-4", "--l2", "1e-3"], [])])
def test_the_chunk_kernel_prints_and_saves_what_the_per_line_loop_does(cli, monkeypatch, rule, learner, costs):
    """Table and summary, -p and the -f model file byte for byte, with the kernel and with Cbify.step; then -i
    and -t continue the same way."""
    _kernel_and_per_line(cli, monkeypatch, stream(k=5), 5, rule, learner, costs)


@pytest.mark.parametrize("rule", [RULES[0], RULES[2]])
def test_long_lines_score_as_the_per_line_loop_does(cli, monkeypatch, rule):
    """Lines of up to ~900 distinct features, whose scores the kernel sums leaf by leaf of NumPy's pairwise
    order (two to a dozen leaves), as ``test_the_chunk_kernel_prints_and_saves_what_the_per_line_loop_does``."""
    _kernel_and_per_line(cli, monkeypatch, stream(n=250, k=7, seed=5, names=5000, most=1000), 7, rule, [], [])


@pytest.mark.parametrize("rule", [RULES[0], RULES[2]])
@pytest.mark.parametrize("learner", [["--l2", "0.2"], ["--l1", "5"], ["--sgd", "--l1", "0.5", "--l2", "0.3"]])
def test_weights_folded_by_sync_weights_score_as_the_per_line_loop_does(cli, monkeypatch, rule, learner):
    """--l1/--l2 strong enough that gd's update folds gravity and contraction into every stored w (gd._sync,
    VW's sync_weights, at contraction < 1e-9 or gravity > 1e3) within the run: the kernel's copy of the w
    (``by_slot``) must follow, as the per-line loop reads the pool."""
    _kernel_and_per_line(cli, monkeypatch, stream(k=5), 5, rule, learner, [])


@pytest.mark.parametrize("rule", [RULES[0], RULES[2]])
def test_many_actions_score_from_the_pool_as_the_per_line_loop_does(cli, monkeypatch, rule):
    """K >= cb_loop.COPY_ACTIONS: the scores read the pool's rows (no copy by groups), with --l2 folding."""
    assert 40 >= cb_loop.COPY_ACTIONS
    _kernel_and_per_line(cli, monkeypatch, stream(n=400, k=40, seed=6), 40, rule, ["--l2", "0.2"], [])


def _kernel_and_per_line(cli, monkeypatch, text, k, rule, learner, costs):
    Path("d.txt").write_text(text)
    args = ["vw", "--cbify", k, "--cb_explore_adf", *rule, *costs, "-d", "d.txt"]   # -i: the model's learner
    chunks = []
    run_parsed = cb_sim.Cbify.run_parsed

    def counted(self, *a, **kw):
        chunks.append(1)
        return run_parsed(self, *a, **kw)

    monkeypatch.setattr(cb_sim.Cbify, "run_parsed", counted)
    results = []
    for per_line in (False, True):
        if per_line:
            assert len(chunks) >= 3   # the kernel ran the three runs above
            monkeypatch.setattr(cb_sim.Cbify, "chunk_kernel", lambda self, learn=True: None)
        tag = "line" if per_line else "kernel"
        p, m, n, q, r = (f"{x}_{tag}.out" for x in "pmnqr")
        code, _, err = cli(*args, *learner, "-p", p, "-f", m)
        assert code == 0, err
        code, _, err2 = cli(*args, "-i", m, "-f", n, "-p", q)
        assert code == 0, err2
        code, _, err3 = cli(*args, "-i", n, "-t", "-p", r)
        assert code == 0, err3
        texts = [e.replace(f"_{tag}.out", "") for e in (err, err2, err3)]
        files = [Path(x).read_bytes() for x in (p, m, n, q, r)]
        results.append((texts, files))
    assert "average loss" in results[0][0][0]
    assert results[0] == results[1]


def test_a_damaged_archive_keeps_the_blocks_before_the_damage(cli, monkeypatch):
    """A gzip file cut short: every block read before the damage is learned and written (not only those before
    the block read ahead), the error names the file, and the model is written."""
    import gzip
    import zlib

    k = 5
    text = stream(n=3000, k=k, seed=9).encode()
    cut = gzip.compress(text)
    cut = cut[:len(cut) * 2 // 3]
    Path("t.vw.gz").write_bytes(cut)
    monkeypatch.setattr(cbify_input, "BLOCK_BYTES", 4096)
    code, _, err = cli("vw", "--cbify", k, "--cb_explore_adf", "-d", "t.vw.gz", "-p", "p.txt", "-f", "m.olm")
    assert code == 1 and "cannot read t.vw.gz" in err and "was written to m.olm" in err, err
    readable = zlib.decompressobj(31).decompress(cut)   # what the archive still holds
    assert 0 < len(readable) < len(text)
    whole = readable[:readable.rfind(b"\n", 0, len(readable) - 4096) + 1]   # all but its last block or less
    events = [line for line in whole.split(b"\n") if line.strip()]
    assert Path("p.txt").read_bytes().count(b"\n") >= len(events) > 1000


def test_an_archive_damaged_in_its_first_block_leaves_no_parse_thread(cli):
    """The first read of a damaged gzip file fails (before any block): the error names the file, and the parse
    worker _Ahead started is told to end (a daemon thread waiting forever for a job otherwise, one per run)."""
    import gzip
    import threading

    Path("t.vw.gz").write_bytes(gzip.compress(stream(n=700, k=5).encode())[:200])
    before = {t for t in threading.enumerate() if t.name.startswith("olcli-parse")}
    code, _, err = cli("vw", "--cbify", 5, "--cb_explore_adf", "-d", "t.vw.gz")
    assert code == 1 and "cannot read t.vw.gz" in err, err
    for t in threading.enumerate():
        if t.name.startswith("olcli-parse") and t not in before:
            t.join(10)
            assert not t.is_alive(), t.name


@pytest.mark.parametrize("rule", [RULES[0], RULES[2]])
def test_the_block_reader_reads_what_the_line_reader_reads(cli, monkeypatch, rule):
    """Blocks of a few lines, some of them with lines only the per-line reader judges (``stream(odd=True)``):
    table, warnings, summary, -p and the model byte for byte as the per-line loop's, both through the kernel
    (blocks read in one parse, the others line by line) and through Cbify.step."""
    k = 5
    Path("d.txt").write_bytes(stream(k=k, odd=True).encode())
    monkeypatch.setattr(cbify_input, "BLOCK_BYTES", 1500)
    blocks = []   # per block: read in one parse (True) or left to the per-line reading (False)
    prepared = cbify_input._prepared

    def counted(*a, **kw):
        got = prepared(*a, **kw)
        blocks.append(got is not None)
        return got

    monkeypatch.setattr(cbify_input, "_prepared", counted)
    results = []
    for per_line in (False, True):
        if per_line:
            assert blocks.count(True) >= 5 and blocks.count(False) >= 5, blocks
            monkeypatch.setattr(cb_sim.Cbify, "chunk_kernel", lambda self, learn=True: None)
        tag = "line" if per_line else "kernel"
        p, m, r = (f"{x}_{tag}.out" for x in "pmr")
        code, _, err = cli("vw", "--cbify", k, "--cb_explore_adf", *rule, "-d", "d.txt", "-p", p, "-f", m,
                           "-P", "7", "--report", r)
        assert code == 0, err
        report = json.loads(Path(r).read_text())
        report.pop("command")   # names the output files
        results.append((err.replace(f"_{tag}.out", ""), Path(p).read_bytes(), Path(m).read_bytes(), report))
    assert "warning" in results[0][0] or "line" in results[0][0]
    assert results[0] == results[1]
