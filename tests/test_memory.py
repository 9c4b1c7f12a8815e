"""Memory for the rows an example touches.

The table is a mapping whose pages cost memory only once written
(model.zeroed_state), every algorithm's untouched row is all zeros, and what
walks the table (saving, loading, the finite check, inspect, readable models,
merging, the kept best pass) walks the non-zero rows that model.nonzero_rows
finds among the written pages. Checked here: that finder against a plain scan;
that untouched rows stay zero and have weight 0 for every algorithm (which is
what lets the walkers skip them); merging on the touched rows against the rules
on the whole table; a -b 28 run on a small file; the memory guard's stop.
"""

import io
import os
import resource
import subprocess
import sys

import numpy as np
import pytest

import olcli
from olcli import model as model_file
from olcli import run as run_module
from olcli import row_pool
from olcli import state as table_state
from olcli.cli import main
from olcli.engine.registry import ALGORITHMS
from olcli.learner import Learner, MemoryGuard

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "..", "sample_data", "a9a_train.vw")
LETTER = os.path.join(HERE, "..", "sample_data", "letter_train.vw")


def _lines(path, first, count):
    with open(path) as f:
        return [line for line in f.read().splitlines() if line][first:first + count]


def _resident_kib(array) -> int:
    """Resident KiB of the pages under ``array`` alone, from /proc/self/pagemap (bit 63: present).
    Not smaps' Rss of the mapping: the kernel may merge the table's mapping with an adjacent
    anonymous one, whose resident pages would then be counted too."""
    page = os.sysconf("SC_PAGE_SIZE")
    start = array.__array_interface__["data"][0]
    first, last = start // page, (start + array.nbytes - 1) // page
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        entries = np.frombuffer(f.read((last - first + 1) * 8), dtype=np.uint64)
    return int(np.count_nonzero(entries >> np.uint64(63))) * page // 1024


def scan(state):
    return np.flatnonzero(np.any(state != 0, axis=1))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the mapping and pagemap are Linux's")
def test_untouched_pages_cost_nothing_and_written_rows_are_found():
    rows, slots = (1 << 24) + 1, 13   # 1.7 GB of address space
    state = model_file.zeroed_state(rows, slots)
    assert table_state._mapped(state)
    assert _resident_kib(state) < 1024
    rng = np.random.default_rng(1)
    picked = np.unique(np.concatenate([rng.integers(0, rows, 300), [0, rows - 1]]))
    columns = rng.integers(0, slots, len(picked))
    state[picked, columns] = rng.normal(size=len(picked))
    # a row that straddles two pages with its non-zero value on the second page
    straddle = next(r for r in range(1, 2000) if (r * slots * 8) // 4096 != ((r + 1) * slots * 8 - 1) // 4096)
    state[straddle, slots - 1] = 5.0
    # a page read but never written maps the zero page: read, it is found empty
    assert state[12345 * 40].sum() == 0.0
    picked = np.union1d(picked, [straddle])
    assert _resident_kib(state) < 4 * len(picked) + 1024
    found = model_file.nonzero_rows(state)
    assert found.dtype == np.int64
    np.testing.assert_array_equal(found, picked)
    # the same rows from a scan in blocks (an array olcli did not map)
    small = np.zeros((5000, 3))
    small[[0, 17, 4999], [2, 0, 1]] = [1.0, -2.0, np.nan]
    np.testing.assert_array_equal(model_file.nonzero_rows(small), [0, 17, 4999])
    assert not model_file.all_finite(small)
    assert model_file.all_finite(state)
    state[picked[3], 0] = np.inf
    assert not model_file.all_finite(state)


def test_snapshot_and_restore_put_the_table_back():
    state = model_file.zeroed_state(300001, 4)
    state[[5, 70000], 1] = [1.0, 2.0]
    saved = model_file.snapshot(state)
    state[5, 1] = 9.0
    state[123456, 3] = 4.0
    model_file.restore(state, saved)
    np.testing.assert_array_equal(scan(state), [5, 70000])
    assert state[5, 1] == 1.0 and state[70000, 1] == 2.0
    copy = model_file.copy_state(state)
    np.testing.assert_array_equal(copy, state)
    copy[5, 1] = 0.0
    assert state[5, 1] == 1.0


def test_the_pool_hands_out_rows_in_arrival_order_and_maps_unseen_features_to_the_template():
    pool = row_pool.RowPool(1 << 20, 3, 2, groups=2)
    template = pool.template.copy()
    first = pool.rows_for(np.array([7, 500000, 7, 3], np.int32), True)
    assert first.dtype == np.int32
    np.testing.assert_array_equal(first, [3, 6, 3, 9])         # groups 1, 2, 1, 3 of 3 rows (classes)
    np.testing.assert_array_equal(pool.keys[1:pool.used], [7, 500000, 3])
    assert pool.capacity >= 4                                   # grown from 2 groups, the rows kept
    pool.state[first[1] + 2] = [1.5, -2.0]                      # class 3 of feature 500000
    assert pool.rows_for(np.array([3, 8], np.int32), False).tolist() == [9, 0]   # 8 unseen: the template
    assert pool.used == 4
    np.testing.assert_array_equal(pool.template, template)
    logical, at = pool.nonzero()
    np.testing.assert_array_equal(logical, [2 * (1 << 20) + 500000])
    np.testing.assert_array_equal(pool.gather(logical), [[1.5, -2.0]])
    np.testing.assert_array_equal(pool.gather([5, (1 << 20) + 7]), np.zeros((2, 2)))
    dense = pool.dense()
    assert dense.shape == (3 << 20, 2) and not dense.flags.writeable
    np.testing.assert_array_equal(scan(dense), logical)
    again = row_pool.RowPool.from_rows(1 << 20, 3, 2, logical, pool.gather(logical))
    np.testing.assert_array_equal(again.dense(), dense)
    saved = pool.snapshot()
    row = pool.rows_for(np.array([11], np.int32), True)[0]   # grows the pool: a new state array
    pool.state[row] = 4.0
    pool.restore(saved)
    np.testing.assert_array_equal(pool.nonzero()[0], logical)


def test_first_arrivals_are_the_distinct_values_in_the_order_they_first_appear():
    rng = np.random.default_rng(3)
    for size, vocabulary in ((0, 1), (1, 1), (7, 2), (1000, 30), (5000, 1 << 18), (3000, (1 << 30) + 1)):
        values = rng.integers(0, vocabulary, size).astype(np.int32)
        expected = list(dict.fromkeys(values.tolist()))   # first occurrences, in order
        got = table_state.first_arrivals(values)
        assert got.dtype == values.dtype and got.tolist() == expected


def test_the_pool_gives_a_batch_of_seen_and_new_features_the_rows_of_their_first_arrival():
    """rows_for over batches that mix seen and new features (a repeated new one included)
    against a dictionary that hands out groups in order of first arrival."""
    rng = np.random.default_rng(4)
    pool = row_pool.RowPool(1 << 16, 2, 3, groups=2)
    groups = {}
    for size in (0, 5, 400, 3000, 50, 3000):
        batch = rng.integers(0, 5000, size).astype(np.int32)
        for h in batch.tolist():
            groups.setdefault(h, len(groups) + 1)
        got = pool.rows_for(batch, True)
        assert got.tolist() == [2 * groups[h] for h in batch.tolist()]
    assert pool.used == len(groups) + 1


def test_a_b28_learner_holds_the_rows_it_touched():
    """The index is 2^28 + 1 int32 entries allocated zeroed; the state only the touched rows."""
    learner = Learner("mix", loss="logistic", bits=28)
    learner.learn(_lines(SAMPLE, 0, 300))
    pool = learner.model.pool
    features = pool.used - 1
    assert 50 < features < 400 and pool.capacity <= 2 * (features + 1) + 1024
    assert pool.state.nbytes < 2 * 1024 * 13 * 8 + 2 * pool.used * 13 * 8
    if sys.platform.startswith("linux"):
        assert _resident_kib(pool.index) < 4 * features + 64


def test_b27_with_26_classes_starts_and_a_table_index_beyond_memory_is_refused(tmp_path, monkeypatch, capsys):
    """-b 27 --oaa 26 was 349 GiB of table (refused); its rows are now the touched ones and its
    index 512 MiB of address space. On a machine whose memory is less than 1/16 of its index,
    -b 30 is refused before reading data, in one line (-b 30 --oaa 26, more rows than the
    model file numbers, always is: tests/test_robustness.py)."""
    done = subprocess.run([sys.executable, "-m", "olcli", "train", "-b", "27", "--oaa", "26", "--quiet", "-f",
                           str(tmp_path / "m.olm")], input=b"3 |f a b\n", capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert olcli.load(tmp_path / "m.olm").counters["examples"] == 1
    from olcli import memory

    monkeypatch.setattr(memory, "meminfo", lambda field: 1 << 40 if field == "MemAvailable" else 200 << 20)
    (tmp_path / "d.vw").write_text("1 |f a\n")
    with pytest.raises(SystemExit) as refused:
        main(["train", "-b", "30", str(tmp_path / "d.vw")])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "use a smaller -b" in err and "Traceback" not in err


def _trained(name, lines, bits=18, **options):
    learner = Learner(name, loss="logistic" if not options.get("oaa") else None, bits=bits, **options)
    learner.learn(lines)
    return learner


CASES = [(name, {}) for name in ALGORITHMS] + [("mix", {"oaa": 3}), ("gd", {"oaa": 3}), ("coin", {"oaa": 3}),
                                                 ("scinol2", {"interactions": ["ff"]})]


@pytest.mark.parametrize("name, options", CASES, ids=[f"{n}-{'-'.join(o) or 'plain'}" for n, o in CASES])
def test_untouched_rows_stay_zero_with_weight_zero(name, options):
    """What the walkers rely on: a row no example touched is all zeros, and an all-zero
    row's weight is 0 (so saving, inspect and the weight checks may skip it)."""
    if options.get("oaa"):
        lines = [f"{1 + i % 3} | a{i % 7} b{i % 5}:0.5 c{i % 11}:2" for i in range(300)]
    else:
        lines = _lines(SAMPLE, 0, 300)
    learner = _trained(name, lines, bits=12, **options)
    model = learner.model
    parsed = learner.parse("\n".join(lines).encode() + b"\n")
    block = np.unique(parsed.index[:parsed.row_ptr[parsed.n_examples]].astype(np.int64))
    reached = np.concatenate([block + k * model.block_rows for k in range(max(1, model.classes))])
    touched = model_file.nonzero_rows(model.state)
    assert touched.size > 10
    assert np.isin(touched, reached).all(), "a row no example reached is not zero"
    weights = learner.weights().reshape(-1)
    assert np.isin(np.flatnonzero(weights), touched).all(), "an all-zero row has a non-zero weight"


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_merge_on_touched_rows_equals_the_rule_on_the_whole_table(name):
    lines = _lines(SAMPLE, 0, 600)
    base = _trained(name, lines[:200], bits=10)
    shards = []
    for k in range(3):
        shard = base.copy()
        shard.learn(lines[200 + 100 * k:300 + 100 * k])
        shards.append(shard)
    shards[2].learn(["1 | only_here_" + str(i) for i in range(5)])
    merged = Learner.merge(shards, base=base)
    # the rule itself, on whole tables
    kernels, spec = base._kernels, base._spec
    arguments = (base.model.state, [s.model.state for s in shards], base._params,
                 float(base.model.counters[0]), [float(s.model.counters[0]) for s in shards],
                 [float(s.model.counters[3] - base.model.counters[3]) for s in shards])
    if spec.scalars:
        whole = kernels.merge(*arguments, base_scalars=base.model.scalars,
                              shard_scalars=[s.model.scalars for s in shards])
    else:
        whole = kernels.merge(*arguments)
    np.testing.assert_array_equal(merged.model.state, whole)
    # and from a fresh base
    one, two = _trained(name, lines[:150], bits=10), _trained(name, lines[150:300], bits=10)
    fresh = Learner.merge([one, two])
    arguments = (np.zeros_like(one.model.state), [one.model.state, two.model.state], base._params, 0.0,
                 [float(one.model.counters[0]), float(two.model.counters[0])],
                 [float(one.model.counters[3]), float(two.model.counters[3])])
    if spec.scalars:
        initial = np.array(spec.initial_scalars(one.model.params), dtype=np.float64)
        whole = kernels.merge(*arguments, base_scalars=initial,
                              shard_scalars=[one.model.scalars, two.model.scalars])
    else:
        whole = kernels.merge(*arguments)
    np.testing.assert_array_equal(fresh.model.state, whole)


def test_a_large_table_saves_and_loads_its_touched_rows_only(tmp_path):
    learner = Learner("mix", loss="logistic", bits=24)
    learner.learn(_lines(SAMPLE, 0, 500))
    path = tmp_path / "m.olm"
    learner.save(path)
    rows = model_file.nonzero_rows(learner.model.state)
    row_bytes = 4 + 8 * len(learner.model.slots)
    assert os.path.getsize(path) < 20000 + rows.size * row_bytes   # sparse: header + touched rows
    loaded = olcli.load(path)
    assert table_state._mapped(loaded.model.state) or not sys.platform.startswith("linux")
    np.testing.assert_array_equal(model_file.nonzero_rows(loaded.model.state), rows)
    np.testing.assert_array_equal(loaded.model.state[rows], learner.model.state[rows])
    assert loaded.to_bytes() == learner.to_bytes()
    more = _lines(SAMPLE, 500, 200)
    np.testing.assert_array_equal(loaded.learn(more).predictions, learner.learn(more).predictions)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="measures the child's peak RSS")
def test_b28_on_a_small_file_runs_and_touches_little(tmp_path):
    """The default learner's -b 28 table is 26 GiB of address space (13 slots); a run on
    500 lines touches a few hundred of its pages. Functional, not a benchmark: the bound
    is 40 times what such a run needs (benchmarks/memory_vs_vw.py measures it)."""
    data = tmp_path / "small.vw"
    data.write_text("\n".join(_lines(SAMPLE, 0, 500)) + "\n")
    model = tmp_path / "m.olm"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run([sys.executable, "-m", "olcli", "train", str(data), "-b", "28", "-f", str(model),
                           "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 2 * (1 << 20) or peak_kib == before, f"peak RSS {peak_kib} KiB"
    assert os.path.getsize(model) < 100_000
    shown = subprocess.run([sys.executable, "-m", "olcli", "inspect", str(model)], capture_output=True,
                           text=True, timeout=600)
    assert shown.returncode == 0, shown.stderr
    assert "bits: 28" in shown.stdout and "non-zero weights:" in shown.stdout


def test_the_memory_guard_stops_the_run_and_writes_what_was_learned(tmp_path, monkeypatch, capsys):
    data = tmp_path / "d.vw"
    data.write_text("\n".join(_lines(SAMPLE, 0, 300)) + "\n")
    model = tmp_path / "m.olm"
    # a reserve above what any machine has: the first check after a kernel call stops the run
    monkeypatch.setattr(run_module, "_MEMORY", MemoryGuard(reserve=1 << 60, every=0.0))
    with pytest.raises(SystemExit) as stopped:
        main(["train", str(data), "-f", str(model), "--quiet"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "out of memory" in err and "stopped before the system would kill it" in err
    assert "was written to" in err
    learner = olcli.load(model)
    assert learner.counters["examples"] > 0


def test_guard_reads_at_most_every_interval(monkeypatch):
    calls = []
    monkeypatch.setattr("olcli.memory.available_memory", lambda: calls.append(1) or (1 << 40))
    guard = MemoryGuard(reserve=1, every=3600.0)
    for _ in range(100):
        guard.check()
    assert len(calls) == 1


def test_inspect_and_readable_list_the_touched_rows(tmp_path, capsys):
    learner = Learner("gd", loss="logistic", bits=22)
    learner.learn(_lines(SAMPLE, 0, 200))
    path = tmp_path / "m.olm"
    learner.save(path)
    with pytest.raises(SystemExit) as done:
        main(["inspect", str(path)])
    assert done.value.code == 0
    out = capsys.readouterr().out
    weights = learner.weights()
    assert f"non-zero weights: {np.count_nonzero(weights)}\n" in out
    top = int(np.argmax(np.abs(weights)))
    assert f"  {top}: {weights[top]:.6g}" in out
    from olcli.readable import write_readable

    text = io.StringIO()
    write_readable(learner, text)
    body = [line for line in text.getvalue().splitlines() if not line.startswith("#")]
    assert len(body) == model_file.nonzero_rows(learner.model.state).size


_SHARED_CHILD = """
import hashlib, os, sys
import numpy as np
from olcli import model as model_file
model = model_file.load(sys.argv[1], shared_by=int(sys.argv[2]))
state = model.state
rows = model_file.nonzero_rows(state)
maps = [line.split() for line in open("/proc/self/maps") if "memfd:olcli-table" in line]
print(maps[0][4] if maps else "private", rows.size, hashlib.sha256(state[rows].tobytes() + rows.tobytes()).hexdigest(),
      flush=True)
sys.stdin.readline()   # stay alive (the memory file's creator) until the test is done
"""


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="the shared table is a Linux memory file")
def test_serve_workers_map_one_shared_table(tmp_path):
    """olcli serve --workers: two processes loading the same file map the same memory file
    (one inode), holding what a private load holds; a reloaded file gets its own table."""
    learner = _trained("mix", _lines(SAMPLE, 0, 300), bits=20)
    path = tmp_path / "m.olm"
    learner.save(path)
    private = olcli.load(path).model.state
    rows = model_file.nonzero_rows(private)
    import hashlib

    expected = f"{rows.size} {hashlib.sha256(private[rows].tobytes() + rows.tobytes()).hexdigest()}"
    group = os.getpid()
    children = []
    try:
        def start(model_path):
            child = subprocess.Popen([sys.executable, "-c", _SHARED_CHILD, str(model_path), str(group)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            children.append(child)
            return child.stdout.readline().strip().split(maxsplit=1)

        first_inode, first = start(path)
        second_inode, second = start(path)
        assert first_inode != "private" and first_inode == second_inode
        assert first == second == expected
        learner.learn(_lines(SAMPLE, 300, 50))
        other = tmp_path / "n.olm"
        learner.save(other)
        third_inode, third = start(other)
        assert third_inode not in ("private", first_inode)
        assert third != expected
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
        from olcli.serve_ports import remove_table_folder, table_folder

        remove_table_folder(group)
        assert not os.path.exists(table_folder(group))
