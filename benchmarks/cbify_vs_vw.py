"""``--cbify K`` bandit simulations, olcli vw beside VW 9.11.9 in the same run (issue 30's second target).

    python -m benchmarks.cbify_vs_vw [--data DIR] [--runs N] [--lines N] [--out-name cbify_vs_vw]

For letter (K = 26, 16,000 lines), news20 (K = 20, 11,314 lines) and covtype (the shared data holds
only ``covtype_binary_20k``: 20,000 lines, its -1/+1 labels written as classes 2/1 to a scratch copy,
so K = 2) and for each exploration rule ``--cbify K --cb_explore_adf --epsilon 0.05`` and ``--cbify K
--cb_explore_adf --squarecb``, the same command line is run by VW (``python -m vowpalwabbit``) and by
``olcli vw``, one after the other, each ``--runs`` times (default 1): the progressive CB loss (cbify's
``average loss``, the fraction of examples whose sampled action was not the true class), number of
examples and total feature number from each one's summary, and the wall and CPU seconds of the whole
process (start-up included). Targets (issue 30): olcli's loss <= 1.02 x VW's, wall <= 1.0 x VW's.

Since both tools' start-up is part of every run (olcli's ~2x VW's), each command is also run on the file
written twice (2N lines: the second copy continues the same simulation) and the per-event cost is
(wall(2N) − wall(N)) / N for each tool, likewise for CPU. A third olcli run (N lines, in a process that
wraps the chunk kernel ``cb_loop.cbify_gd`` and ``cb_sim.Cbify.run_chunk``/``cbify_input._run_block`` and the parser's ``parsing.parse_chunk`` with timers) gives
the seconds spent in the kernel alone, in the parser, and in the chunk step (a block read in one parse: the
kernel and what is printed, its label parts and parse being done on a worker thread meanwhile; a block read
line by line: its parse too). CPU seconds are the process's (every thread's).

Before the timed runs olcli runs the first 50 lines of each file once, so Numba's cache holds the
kernels (the development install's ahead-of-time build may be stale; a JIT compile is not counted). The
load average of the machine (shared with other work) is in the results' heading and per row.
"""

import argparse
import os
import statistics
import sys
import tempfile

from benchmarks import harness

DATASETS = [("letter", "letter/train.vw", 26), ("news20", "news20_bydate/train.vw", 20),
            ("covtype (binary, as 1/2)", "covtype_binary_20k/train.vw", 2)]
RULES = [("epsilon 0.05", ["--epsilon", "0.05"]), ("squarecb", ["--squarecb"])]


def binary_as_classes(src, dst, lines=None):
    """A -1/+1 file written with classes 2/1 (cbify needs labels 1..K)."""
    with open(src) as f, open(dst, "w") as g:
        for n, line in enumerate(f):
            if lines is not None and n >= lines:
                break
            label, rest = line.split(" ", 1)
            g.write(("2 " if label == "-1" else "1 ") + rest)
    return dst


def prepare(data, work, lines=None):
    out = []
    for name, rel, k in DATASETS:
        src = os.path.join(data, rel)
        harness.require([src])
        if k == 2:
            path = binary_as_classes(src, os.path.join(work, "covtype_classes.vw"), lines)
        elif lines is not None:
            path = harness.head(src, lines, os.path.join(work, os.path.basename(os.path.dirname(rel)) + ".vw"))
        else:
            path = src
        out.append((name, path, k))
    return out


# olcli's process with timers around the chunk kernel and the chunk step (argv: olcli's arguments; the times go
# as JSON to the file $CBIFY_TIMES)
TIMED = """
import json, os, sys, time
from olcli import cb_sim, cbify_input
from olcli.engine import cb_loop
from olcli import parsing
spent = dict(kernel_wall=0.0, kernel_cpu=0.0, chunk_wall=0.0, chunk_cpu=0.0, parse_wall=0.0, parse_cpu=0.0)
def timed(fn, key):
    def call(*a, **k):
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **k)
        finally:
            spent[key + "_wall"] += time.perf_counter() - w
            spent[key + "_cpu"] += time.process_time() - c
    return call
cb_loop.KERNELS["gd"] = timed(cb_loop.KERNELS["gd"], "kernel")
cb_sim.Cbify.run_chunk = timed(cb_sim.Cbify.run_chunk, "chunk")
cbify_input._run_block = timed(cbify_input._run_block, "chunk")
parsing.parse_chunk = timed(parsing.parse_chunk, "parse")
from olcli.cli import _run_app
w, c = time.perf_counter(), time.process_time()
code = _run_app(sys.argv[1:])
spent.update(run_wall=time.perf_counter() - w, run_cpu=time.process_time() - c, code=code)
with open(os.environ["CBIFY_TIMES"], "w") as f:
    json.dump(spent, f)
"""


def doubled(path, out):
    """``path`` written twice into ``out``."""
    with open(path, "rb") as f:
        text = f.read()
    with open(out, "wb") as g:
        g.write(text + (b"" if text.endswith(b"\n") else b"\n") + text)
    return out


def timed_olcli(args, work):
    """The in-process times of TIMED for ``olcli ARGS``."""
    import json

    out = os.path.join(work, "times.json")
    env = dict(os.environ, CBIFY_TIMES=out)
    harness.measure([sys.executable, "-c", TIMED, *[str(a) for a in args]], env=env, separate_stderr=True)
    with open(out) as f:
        return json.load(f)


def ratio(a, b):
    return a / b if a is not None and b else None


def f3(x, digits=3):
    return "—" if x is None else f"{x:.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=harness.DATA)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--lines", type=int, default=None, help="only the first N lines of each file (a trial)")
    ap.add_argument("--out-name", default="cbify_vs_vw")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cbify_vs_vw_")
    files = prepare(args.data, work, args.lines)
    res = harness.Results(args.out_name, "`--cbify K` bandit simulations: olcli vw beside VW 9.11.9 (issue 30)")
    for _, path, _ in files:   # Numba's cache holds the kernels before anything is timed
        warm = harness.head(path, 50, os.path.join(work, "warm.vw"))
        for _, rule in RULES:
            harness.run_olcli(["vw", "--cbify", "26", "--cb_explore_adf", *rule, "-d", warm, "--quiet"],
                              check=False)
    rows, data, event_rows = [], [], []
    for name, path, k in files:
        twice = doubled(path, os.path.join(work, "twice_" + os.path.basename(path)))
        n_lines = sum(1 for text in open(path, "rb") if text.strip())
        for rule_name, rule in RULES:
            line = ["--cbify", str(k), "--cb_explore_adf", *rule, "-d", path]
            line2 = [*line[:-1], twice]
            vw_runs, ol_runs, vw2_runs, ol2_runs, timed_runs = [], [], [], [], []
            for _ in range(args.runs):
                vw_runs.append(harness.run_vw(line, separate_stderr=True))
                ol = harness.run_olcli(["vw", *line], separate_stderr=True)
                ol.summary = harness.vw_summary(ol.output + ol.stderr)
                ol_runs.append(ol)
                vw2_runs.append(harness.run_vw(line2, separate_stderr=True))
                ol2_runs.append(harness.run_olcli(["vw", *line2, "--quiet"], separate_stderr=True))
                timed_runs.append(timed_olcli(["vw", *line, "--quiet"], work))
                res.note_load()
            med = statistics.median
            per = {tool: {what: (med(getattr(r, what) for r in two) - med(getattr(r, what) for r in one)) / n_lines
                          for what in ("wall", "cpu")}
                   for tool, one, two in (("vw", vw_runs, vw2_runs), ("olcli", ol_runs, ol2_runs))}
            kernel = {key: med(r[key] for r in timed_runs) for key in timed_runs[0] if key != "code"}
            event_rows.append([name, f"`{rule_name}`", str(n_lines),
                               f3(per["vw"]["wall"] * 1e6, 1), f3(per["olcli"]["wall"] * 1e6, 1),
                               f3(ratio(per["olcli"]["wall"], per["vw"]["wall"]), 2),
                               f3(per["vw"]["cpu"] * 1e6, 1), f3(per["olcli"]["cpu"] * 1e6, 1),
                               f3(ratio(per["olcli"]["cpu"], per["vw"]["cpu"]), 2),
                               f3(kernel["kernel_wall"], 3), f3(kernel["kernel_cpu"], 3),
                               f3(kernel["parse_wall"], 3), f3(kernel["chunk_wall"], 3), f3(kernel["run_wall"], 3),
                               f3(kernel["run_cpu"], 3),
                               f3(med(r.wall for r in vw_runs), 3)])
            vw, ol = vw_runs[-1].summary, ol_runs[-1].summary
            vw_wall = statistics.median(r.wall for r in vw_runs)
            ol_wall = statistics.median(r.wall for r in ol_runs)
            vw_cpu = statistics.median(r.cpu for r in vw_runs)
            ol_cpu = statistics.median(r.cpu for r in ol_runs)
            load = statistics.median(r.load for r in vw_runs + ol_runs)
            same = vw.get("examples") == ol.get("examples") and vw.get("features") == ol.get("features")
            loss_ratio = ratio(ol.get("loss"), vw.get("loss"))
            wall_ratio = ratio(ol_wall, vw_wall)
            rows.append([name, f"`{rule_name}`", vw.get("examples"), "yes" if same else "**no**",
                         f3(vw.get("loss"), 6), f3(ol.get("loss"), 6), f3(loss_ratio, 4),
                         "met" if loss_ratio is not None and loss_ratio <= 1.02 else "**not met**",
                         f3(vw_wall, 2), f3(ol_wall, 2), f3(wall_ratio, 1),
                         "met" if wall_ratio is not None and wall_ratio <= 1.0 else "**not met**",
                         f3(vw_cpu, 2), f3(ol_cpu, 2), f"{load:.1f}"])
            data.append({"dataset": name, "rule": rule_name, "k": k, "command": " ".join(line[:-1]),
                         "vw": [r.numbers() for r in vw_runs], "olcli": [r.numbers() for r in ol_runs],
                         "vw_twice": [r.numbers() for r in vw2_runs], "olcli_twice": [r.numbers() for r in ol2_runs],
                         "olcli_timed": timed_runs, "per_event": per, "lines": n_lines,
                         "loss_ratio": loss_ratio, "wall_ratio": wall_ratio, "same_counts": same})
            print(f"{name} {rule_name}: loss VW {vw.get('loss')} olcli {ol.get('loss')}; wall VW {vw_wall:.2f} s "
                  f"olcli {ol_wall:.2f} s", file=sys.stderr, flush=True)
    res.say(f"Each command run {args.runs}x by each tool (median wall/CPU of whole processes, start-up included); "
            f"{'the first ' + str(args.lines) + ' lines of each file' if args.lines else 'the whole training files'}"
            ". Loss = cbify's `average loss` (progressive CB loss: the fraction of examples whose sampled action "
            "was not the label); examples/features = VW's `number of examples` and `total feature number` equal.")
    res.say()
    res.table(["data", "rule", "examples", "same examples & features", "VW loss", "olcli loss", "loss ratio",
               "≤ 1.02", "VW wall s", "olcli wall s", "wall ratio", "≤ 1.0", "VW CPU s", "olcli CPU s", "load"],
              rows, "ll" + "r" * 13)
    res.say()
    res.say("Per event: (run on the file twice − run on it once) / N lines, µs, each tool's whole process; and, in "
            "one olcli process on the N lines, the seconds in the chunk kernel alone, in the parser, in the chunk "
            "step (kernel and output; the next block's label parts and parse run on a worker thread meanwhile) and in the whole command (olcli's `_run_app`, start-up imports before "
            "it not included), beside VW's whole process.")
    res.say()
    res.table(["data", "rule", "N", "VW µs/event wall", "olcli µs/event wall", "ratio", "VW µs/event CPU",
               "olcli µs/event CPU", "ratio", "olcli kernel s", "olcli kernel CPU s", "olcli parse s",
               "olcli chunk step s", "olcli command s", "olcli command CPU s", "VW whole s"], event_rows,
              "ll" + "r" * 14)
    res.data = {"rows": data, "runs": args.runs, "lines": args.lines}
    print(res.write(), file=sys.stderr)


if __name__ == "__main__":
    main()
