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
    rows, data = [], []
    for name, path, k in files:
        for rule_name, rule in RULES:
            line = ["--cbify", str(k), "--cb_explore_adf", *rule, "-d", path]
            vw_runs, ol_runs = [], []
            for _ in range(args.runs):
                vw_runs.append(harness.run_vw(line, separate_stderr=True))
                ol = harness.run_olcli(["vw", *line], separate_stderr=True)
                ol.summary = harness.vw_summary(ol.output + ol.stderr)
                ol_runs.append(ol)
                res.note_load()
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
    res.data = {"rows": data, "runs": args.runs, "lines": args.lines}
    print(res.write(), file=sys.stderr)


if __name__ == "__main__":
    main()
