"""Whole processes against VW on the text and click generators, alternated, a few cases only.

    python -m benchmarks.text_speed_vw [--runs 3] [--data DIR] [--text-algorithms mix,gd,...] [--click-algorithms mix,gd]
                                       [--tree LABEL=PATH ...] [--kinds text,click]

The cases of ``benchmarks.throughput_vs_vw`` (``olcli train FILE --loss logistic -b 18 --quiet
[--ALGORITHM]`` against ``python -m vowpalwabbit -d FILE --loss_function logistic -b 18
--quiet``), on fewer algorithms, so that a quick A/B of the parser fits in minutes: one
warm-up run of each case, then ``--runs`` rounds, the order rotated each round; the minimum
and the median wall and CPU of each case, and their ratios to VW's. With ``--tree`` (given
more than once) each olcli case runs once per tree (``PYTHONPATH=PATH``, labelled ``[LABEL]``)
in the same rotated rounds: an A/B of two checkouts beside VW.
"""

import argparse
import os
import statistics
import tempfile

from benchmarks.harness import generated, load_average, python_env, run_olcli, run_vw


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "olcli-throughput"))
    parser.add_argument("--text-algorithms", default="mix,gd,adagrad,ftrl,coin,scinol2")
    parser.add_argument("--click-algorithms", default="mix,gd")
    parser.add_argument("--tree", action="append", default=[],
                        help="LABEL=PATH: run olcli from this checkout (PYTHONPATH); repeat for an A/B")
    parser.add_argument("--kinds", default="text,click")
    args = parser.parse_args()
    trees = [tuple(tree.split("=", 1)) for tree in args.tree] or [(None, None)]
    tmp = tempfile.mkdtemp(prefix="olcli-tsvw-")
    print(f"load {load_average():.2f}")
    for kind, lines, algorithms in (("text", 200_000, args.text_algorithms), ("click", 1_000_000,
                                                                              args.click_algorithms)):
        if kind not in args.kinds.split(","):
            continue
        path = generated(args.data, kind, lines)
        cases = {"VW": lambda: run_vw(["-d", path, "--loss_function", "logistic", "-b", "18", "--quiet"])}
        for name in algorithms.split(","):
            flags = [] if name == "mix" else [f"--{name}"]
            for label, tree in trees:
                env = None if tree is None else python_env(PYTHONPATH=tree)
                cases[f"olcli {'default' if name == 'mix' else '--' + name}{f' [{label}]' if label else ''}"] = (
                    lambda flags=flags, env=env: run_olcli(
                        ["train", path, "--loss", "logistic", "-b", 18, "--quiet", *flags],
                        report=os.path.join(tmp, "r.json"), env=env))
        names = list(cases)
        samples = {name: [] for name in names}
        for name in names:
            cases[name]()  # warm-up
        for rep in range(args.runs):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                done = cases[name]()
                samples[name].append((done.wall, done.cpu))
        vw_wall = min(s[0] for s in samples["VW"])
        vw_cpu = min(s[1] for s in samples["VW"])
        print(f"\n{kind} {lines} lines (load {load_average():.2f}); min / median of {args.runs}")
        print("| case | wall s | CPU s | wall / VW (min) | CPU / VW (min) | median wall / VW |")
        print("|---|---|---|---|---|---|")
        vw_median = statistics.median(s[0] for s in samples["VW"])
        for name in names:
            walls = [s[0] for s in samples[name]]
            cpus = [s[1] for s in samples[name]]
            print(f"| {name} | {min(walls):.2f} / {statistics.median(walls):.2f} | {min(cpus):.2f} | "
                  f"{min(walls) / vw_wall:.2f} | {min(cpus) / vw_cpu:.2f} | "
                  f"{statistics.median(walls) / vw_median:.2f} |")


if __name__ == "__main__":
    main()
