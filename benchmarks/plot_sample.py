"""The README's learning-curve picture: two runs on sample_data/ through `olcli plot`.

The default (--mix) and --adagrad learn a9a_train.vw (6,000 examples) with the logistic
loss and three passes, each writing a --report; `olcli plot` then draws both reports, so the picture shows
both panels (progressive loss by example, holdout loss by pass).

    python -m benchmarks.plot_sample [--out benchmarks/results/curves_sample.png]

Needs the plot extra (pip install ".[plot]"). The commands are run as a user would, with
the same Python (`python -m olcli`), and are printed first.
"""

import argparse
import os
import shlex
import sys
import tempfile

from benchmarks.harness import RESULTS, ROOT, run_olcli

DATA = os.path.join(ROOT, "sample_data", "a9a_train.vw")
RUNS = (("mix (default)", "mix", []), ("adagrad", "adagrad", ["--adagrad"]))


def olcli(*args: str) -> None:
    print("$ olcli " + " ".join(shlex.quote(a) for a in args), file=sys.stderr)
    run_olcli(args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(RESULTS, "curves_sample.png"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plot-sample-") as work:
        reports, labels = [], []
        for label, name, flags in RUNS:
            report = os.path.join(work, f"{name}.json")
            olcli("train", DATA, "--loss", "logistic", *flags, "--passes", "3",
                  "--cache", os.path.join(work, f"{name}.olcache"), "--report", report, "--quiet")
            reports.append(report)
            labels += ["--label", label]
        olcli("plot", *reports, *labels, "-o", args.out)


if __name__ == "__main__":
    main()
