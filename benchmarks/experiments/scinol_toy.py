"""Reproduce the toy experiment of Kempka, Kotłowski & Warmuth 2019, §4.1, with olcli's engine.

21 features x_i ~ N(0, sigma_i), sigma_i = 2**(i - 11), i = 1..21 (scales 2**-10 .. 2**10);
labels y ~ Bernoulli(sigmoid(x.u)) as -1/+1 with u_i = +-1/sigma_i (random signs);
5,000 training and 100,000 test examples; 10 repetitions. Every algorithm learns
online with the logistic loss and no bias (the paper's model is x.u); the average
test logistic loss is measured every 50 iterations. SGD (eta/sqrt(t)) and AdaGrad
run over the paper's learning-rate grid, ScInOL1 and ScInOL2 untuned (epsilon = 1).

    python -m benchmarks.experiments.scinol_toy [--repetitions 10] [--out benchmarks/results]

prints a markdown table of the final mean test loss (with the Bayes-optimal and
zero-vector losses) and, when matplotlib is installed (pip install ".[plot]"),
writes the learning curves to OUT/scinol_toy.png.
"""

import argparse
import math
import os
import sys
import time

import numpy as np

from benchmarks.harness import RESULTS
from olcli.engine.records import Batch, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.learner import Learner

N_FEATURES = 21
BITS = 5  # 2**5 rows >= 21 features: feature i is row i; the constant row is never used
N_TRAIN = 5_000
N_TEST = 100_000
EVERY = 50
RATES = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]


def make_data(rng):
    sigma = 2.0 ** (np.arange(1, N_FEATURES + 1) - 11)
    u = rng.choice([-1.0, 1.0], size=N_FEATURES) / sigma

    def draw(n):
        x = rng.normal(size=(n, N_FEATURES)) * sigma
        y = np.where(rng.random(n) < 1.0 / (1.0 + np.exp(-(x @ u))), 1.0, -1.0)
        return x, y

    return draw(N_TRAIN), draw(N_TEST), u


def logistic_loss(margins):
    return np.mean(np.logaddexp(0.0, -margins))


def learning_curve(name, params, train, test):
    """Test loss of the weights after every EVERY training examples (olcli's kernels,
    through the Learner's one kernel door, ``Learner.process``)."""
    x, y = train
    x_test, y_test = test
    learner = Learner(name, loss="logistic", bits=BITS, **params)
    tally = new_tally()
    index = np.tile(np.arange(N_FEATURES, dtype=np.int32), EVERY)
    row_ptr = np.arange(0, EVERY * N_FEATURES + 1, N_FEATURES, dtype=np.int64)
    ones, zeros = np.ones(EVERY), np.zeros(EVERY)
    checkpoints = []
    for start in range(0, len(y), EVERY):
        batch = Batch(y[start:start + EVERY], ones, zeros, row_ptr, index, x[start:start + EVERY].ravel(),
                      np.diff(row_ptr))
        learner.process(batch, True, tally)
        w = learner.weights()[:N_FEATURES]
        with np.errstate(over="ignore", invalid="ignore"):
            loss = logistic_loss(y_test * (x_test @ w))
        checkpoints.append(loss if np.isfinite(loss) else np.inf)
    return np.array(checkpoints)


def configurations():
    yield "ScInOL2", "scinol2", {"epsilon": 1.0}
    yield "ScInOL1", "scinol1", {"epsilon": 1.0}
    for rate in RATES:
        yield f"AdaGrad eta={rate:g}", "adagrad", {**ALGORITHMS["adagrad"].defaults, "eta": rate}
    for rate in RATES:
        yield f"SGD eta={rate:g}", "sgd", {"eta": rate}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--seed", type=int, default=2019)
    parser.add_argument("--out", default=RESULTS)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    curves = {label: [] for label, _, _ in configurations()}
    bayes, zero = [], []
    started = time.perf_counter()
    for _ in range(args.repetitions):
        train, test, u = make_data(rng)
        bayes.append(logistic_loss(test[1] * (test[0] @ u)))
        zero.append(math.log(2.0))
        for label, name, params in configurations():
            curves[label].append(learning_curve(name, params, train, test))
    elapsed = time.perf_counter() - started

    print(f"ScInOL toy experiment (§4.1): {args.repetitions} repetitions, {N_TRAIN} training and "
          f"{N_TEST} test examples, {elapsed:.0f} s\n")
    print("| algorithm | mean test logistic loss after 5,000 examples | std | worst test loss along the way |")
    print("|---|---:|---:|---:|")
    print(f"| Bayes-optimal (u) | {np.mean(bayes):.4f} | {np.std(bayes):.4f} | |")
    print(f"| zero vector | {np.mean(zero):.4f} | | |")
    for label, runs in curves.items():
        final = np.array([run[-1] for run in runs])
        worst = max(float(np.max(run)) for run in runs)
        print(f"| {label} | {_fmt(np.mean(final))} | {_fmt(np.std(final))} | {_fmt(worst)} |")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib is not installed: pip install '.[plot]' for the learning-curve plot)", file=sys.stderr)
        return
    os.makedirs(args.out, exist_ok=True)
    steps = np.arange(1, N_TRAIN // EVERY + 1) * EVERY
    figure, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, log_scale in zip(axes, (True, False)):
        for label, runs in curves.items():
            mean = np.mean(np.array(runs), axis=0)
            style = {"ScInOL2": ("tab:red", 2.5), "ScInOL1": ("tab:orange", 2.5)}.get(label)
            color, width = style if style else (("tab:blue" if label.startswith("AdaGrad") else "tab:green"), 0.8)
            ax.plot(steps, mean, color=color, linewidth=width, label=label if style or "=0.1" in label else None)
        ax.axhline(np.mean(bayes), color="black", linestyle="--", linewidth=1)
        ax.axhline(np.mean(zero), color="black", linestyle="--", linewidth=1)
        ax.set_xlabel("training examples")
        ax.set_ylabel("mean test logistic loss")
        if log_scale:
            ax.set_yscale("log")
            ax.set_title("all learning rates (blue AdaGrad, green SGD)")
        else:
            ax.set_ylim(np.mean(bayes) - 0.05, np.mean(zero) + 0.05)
            ax.set_title("between Bayes-optimal and zero vector (dashed)")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    path = os.path.join(args.out, "scinol_toy.png")
    figure.savefig(path, dpi=110)
    print(f"\nlearning curves: {path}", file=sys.stderr)


def _fmt(x):
    return "inf" if not np.isfinite(x) else (f"{x:.4f}" if x < 1e4 else f"{x:.3g}")


if __name__ == "__main__":
    main()
