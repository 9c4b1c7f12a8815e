"""CLI wall time before and after the Learner refactor (6efe182), same files, same run.

    python -m benchmarks.refactor_before_after [--baseline TREE] [--current REPO]
                                               [--revisions REV ...] [--runs 7] [--cold]
                                               [--data DIR] [--work DIR] [--out FILE]

Times ``python -m olcli train FILE --loss logistic -b 18 --quiet [FLAGS]`` of source trees
with the same interpreter (this one), each run by ``benchmarks.harness.run_olcli``: the
baseline (``--baseline TREE``, a folder holding an ``olcli/``; by default a snapshot of
6efe182's parent, the code before the refactor), the current working tree, and with
``--revisions`` snapshots of committed revisions of this repository (``git archive`` into
--work: immune to edits in progress in the working tree, which make Numba recompile and
add whatever is half-done). Each tree's command runs with the tree as its
working directory, so ``python -m olcli`` imports that tree's ``olcli`` (checked: the
script asks each tree's Python where ``olcli.__file__`` is, and stops if it is not under
the tree), PYTHONPATH removed. Each tree has its own NUMBA_CACHE_DIR and its own bytecode
cache (PYTHONPYCACHEPREFIX), both under --work, so neither tree reads the other's compiled
kernels or .pyc files and neither source tree is written to.

Cases (the data sets from the harness's data folder: ``--data``, ``OLCLI_BENCH_DATA``; the
click logs from ``olcli.datagen``): the generated click log (1M lines, and 4M), sst2, a9a (default algorithm), the click
log with --scinol2, and letter with --oaa 26 and --oaa 26 --scinol2 (the multiclass kernel),
plus a start-up case (the first 100 lines of a9a) that shows the fixed cost. Warm-up: every
case runs once per tree with ``-f MODEL`` (compiling into the tree's empty caches), then once
more; the two trees' models are compared byte for byte (``cmp``). Then ``--runs``
repetitions, interleaved: each repetition runs every case on every tree, rotating which
tree goes first. Reported per case and tree: median and min-max wall seconds, the ratio of
the medians tree/baseline, the median of the per-repetition ratios (paired, so a slow
moment of the machine hits both), and the same two ratios for the process's CPU time
(user + system, from wait4), which another process competing for the 2 cores disturbs
less than the wall time. The fingerprint of the working tree's olcli/ sources is taken
before each of its runs; a change (someone editing the tree) is reported, and a run that
fails (a tree broken mid-edit) is retried after a pause and reported.

Then the learning kernel alone (``--kernel-rounds``, 0 to skip): in a worker process per tree
(this script with PYTHONPATH = the tree), the tree's parser reads each file once and its
kernel learns the parsed chunks, before the refactor through ``driver.run_chunk`` /
``multiclass.run_chunk_multiclass`` with positional arrays, after it through
``Learner.process``; timed with the thread's CPU clock, which another process competing for
the cores does not inflate, and the progressive losses compared bit for bit.

Writes benchmarks/results/refactor_before_after.md (or --out) and prints it.
"""

import argparse
import datetime
import filecmp
import hashlib
import io
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET = 1.03
BEFORE = "6efe182~1"   # the code before the Learner refactor, the default baseline
# The lifetime counters models had before the refactor (later versions may add more).
COUNTERS = ("rounds", "examples", "labeled_examples", "weighted_examples", "weighted_labels", "loss_sum",
            "total_features")
RETRIES, RETRY_WAIT = 6, 20  # a failed run (a tree broken mid-edit) is retried


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="the baseline tree (a folder with olcli/; default: a snapshot of "
                                           f"{BEFORE}, the parent of the refactor)")
    parser.add_argument("--current", default=ROOT, help="the working tree to compare (default: this one)")
    parser.add_argument("--revisions", nargs="*", default=[],
                        help="also compare snapshots of these revisions of the current repository")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--data", default=None, help="the data folder (default: the harness's)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    parser.add_argument("--out", default=None, help="the results file (default: refactor_before_after.md "
                                                    "in the harness's results folder)")
    parser.add_argument("--only", nargs="*", help="case labels to run (default: all)")
    parser.add_argument("--kernel-rounds", type=int, default=5,
                        help="rounds of the kernel-only measurement (0: skip it)")
    parser.add_argument("--kernel-reps", type=int, default=3, help="kernel passes per file in each worker process")
    parser.add_argument("--kernel-worker", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true",
                        help="empty both trees' Numba and bytecode caches first, so the first run of each "
                             "case shows the compile time")
    args = parser.parse_args()
    if not args.kernel_worker:
        os.makedirs(args.work, exist_ok=True)
    return args


class Tree:
    def __init__(self, name, path, work, description=None):
        self.name, self.path, self.description = name, os.path.abspath(path), description
        self.failures = []
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
        self.env["NUMBA_CACHE_DIR"] = os.path.join(work, f"numba-{name}")
        self.env["PYTHONPYCACHEPREFIX"] = os.path.join(work, f"pyc-{name}")

    def python(self, *arguments, **kwargs):
        return subprocess.run([sys.executable, *arguments], cwd=self.path, env=self.env, **kwargs)

    def check_import(self):
        where = self.python("-c", "import olcli; print(olcli.__file__)", capture_output=True, text=True,
                            check=True).stdout.strip()
        if not where.startswith(self.path + os.sep):
            sys.exit(f"{self.name}: olcli imported from {where}, not from {self.path}")
        return where

    def describe(self):
        if self.description:
            return self.description
        git = ["git", "-C", self.path]
        commit = subprocess.run(git + ["log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--", "olcli"], capture_output=True,
                               text=True).stdout.strip()
        return commit + (f" (+ uncommitted changes in olcli/: {len(dirty.splitlines())} files)" if dirty else "")

    def fingerprint(self):
        digest = hashlib.sha1()
        for folder, _, files in sorted(os.walk(os.path.join(self.path, "olcli"))):
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    stat = os.stat(path)
                    digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
        return digest.hexdigest()

    def state_digest(self, model):
        """SHA-1 of the model's state table and its named counters, read with the tree's own code
        (for when the files differ: a changed model format, the same learned numbers)."""
        code = ("import hashlib, sys, numpy as np; from olcli import model as m; x = m.load(sys.argv[1]); "
                "from olcli.model import COUNTER_NAMES as n; c = x.counters; "
                "c = c if isinstance(c, dict) else dict(zip(n, np.asarray(c).tolist())); "
                "print(hashlib.sha1(np.ascontiguousarray(x.state).tobytes()).hexdigest(), "
                f"sorted((k, float(v)) for k, v in c.items() if k in {COUNTERS!r}))")
        return self.python("-c", code, model, capture_output=True, text=True, check=True).stdout

    def train(self, path, flags, model=None):
        """(wall seconds, CPU seconds: user + system) of one ``olcli train`` process."""
        command = [sys.executable, "-m", "olcli", "train", path, "--loss", "logistic", "-b", "18", "--quiet",
                   *flags]
        if model:
            command += ["-f", model]
        from benchmarks import harness

        for attempt in range(RETRIES + 1):
            result = harness.run_olcli(command[3:], cwd=self.path, env=self.env, check=False, separate_stderr=True)
            if result.returncode == 0:
                return result.wall, result.cpu
            message = result.stderr.strip().splitlines()[-1:]
            # A working tree someone is editing can be broken for a moment (half-saved edits):
            # wait and retry, and say so in the report.
            self.failures.append(f"{os.path.basename(path)} {' '.join(flags)}: {' '.join(message)}")
            print(f"{self.name}: {' '.join(command)} failed ({' '.join(message)}); retrying in {RETRY_WAIT} s",
                  file=sys.stderr)
            time.sleep(RETRY_WAIT)
        sys.exit(f"{self.name}: {' '.join(command)} failed {RETRIES + 1} times")


def snapshot(revision, work, name=None):
    """A revision's olcli/ (``git archive``) under ``work``, and its description."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", revision], capture_output=True, text=True,
                            check=True).stdout.strip()
    path = os.path.join(work, f"tree-{commit}")
    if not os.path.isdir(os.path.join(path, "olcli")):
        archive = subprocess.run(["git", "-C", ROOT, "archive", commit, "olcli"], capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(path, filter="data")
    subject = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s", commit], capture_output=True,
                             text=True).stdout.strip()
    return Tree(name or commit, path, work, f"{subject} (snapshot of olcli/ by git archive)")


# --- kernel-only: the learning kernel's own time, in each tree's process ---------------------------

def kernel_worker(cases, reps):
    """Runs inside a tree (PYTHONPATH = the tree; that tree's olcli, old or new API): each file
    parsed once with that tree's parser, then ``reps`` + 1 passes of its learning kernel over the
    chunks from a fresh model (the first pass warms up), timed with the thread's CPU clock
    (``time.thread_time``: not the time spent waiting for a core) and the wall clock. Prints
    JSON {label: [thread s, wall s, progressive loss, first pass thread s]}: the best (least thread
    time) pass, and the warm-up pass, which also loads the kernel from the Numba cache (and, for
    the first file, the parser's kernel is loaded before it, not in it)."""
    import json


    import olcli
    from olcli.engine.parse import LABELS_BINARY
    from olcli.inputs import read_chunks
    from olcli.parsing import parse_chunk

    try:
        from olcli.learner import Learner  # after the refactor: the one door
    except ImportError:
        Learner = None
    out = {"olcli": olcli.__file__}
    for label, path, name, classes in cases:
        parsed = [parse_chunk(c, "vw", 18, True, classes or LABELS_BINARY) for c in read_chunks([path])]
        best, first = None, None
        for rep in range(reps + 1):
            if Learner is not None:
                from olcli.engine.records import S_LOSS, S_WEIGHT, new_tally
                from olcli.parsing import batch_of

                learner = Learner(name, loss="logistic", bits=18, oaa=classes or None)
                tally, batches = new_tally(), [batch_of(p) for p in parsed]

                def learn():
                    for batch in batches:
                        learner.process(batch, True, tally)
                    return tally.stats[S_LOSS] / tally.stats[S_WEIGHT]
            else:
                learn = _old_kernel_pass(parsed, name, classes)
            thread, wall = time.thread_time(), time.perf_counter()
            loss = learn()
            thread, wall = time.thread_time() - thread, time.perf_counter() - wall
            if rep == 0:
                first = thread
            elif best is None or thread < best[0]:
                best = [thread, wall, loss]
        out[label] = best + [first]
    print(json.dumps(out))


def _old_kernel_pass(parsed, name, classes):
    """Before the refactor: engine.driver.run_chunk / multiclass.run_chunk_multiclass with their
    positional arrays, as run.py called them."""
    import numpy as np

    from olcli.engine import driver, losses, multiclass
    from olcli.engine.registry import ALGORITHMS, slots
    from olcli.model import COUNTER_NAMES, table_rows

    algorithm = ALGORITHMS[name]
    params = np.array(list(algorithm.params.values()), dtype=np.float64)
    rows = table_rows(18)
    state = np.zeros((max(1, classes) * rows, len(slots(name))))
    counters, stats = np.zeros(len(COUNTER_NAMES)), driver.new_stats()
    histogram = np.zeros((2, driver.AUC_BINS))
    progress = np.zeros((driver.MAX_PROGRESS_ROWS, driver.N_PROGRESS_COLUMNS))
    holdout, loss_params = driver.new_holdout(), np.array([0.5, 0.0])

    def learn():
        for p in parsed:
            n = p.n_examples
            predictions = np.empty(n)
            common = (p.labels[:n], p.importance[:n], p.base[:n], p.row_ptr[:n + 1], p.index, p.value,
                      p.feature_count[:n])
            if classes:
                multiclass.run_chunk_multiclass(algorithm.code, state, params, rows, classes, multiclass.OAA,
                                                losses.LOGISTIC, loss_params, True, counters, n, *common,
                                                np.empty((n, classes)), predictions, stats, progress, holdout)
            else:
                driver.run_chunk(algorithm.code, state, params, losses.LOGISTIC, loss_params, True, counters, n,
                                 *common, predictions, stats, histogram, progress, holdout)
        return stats[driver.S_LOSS] / stats[driver.S_WEIGHT]

    return learn


def kernel_rows(trees, cases, rounds, reps):
    """The kernel-only table: worker processes of the trees alternated, ``rounds`` + 1 rounds
    (the first warms the caches and is dropped)."""
    import json

    from benchmarks import harness

    results = {tree.name: [] for tree in trees}
    for number in range(rounds + 1):
        shift = number % len(trees)
        for tree in trees[shift:] + trees[:shift]:
            env = dict(tree.env, PYTHONPATH=tree.path)
            for attempt in range(RETRIES + 1):
                done = harness.measure([harness.PY, os.path.abspath(__file__), "--kernel-worker", json.dumps(cases),
                                        "--kernel-reps", reps], cwd=tree.path, env=env, check=False,
                                       separate_stderr=True)
                if done.returncode == 0:
                    break
                tree.failures.append("kernel worker: " + " ".join(done.stderr.strip().splitlines()[-1:]))
                time.sleep(RETRY_WAIT)
            else:
                sys.exit(f"{tree.name}: kernel worker failed:\n{done.stderr}")
            result = json.loads(done.output)
            if not result.pop("olcli").startswith(tree.path + os.sep):
                sys.exit(f"{tree.name}: the kernel worker did not import the tree's olcli")
            if number:
                results[tree.name].append(result)
        print(f"kernel round {number}/{rounds} done", file=sys.stderr)
    rows = []
    for label, _, _, _ in cases:
        base = [r[label] for r in results["baseline"]]
        for tree in trees:
            mine = [r[label] for r in results[tree.name]]
            thread = statistics.median(m[0] for m in mine)
            wall = statistics.median(m[1] for m in mine)
            cells = [f"{thread:.4f} ({min(m[0] for m in mine):.4f}–{max(m[0] for m in mine):.4f})", f"{wall:.4f}",
                     f"{statistics.median(m[3] for m in mine):.4f}"]
            if tree.name == "baseline":
                cells += ["", "", ""]
            else:
                cells += [f"{thread / statistics.median(b[0] for b in base):.3f}",
                          f"{statistics.median(m[0] / b[0] for m, b in zip(mine, base)):.3f}",
                          "same" if all(m[2] == base[0][2] for m in mine) else "**differs**"]
            rows.append(f"| {label} | {tree.name} | " + " | ".join(cells) + " |")
    return rows


def main():
    args = parse_arguments()
    if args.kernel_worker:
        import json

        return kernel_worker(json.loads(args.kernel_worker), args.kernel_reps)
    from benchmarks import harness  # the kernel worker above runs in the baseline's tree: not there

    data = args.data = args.data or harness.DATA
    args.out = args.out or os.path.join(harness.RESULTS, "refactor_before_after.md")
    harness.require([os.path.join(data, "a9a", "train.vw")])
    startup = harness.head(os.path.join(data, "a9a", "train.vw"), 100, os.path.join(args.work, "a9a_100.vw"))

    def click_log(_, lines):   # generated only when a click-log case will run
        wanted = not args.only or any(label.startswith("click log") for label in args.only)
        return harness.click_log(args.work, lines) if wanted else ""

    cases = [
        ("start-up: a9a, first 100 lines", startup, []),
        ("click log 1M", click_log(args, 1_000_000), []),
        ("sst2", os.path.join(data, "sst2", "train.vw"), []),
        ("a9a", os.path.join(data, "a9a", "train.vw"), []),
        ("click log 4M", click_log(args, 4_000_000), []),
        ("click log 1M --scinol2", click_log(args, 1_000_000), ["--scinol2"]),
        ("letter --oaa 26", os.path.join(data, "letter", "train.vw"), ["--oaa", "26"]),
        ("letter --oaa 26 --scinol2", os.path.join(data, "letter", "train.vw"), ["--oaa", "26", "--scinol2"]),
    ]
    if args.only:
        cases = [c for c in cases if c[0] in args.only]
    harness.require(path for _, path, _ in cases)

    baseline = (Tree("baseline", args.baseline, args.work) if args.baseline
                else snapshot(BEFORE, args.work, name="baseline"))
    current = Tree("current", args.current, args.work)
    trees = [baseline, current] + [snapshot(revision, args.work) for revision in args.revisions]
    if args.cold:
        import shutil

        for tree in trees:
            for variable in ("NUMBA_CACHE_DIR", "PYTHONPYCACHEPREFIX"):
                shutil.rmtree(tree.env[variable], ignore_errors=True)
    caches_empty = all(not os.path.isdir(tree.env["NUMBA_CACHE_DIR"]) for tree in trees)
    for tree in trees:
        print(f"{tree.name}: {tree.path}, olcli imported from {tree.check_import()}", file=sys.stderr)
    fingerprint = current.fingerprint()
    described = {tree.name: tree.describe() for tree in trees}

    load_start = os.getloadavg()[0]
    identical, first_runs = {}, {}
    models = os.path.join(args.work, "before_after_models")
    os.makedirs(models, exist_ok=True)
    for label, path, flags in cases:
        written = {}
        for tree in trees:
            model = os.path.join(models, f"{label.replace(' ', '_')}.{tree.name}.olm")
            first, _ = tree.train(path, flags, model)
            second, _ = tree.train(path, flags)
            first_runs[label, tree.name] = first
            print(f"warm-up {label} {tree.name}: first run {first:.2f} s, second {second:.2f} s", file=sys.stderr)
            written[tree.name] = model
        for tree in trees[1:]:
            if filecmp.cmp(written["baseline"], written[tree.name], shallow=False):
                identical[label, tree.name] = "identical"
            elif tree.state_digest(written[tree.name]) == baseline.state_digest(written["baseline"]):
                identical[label, tree.name] = "bytes differ, state identical"
            else:
                identical[label, tree.name] = "**differ**"

    wall = {(label, tree.name): [] for label, _, _ in cases for tree in trees}
    cpu = {key: [] for key in wall}
    changed = []
    for repetition in range(args.runs):
        for number, (label, path, flags) in enumerate(cases):
            shift = (repetition + number) % len(trees)
            for tree in trees[shift:] + trees[:shift]:
                if tree is current:
                    now = current.fingerprint()
                    if now != fingerprint:
                        changed.append((repetition, label))
                        fingerprint = now
                seconds, cpu_seconds = tree.train(path, flags)
                wall[label, tree.name].append(seconds)
                cpu[label, tree.name].append(cpu_seconds)
        print(f"repetition {repetition + 1}/{args.runs} done", file=sys.stderr)

    def ratios(times, label, name):
        mine, base = times[label, name], times[label, "baseline"]
        return (statistics.median(mine) / statistics.median(base),
                statistics.median(x / y for x, y in zip(mine, base)))

    rows, worst = [], {}
    worst_all = {}  # tree -> [wall median, wall paired, CPU median, CPU paired] ratios, worst case
    for label, path, flags in cases:
        for tree in trees:
            w, c = wall[label, tree.name], cpu[label, tree.name]
            cells = [f"{statistics.median(w):.3f} ({min(w):.3f}–{max(w):.3f})", f"{statistics.median(c):.3f}"]
            if tree is baseline:
                cells += ["", "", "", "", ""]
            else:
                ratio, paired = ratios(wall, label, tree.name)
                cpu_ratio, cpu_paired = ratios(cpu, label, tree.name)
                if not label.startswith("start-up"):
                    worst[tree.name] = max(worst.get(tree.name, 0.0), ratio)
                    worst_all[tree.name] = [max(a, b) for a, b in zip(worst_all.get(tree.name, [0.0] * 4),
                                                                      (ratio, paired, cpu_ratio, cpu_paired))]
                cells += [f"{ratio:.3f}", f"{paired:.3f}", f"{cpu_ratio:.3f}", f"{cpu_paired:.3f}",
                          identical[label, tree.name]]
            rows.append(f"| {label} | {tree.name} | " + " | ".join(cells) + f" | {first_runs[label, tree.name]:.2f} |")

    model_name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                       if line.startswith("model name")), platform.processor())
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    verdicts = [f"{name}: {'within' if value <= TARGET else '**missed**'} on the median wall time (worst "
                f"ratio {value:.3f}); worst paired wall ratio {worst_all[name][1]:.3f}, worst CPU ratios "
                f"{worst_all[name][2]:.3f} (medians) and {worst_all[name][3]:.3f} (paired)"
                for name, value in worst.items()]
    report = "\n".join([
        "# CLI wall time before and after the Learner refactor",
        "",
        f"`python -m benchmarks.refactor_before_after --runs {args.runs}"
        + (f" --revisions {' '.join(args.revisions)}" if args.revisions else "") + f"`; {date}. "
        f"Machine: {model_name}, {os.cpu_count()} cores (timings noisy: CPU steal, other processes); "
        f"Python {platform.python_version()}. Load average (1 min) at the start "
        f"{load_start:.1f}, at the end of the CLI runs {os.getloadavg()[0]:.1f}.",
        "",
        *[f"- {tree.name}: `{tree.path}` at {described[tree.name]}" for tree in trees],
        "",
        "`python -m olcli train FILE --loss logistic -b 18 --quiet [FLAGS]`, wall time of the whole "
        "process (start-up, reading, parsing, learning), each tree run from its own directory with its "
        f"own Numba cache and bytecode cache, warm. Median of {args.runs} runs (min–max), trees "
        "interleaved, rotating which goes first; ratio = tree median / baseline median; paired = median "
        "of the per-repetition ratios; CPU = user + system seconds of the process (median) and the same "
        "two ratios on it. Models: the tree's `-f` model compared byte for byte with the baseline's "
        "(when the bytes differ: the state table and the named lifetime counters, each read with its "
        "own tree's code). "
        "First run: the first warm-up run (one sample, writing the model too), "
        + ("into empty caches: the first case that uses a kernel pays its compilation."
           if caches_empty else "into the caches left by earlier runs (--cold empties them first)."),
        "",
        "| case | tree | wall s | CPU s | ratio | paired | CPU ratio | CPU paired | model | first run s |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---:|",
        *rows,
        "",
        f"Target: tree <= {TARGET} x baseline (median wall time, start-up case aside). " + "; ".join(verdicts) + ".",
    ])
    if args.kernel_rounds:
        kernel_cases = [(label, path, "scinol2" if "--scinol2" in flags else "adagrad",
                         int(flags[flags.index("--oaa") + 1]) if "--oaa" in flags else 0)
                        for label, path, flags in cases if not label.startswith("start-up") and "4M" not in label]
        report += "\n".join([
            "",
            "",
            "## The learning kernel alone",
            "",
            "Each tree's own parser reads the file once; then its learning kernel makes a pass over the "
            "parsed chunks from a fresh model (before: `driver.run_chunk` / `multiclass.run_chunk_multiclass` "
            "with positional arrays, as `run.py` called them; after: `Learner.process(Batch, True, tally)`, "
            "Python overhead of the door included). Thread CPU seconds (`time.thread_time`, which waiting "
            f"for a core does not count): in each worker process the best of {args.kernel_reps} passes after "
            f"a warm-up one; median (min–max) over {args.kernel_rounds} worker processes per tree, the trees "
            "alternated; wall = median wall seconds of those passes; first pass = median thread CPU seconds of "
            "the warm-up pass, which also loads the kernel from the Numba cache (the difference to the "
            "kernel time is the load). The 4M click log is left out (4 times "
            "the 1M one). Loss: whether every pass's progressive loss equals the baseline's to the bit.",
            "",
            "| file | tree | kernel thread CPU s | wall s | first pass s | ratio | paired | loss |",
            "|---|---|---|---:|---:|---:|---:|---|",
            *kernel_rows(trees, kernel_cases, args.kernel_rounds, args.kernel_reps),
        ])
    for tree in trees:
        if tree.failures:
            report += (f"\n\n{tree.name}: {len(tree.failures)} run(s) failed and were retried "
                       f"(the tree was broken mid-edit): " + "; ".join(sorted(set(tree.failures))) + ".")
    if changed:
        report += ("\n\nThe working tree's olcli/ sources changed during the run (someone editing it) before: "
                   + ", ".join(f"repetition {r + 1} {label}" for r, label in changed)
                   + "; Numba recompiles an edited kernel module on its next run, and the code measured is "
                     "not one version.")
    report += "\n"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
