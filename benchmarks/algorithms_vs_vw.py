"""Progressive logistic loss of every olcli algorithm next to VW, on the same files, same run.

    pip install ".[bench]" && python benchmarks/algorithms_vs_vw.py [DATA_DIR]

DATA_DIR defaults to ../shared/data (the project's dataset folder beside the repo). Single
pass, -b 18, logistic loss, every algorithm at its defaults; VW is the vowpalwabbit package
(`python -m vowpalwabbit`), run with its default learner, --ftrl and --coin.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

from olcli.engine.registry import ALGORITHMS

FILES = ["a9a/train.vw", "cod_rna/train.shuf42.vw"]
VW_VARIANTS = {"VW default": [], "VW --ftrl": ["--ftrl"], "VW --coin": ["--coin"]}


def olcli_loss(path, algorithm):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        subprocess.run([sys.executable, "-m", "olcli", "train", path, f"--{algorithm}", "--loss", "logistic",
                        "-b", "18", "--quiet", "--report", report], check=True)
        return json.load(open(report))["average_loss"]


def vw_loss(path, flags):
    done = subprocess.run([sys.executable, "-m", "vowpalwabbit", "-d", path, "--loss_function", "logistic",
                           "-b", "18", *flags], capture_output=True, text=True, check=True)
    return float(re.search(r"average loss = ([0-9.]+)", done.stdout + done.stderr).group(1))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
    columns = list(ALGORITHMS) + list(VW_VARIANTS)
    print("| file | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name in FILES:
        path = os.path.join(data, name)
        row = [olcli_loss(path, a) for a in ALGORITHMS] + [vw_loss(path, f) for f in VW_VARIANTS.values()]
        print(f"| {name} | " + " | ".join(f"{x:.4f}" if x < 100 else f"{x:.2f}" for x in row) + " |", flush=True)


if __name__ == "__main__":
    main()
