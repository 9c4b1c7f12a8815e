"""Throughput of the Python API (``olcli.Learner``) next to the CLI on the same files, same run.

    python -m benchmarks.api_throughput [--runs 5] [--batch 10000] [--algorithm adagrad]
                                        [--data DIR] [--work DIR] [--out FILE]

Examples/s and features/s of ``Learner.learn`` and ``Learner.predict``, batches of
``--batch`` examples, logistic loss, -b 18, the default algorithm unless ``--algorithm``:

- the generated click log (1M lines, ``python -m olcli.datagen click --lines 1000000
  --seed 7``) given as VW lines: a list of ``bytes`` lines (as ``readlines()`` gives them),
  a list of ``str`` lines, and one ``bytes`` buffer per batch;
- SciPy CSR batches ``(X, y)``: a9a (``a9a/train.libsvm`` read with sklearn's
  ``load_svmlight_file(zero_based=True)``, so column j is libsvm index j) and the generated
  text (``python -m olcli.datagen text --lines 200000``) vectorised into word counts
  (one column per word, sklearn's CountVectorizer over the ``|w`` namespace);
- ``predict`` on the same batches, with the model the learn case ended with;
- ``olcli train FILE --loss logistic -b 18 --quiet`` (and ``olcli test -i MODEL``) on the
  same files for reference: the click log, a9a's libsvm file, the text file.

Batches are prepared once (slicing or reading them is not timed); each timed learn case
starts from a fresh learner. Every case runs once to warm up (Numba compiles or loads its
cache), then ``--runs`` times, the cases interleaved; reported: the median, min-max,
examples/s and features/s from the median (features as VW counts them, the constant
included: the learner's ``summary().total_features``), the share of the time spent in the
kernel call (``Learner.process``; the rest is turning the input into a batch: parsing
text, or checking and hashing a matrix), and the progressive loss as a check that the forms
learn the same thing. CLI rows: wall time of the whole process (start-up, reading, parsing,
learning, writing the model) and, in brackets, the run's own ``elapsed_seconds``.
Writes benchmarks/results/api_throughput.md (or ``--out``) and prints it.
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from benchmarks.harness import DATA, RESULTS, ROOT, click_log, default_algorithm, generated, machine, run_olcli
from olcli.learner import Learner

BITS = 18


class TimedLearner(Learner):
    """A Learner that adds up the time of its kernel calls (the one door, ``process``)."""

    kernel_seconds = 0.0

    def process(self, batch, learn, tally=None):
        started = time.perf_counter()
        done = super().process(batch, learn, tally)
        self.kernel_seconds += time.perf_counter() - started
        return done


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--scale", type=float, default=1.0, help="generated files x this (a quick try: 0.02)")
    parser.add_argument("--algorithm", default=None, help="default: olcli's default algorithm")
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    parser.add_argument("--out", default=os.path.join(RESULTS, "api_throughput.md"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return args


def line_batches(path, size):
    """The file's lines (bytes, with their newline) in batches of ``size``."""
    with open(path, "rb") as f:
        lines = f.readlines()
    return [lines[i:i + size] for i in range(0, len(lines), size)]


def csr_batches(X, y, size):
    return [(X[i:i + size], y[i:i + size]) for i in range(0, X.shape[0], size)]


def text_matrix(path):
    """The generated text as (word-count CSR, labels): one column per distinct word."""
    from sklearn.feature_extraction.text import CountVectorizer

    labels, documents = [], []
    with open(path) as f:
        for line in f:
            label, _, words = line.partition("|w")
            labels.append(float(label))
            documents.append(words)
    vectorizer = CountVectorizer(token_pattern=r"\S+", lowercase=False, dtype=np.float64)
    X = vectorizer.fit_transform(documents).tocsr()
    X.sort_indices()
    return X, np.array(labels)


class Case:
    """One timed way of learning (or predicting) a dataset's batches."""

    def __init__(self, dataset, form, batches, n_examples, predict=False, learn_case=None):
        self.dataset, self.form, self.batches, self.n_examples = dataset, form, batches, n_examples
        self.predict, self.learn_case = predict, learn_case
        self.times, self.kernel_shares = [], []
        self.features = self.loss = self.learner = None

    @property
    def what(self):
        return "predict" if self.predict else "learn"

    def run(self, algorithm):
        if self.predict:
            learner = self.learn_case.learner
            learner.kernel_seconds = 0.0
            started = time.perf_counter()
            for batch in self.batches:
                learner.predict(batch)
            elapsed = time.perf_counter() - started
            self.features = self.learn_case.features
        else:
            learner = TimedLearner(algorithm, loss="logistic", bits=BITS)
            started = time.perf_counter()
            for batch in self.batches:
                learner.learn(batch)
            elapsed = time.perf_counter() - started
            summary = learner.summary()
            if summary.examples != self.n_examples:
                raise SystemExit(f"{self.dataset} {self.form}: learned {summary.examples} examples, "
                                 f"expected {self.n_examples}")
            self.features, self.loss, self.learner = summary.total_features, summary.average_loss, learner
        return elapsed, learner.kernel_seconds / elapsed


class CliCase:
    """``olcli train`` (or ``olcli test -i``) on a file, as a subprocess from the repository root."""

    def __init__(self, dataset, path, n_examples, model, predict=False):
        self.dataset, self.path, self.n_examples, self.model, self.predict = dataset, path, n_examples, model, predict
        self.form = f"CLI `olcli {'test -i MODEL' if predict else 'train'}` on {os.path.basename(path)}"
        self.times, self.kernel_shares, self.internal = [], [], []
        self.features = self.loss = None

    @property
    def what(self):
        return "predict" if self.predict else "learn"

    def run(self, algorithm):
        report = self.model + (".test" if self.predict else "") + ".json"
        if self.predict:
            command = ["test", self.path, "-i", self.model, "--quiet"]
        else:
            command = ["train", self.path, "--loss", "logistic", "-b", str(BITS), "--quiet", "-f", self.model] + (
                [f"--{algorithm}"] if algorithm else [])
        elapsed = run_olcli(command, report=report, cwd=ROOT).wall
        numbers = json.load(open(report))
        if numbers["examples"] != self.n_examples:
            raise SystemExit(f"{self.form}: {numbers['examples']} examples, expected {self.n_examples}")
        self.features, self.loss = numbers["total_features"], numbers["average_loss"]
        self.internal.append(numbers["elapsed_seconds"])
        return elapsed, None


def rate(count, seconds):
    value = count / seconds
    return f"{value / 1e6:.2f} M" if value >= 1e6 else f"{value / 1e3:.0f} k"


def _size(lines):
    return f"{lines / 1e6:g}M" if lines >= 1e6 else f"{lines / 1e3:g}k"


def main():
    args = parse_arguments()
    from sklearn.datasets import load_svmlight_file

    click = click_log(args.work, int(1_000_000 * args.scale))
    text = generated(args.work, "text", int(200_000 * args.scale))
    CLICK, TEXT = f"click {_size(1_000_000 * args.scale)}", f"text {_size(200_000 * args.scale)}"
    a9a = os.path.join(args.data, "a9a", "train.libsvm")
    if not os.path.exists(a9a):
        sys.exit(f"missing data: {a9a}; pass --data DIR (the folder holding a9a/)")

    print("preparing batches ...", file=sys.stderr)
    click_lines = line_batches(click, args.batch)
    n_click = sum(len(b) for b in click_lines)
    click_str = [[line.decode() for line in b] for b in click_lines]
    click_buffers = [b"".join(b) for b in click_lines]
    X, y = load_svmlight_file(a9a, zero_based=True)
    a9a_batches = csr_batches(X.tocsr(), y, args.batch)
    Xt, yt = text_matrix(text)
    text_batches = csr_batches(Xt, yt, args.batch)

    learn_cases = [
        Case(CLICK, "list of `bytes` lines", click_lines, n_click),
        Case(CLICK, "list of `str` lines", click_str, n_click),
        Case(CLICK, "one `bytes` buffer per batch", click_buffers, n_click),
        Case("a9a", "SciPy CSR `(X, y)`", a9a_batches, X.shape[0]),
        Case(TEXT, "SciPy CSR `(X, y)` (word counts)", text_batches, Xt.shape[0]),
    ]
    predict_cases = [Case(c.dataset, c.form, c.batches, c.n_examples, predict=True, learn_case=c)
                     for c in learn_cases]
    tmp = tempfile.mkdtemp(prefix="olcli-api-")
    cli_cases = []
    for dataset, path, n in ((CLICK, click, n_click), ("a9a", a9a, X.shape[0]), (TEXT, text, Xt.shape[0])):
        model = os.path.join(tmp, dataset.replace(" ", "_") + ".olm")
        cli_cases += [CliCase(dataset, path, n, model), CliCase(dataset, path, n, model, predict=True)]
    # Interleaved: each repetition runs every case once; a predict case follows its learn case.
    order = [c for pair in zip(learn_cases, predict_cases) for c in pair] + cli_cases

    for repetition in range(args.runs + 1):
        for case in order:
            elapsed, share = case.run(args.algorithm)
            if repetition:  # the first round is the warm-up
                case.times.append(elapsed)
                if share is not None:
                    case.kernel_shares.append(share)
        print(f"round {repetition}/{args.runs} done", file=sys.stderr)

    algorithm = args.algorithm or f"{default_algorithm()} (the default)"
    rows = []
    for case in sorted(order, key=lambda c: ([CLICK, "a9a", TEXT].index(c.dataset),
                                             c.what, isinstance(c, CliCase))):
        median = statistics.median(case.times)
        share = f"{statistics.median(case.kernel_shares):.0%}" if case.kernel_shares else "—"
        seconds = f"{median:.3f} ({min(case.times):.3f}–{max(case.times):.3f})"
        if isinstance(case, CliCase):
            seconds += f" [{statistics.median(case.internal):.3f}]"
        loss = f"{case.loss:.6f}" if case.loss is not None else "—"
        rows.append(f"| {case.dataset} | {case.what} | {case.form} | {case.n_examples:,} | {case.features:,} | "
                    f"{seconds} | {rate(case.n_examples, median)} | {rate(case.features, median)} | {share} | "
                    f"{loss} |")

    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    report = "\n".join([
        "# Python API throughput (`Learner.learn` / `Learner.predict`) next to the CLI",
        "",
        f"`python -m benchmarks.api_throughput --runs {args.runs} --batch {args.batch}`; {date}.",
        f"Machine: {machine()}.",
        "",
        f"{algorithm}, `--loss logistic -b {BITS}`, batches of {args.batch:,} examples, one pass; "
        f"median of {args.runs} runs after a warm-up, all cases interleaved in each run (min–max in "
        "brackets). Rates are from the median. *kernel* is the share of the time in the kernel call "
        "(`Learner.process`); the rest turns the input into a batch (joining lines, parsing, or "
        "checking and hashing the matrix). CLI rows: wall time of the whole process, start-up and "
        "model writing included, with the run's own `elapsed_seconds` in square brackets. Loss: "
        "the progressive average logistic loss of learn, as a check that the forms agree (CSR "
        "a9a = the libsvm file; the text CSR has one column per distinct word, duplicates summed, "
        "not VW's hashes of every `|w` word, so its loss and feature count differ from the VW "
        "file's); for `olcli test` the final model's loss on the same file.",
        "",
        "| data | call | input | examples | features | seconds | examples/s | features/s | kernel | loss |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|",
        *rows,
        "",
    ])
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
