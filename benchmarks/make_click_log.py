"""A synthetic click log in VW format: 10 namespaces of heavy-tailed categorical values.

    python benchmarks/make_click_log.py OUT.vw [--lines 1000000] [--seed 7]

Each line: a -1/+1 click label and one categorical feature in each of 10 namespaces
(a..j), ``1 |a a=17 |b b=3 ...``; with the constant that is 11 features. Values are
Zipf-distributed (a few very common, a long tail of rare ones, like ad ids or
sites), and the click probability is a logistic function of hidden per-value
effects, so there is something to learn. Fixed seed: the same file every time.
"""

import argparse

import numpy as np

NAMESPACES = "abcdefghij"
CARDINALITY = [10, 50, 200, 1_000, 5_000, 20_000, 100_000, 500_000, 1_000_000, 2_000_000]


def generate(path: str, lines: int, seed: int, block: int = 200_000) -> None:
    rng = np.random.default_rng(seed)
    effects = [rng.normal(scale=0.6, size=cardinality) for cardinality in CARDINALITY]
    with open(path, "w") as out:
        for start in range(0, lines, block):
            n = min(block, lines - start)
            values = [np.minimum(rng.zipf(1.3, size=n), cardinality) - 1 for cardinality in CARDINALITY]
            margin = sum(effect[v] for effect, v in zip(effects, values)) - 1.5
            labels = np.where(rng.random(n) < 1 / (1 + np.exp(-margin)), 1, -1)
            columns = [labels.astype(str)] + [np.char.add(f" |{ns} {ns}=", v.astype(str))
                                              for ns, v in zip(NAMESPACES, values)]
            text = columns[0]
            for column in columns[1:]:
                text = np.char.add(text, column)
            out.write("\n".join(text.tolist()) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    generate(args.out, args.lines, args.seed)


if __name__ == "__main__":
    main()
