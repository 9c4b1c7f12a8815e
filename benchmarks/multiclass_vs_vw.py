"""Multiclass error of olcli next to VW, on letter (K=26) and news20 (K=20), same run.

    pip install ".[bench]" && python benchmarks/multiclass_vs_vw.py [DATA_DIR]

For each configuration: the progressive multiclass 0/1 error on train.vw (single pass, -b 18)
and the error of the final model on test.vw. VW is `python -m vowpalwabbit --oaa K
--loss_function logistic -b 18`, tested with `-t -i`.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

SETS = {"letter": 26, "news20_bydate": 20}
CONFIGS = [
    ("olcli --oaa (AdaGrad, logistic)", ["--oaa", "{K}", "--loss", "logistic"]),
    ("olcli --softmax (AdaGrad)", ["--softmax", "{K}"]),
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
    olcli_cmd = [sys.executable, "-m", "olcli"]
    subprocess.run(olcli_cmd + ["train", train, "-b", "18", "--quiet", "-f", model, "--report", report, *flags],
                   check=True)
    progressive = json.load(open(report))["average_loss"]
    out = subprocess.run(olcli_cmd + ["test", test, "-i", model, "-p", "-", "--quiet"], check=True,
                         capture_output=True, text=True).stdout
    return progressive, error([int(x) for x in out.split()], labels_of(test))


def vw(train, test, classes, tmp):
    model, predictions = os.path.join(tmp, "vw.model"), os.path.join(tmp, "vw.pred")
    done = subprocess.run([sys.executable, "-m", "vowpalwabbit", "-d", train, "--oaa", str(classes),
                           "--loss_function", "logistic", "-b", "18", "-f", model],
                          capture_output=True, text=True, check=True)
    progressive = float(re.search(r"average loss = ([0-9.]+)", done.stderr + done.stdout).group(1))
    subprocess.run([sys.executable, "-m", "vowpalwabbit", "-d", test, "-t", "-i", model, "-p", predictions,
                    "--quiet"], check=True)
    with open(predictions) as f:
        predicted = [int(float(line.split()[0])) for line in f]
    return progressive, error(predicted, labels_of(test))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
    print("| data | configuration | progressive error (train) | test error |")
    print("|---|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, classes in SETS.items():
            train, test = os.path.join(data, name, "train.vw"), os.path.join(data, name, "test.vw")
            for label, flags in CONFIGS:
                p, t = olcli(train, test, [f.format(K=classes) for f in flags], tmp)
                print(f"| {name} | {label} | {p:.4f} | {t:.4f} |", flush=True)
            p, t = vw(train, test, classes, tmp)
            print(f"| {name} | VW --oaa {classes} --loss_function logistic | {p:.4f} | {t:.4f} |", flush=True)


if __name__ == "__main__":
    main()
