"""Progressive logistic loss of every olcli algorithm next to VW, on the same files, same run.

    pip install ".[bench]" && python -m benchmarks.algorithms_vs_vw [DATA_DIR] [--lines N]

DATA_DIR defaults to ../shared/data (the project's dataset folder beside the repo); ``--lines N``
takes the first N lines of each file (a quick try). Single
pass, -b 18, logistic loss, every algorithm at its defaults; VW is the vowpalwabbit package
(`python -m vowpalwabbit`), run with its default learner, --ftrl and --coin.

The last column runs the slow pure-Python ScInOL2 of the test suite (tests/naive.py, written
from Algorithm 2 of the paper) over the same file with its own few-line reader and the tests'
pure-Python MurmurHash3 (so features that collide at -b 18 share a coordinate, as in olcli):
no olcli parser or kernel, every coordinate updated every round. It shows that olcli's ScInOL2
loss on each file is the algorithm's own, not an artefact of the pipeline.
"""

import argparse
import os
import tempfile

from benchmarks.harness import DATA, head, run_olcli, run_vw
from olcli.engine.registry import ALGORITHMS
from tests import naive  # the tests' paper references

FILES = ["a9a/train.vw", "w8a/train.shuf42.vw", "phishing_libsvm/train.vw", "covtype_binary_20k/train.vw",
         "sst2/train.vw", "cod_rna/train.shuf42.vw"]
REFERENCE_MAX_COORDINATES = 1000  # the dense reference costs rounds x coordinates
VW_VARIANTS = {"VW default": [], "VW --ftrl": ["--ftrl"], "VW --coin": ["--coin"]}


def olcli_loss(path, algorithm):
    with tempfile.TemporaryDirectory() as tmp:
        return run_olcli(["train", path, f"--{algorithm}", "--loss", "logistic", "-b", "18", "--quiet"],
                         report=os.path.join(tmp, "r.json")).summary["loss"]


def vw_loss(path, flags):
    return run_vw(["-d", path, "--loss_function", "logistic", "-b", "18", *flags]).summary["loss"]


def reference_scinol2_loss(path, epsilon=1.0, bits=18):
    """Progressive logistic loss of tests/naive.py's ScInOL2 over a VW file with plain labels
    and namespaces without scale (``y |ns name[:value] ...``): one coordinate per hashed index
    (values of colliding features summed), plus the constant feature. None when the file has
    more coordinates than a dense run can take."""
    examples, index = [], {"constant": 0}
    for line in open(path):
        label, _, rest = line.partition("|")
        x = {0: 1.0}
        for group in rest.split("|"):
            tokens = group.split()
            namespace, tokens = ("", tokens) if group[:1] in " \t" else (tokens[0], tokens[1:])
            for token in tokens:
                name, _, value = token.partition(":")
                i = index.setdefault(naive.vw_feature_index(namespace, name, bits), len(index))
                x[i] = x.get(i, 0.0) + (float(value) if value else 1.0)
        examples.append((x, float(label.split()[0])))
    if len(index) > REFERENCE_MAX_COORDINATES:
        return None
    learner = naive.REFERENCES["scinol2"](len(index), {"epsilon": epsilon})
    total = sum(naive.loss("logistic", learner.learn(x, y, 1.0, "logistic"), y) for x, y in examples)
    return total / len(examples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=DATA)
    parser.add_argument("--lines", type=int, default=None)
    args = parser.parse_args()
    data, scratch = args.data, tempfile.mkdtemp(prefix="olcli-algorithms-")
    columns = list(ALGORITHMS) + list(VW_VARIANTS) + ["scinol2, paper reference"]
    print("| file | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    differences = []
    for name in FILES:
        path = os.path.join(data, name)
        if args.lines:
            path = head(path, args.lines, os.path.join(scratch, name.replace("/", "_")))
        row = [olcli_loss(path, a) for a in ALGORITHMS] + [vw_loss(path, f) for f in VW_VARIANTS.values()]
        row.append(reference_scinol2_loss(path))
        if row[-1] is not None:
            differences.append(f"{name} {abs(row[columns.index('scinol2')] / row[-1] - 1):.1e}")
        cells = ["—" if x is None else f"{x:.4f}" if x < 100 else f"{x:.2f}" for x in row]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print("\nolcli --scinol2 against the paper reference, relative difference: " + ", ".join(differences))


if __name__ == "__main__":
    main()
