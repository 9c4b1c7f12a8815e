"""Can the default's three gd members (-l 0.5, 3, 10) share one normaliser column N?
(issue 29 / issue 26: "shared columns where two members hold the same quantity")

    python -m benchmarks.experiments.shared_n_check [DATA_DIR]

Each set is learned by olcli's --gd alone at -l 0.5, 3 and 10 (the default's members, each
bit for bit as inside the mixture); the script counts the rows whose N (the largest |x_i|
the member has seen while updating) differs between -l 0.5 and each other rate. A member
raises N only at an example it updates on, and VW's float32 loss gate (gd.py) skips an
example whose loss is 0 in float32 (logistic y p >= 16.6; squared at a prediction clipped to
the label), so N can depend on the rate. Any row counted means one shared column would make
the members differ from themselves alone.
"""

import os
import sys

from benchmarks.harness import DATA
from olcli.learner import Learner

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else DATA
    sample = os.path.join(HERE, "sample_data")
    sets = [("a9a (sample)", os.path.join(sample, "a9a_train.vw"), "logistic", {}),
            ("vw_0002 (sample)", os.path.join(sample, "vw_0002.dat"), "squared", {}),
            ("letter --oaa 26 (sample)", os.path.join(sample, "letter_train.vw"), "logistic", {"oaa": 26}),
            ("california_housing", os.path.join(data, "california_housing", "data.vw"), "squared", {}),
            ("msd_year (first 100k)", os.path.join(data, "msd_year_cs190", "data.vw"), "squared", {}),
            ("phishing", os.path.join(data, "phishing_libsvm", "train.vw"), "logistic", {}),
            ("sst2", os.path.join(data, "sst2", "train.vw"), "logistic", {}),
            ("cod_rna", os.path.join(data, "cod_rna", "train.vw"), "logistic", {})]
    print("| set | loss | rows with N | N differs, -l 3 vs 0.5 | N differs, -l 10 vs 0.5 |")
    print("|---|---|---:|---:|---:|")
    for name, path, loss, multiclass in sets:
        if not os.path.exists(path):
            print(f"| {name} | {loss} | (no file {path}) | | |")
            continue
        lines = open(path, "rb").read().splitlines()[:100_000]
        columns = []
        for eta in (0.5, 3.0, 10.0):
            learner = Learner("gd", loss=loss, bits=18, eta=eta, **multiclass)
            learner.learn(lines)
            columns.append(learner.model.state[:, 2].copy())
        print(f"| {name} | {loss} | {int((columns[0] > 0).sum())} | {int((columns[0] != columns[1]).sum())} | "
              f"{int((columns[0] != columns[2]).sum())} |", flush=True)


if __name__ == "__main__":
    main()
