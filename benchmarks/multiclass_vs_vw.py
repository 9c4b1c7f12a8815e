"""Multiclass error of olcli next to VW, on letter (K=26) and news20 (K=20), same run.

    pip install ".[bench]" && python -m benchmarks.multiclass_vs_vw [DATA_DIR] [--lines N]

For each configuration: the progressive multiclass 0/1 error on train.vw (single pass, -b 18)
and the error of the final model on test.vw. VW is `python -m vowpalwabbit --oaa K
--loss_function logistic -b 18`, tested with `-t -i`. ``--lines N`` takes the first N lines of
each file (a quick try).
"""

import argparse
import os
import tempfile

from benchmarks.harness import DATA, head, run_olcli, run_vw

SETS = {"letter": 26, "news20_bydate": 20}
CONFIGS = [
    ("olcli --oaa (default learner, logistic)", ["--oaa", "{K}", "--loss", "logistic"]),
    ("olcli --softmax (default learner)", ["--softmax", "{K}"]),
    ("olcli --oaa --scinol2 (logistic)", ["--oaa", "{K}", "--loss", "logistic", "--scinol2"]),
    ("olcli --softmax --scinol2", ["--softmax", "{K}", "--scinol2"]),
]


def error(predictions, labels):
    return sum(p != y for p, y in zip(predictions, labels)) / len(labels)


def labels_of(path):
    with open(path) as f:
        return [int(float(line.split()[0])) for line in f if line.strip()]


def olcli(train, test, flags, tmp):
    model, report = os.path.join(tmp, "m.olm"), os.path.join(tmp, "r.json")
    progressive = run_olcli(["train", train, "-b", "18", "--quiet", "-f", model, *flags], report=report).summary["loss"]
    out = run_olcli(["test", test, "-i", model, "-p", "-", "--quiet"], separate_stderr=True).output
    return progressive, error([int(x) for x in out.split()], labels_of(test))


def vw(train, test, classes, tmp):
    model, predictions = os.path.join(tmp, "vw.model"), os.path.join(tmp, "vw.pred")
    progressive = run_vw(["-d", train, "--oaa", classes, "--loss_function", "logistic", "-b", "18",
                          "-f", model]).summary["loss"]
    run_vw(["-d", test, "-t", "-i", model, "-p", predictions, "--quiet"])
    with open(predictions) as f:
        predicted = [int(float(line.split()[0])) for line in f]
    return progressive, error(predicted, labels_of(test))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=DATA)
    parser.add_argument("--lines", type=int, default=None)
    args = parser.parse_args()
    data = args.data
    print("| data | configuration | progressive error (train) | test error |")
    print("|---|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, classes in SETS.items():
            train, test = os.path.join(data, name, "train.vw"), os.path.join(data, name, "test.vw")
            if args.lines:
                train = head(train, args.lines, os.path.join(tmp, f"{name}_train.vw"))
                test = head(test, args.lines, os.path.join(tmp, f"{name}_test.vw"))
            for label, flags in CONFIGS:
                p, t = olcli(train, test, [f.format(K=classes) for f in flags], tmp)
                print(f"| {name} | {label} | {p:.4f} | {t:.4f} |", flush=True)
            p, t = vw(train, test, classes, tmp)
            print(f"| {name} | VW --oaa {classes} --loss_function logistic | {p:.4f} | {t:.4f} |", flush=True)


if __name__ == "__main__":
    main()
