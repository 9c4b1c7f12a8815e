"""Start-up in instructions: olcli, VW and the Python + NumPy floor counted by Valgrind, side by side.

    python -m benchmarks.startup_instructions [--runs 3] [--lines 2000] [--tree DIR ...] [--data DIR]

On a shared machine the wall and CPU seconds of a 0.3 s process move with the other work (at
load 10 they are 2-4 times the quiet values, and two versions of olcli cannot be told apart);
the number of instructions a process executes does not. Each case runs under
``valgrind --tool=cachegrind --cache-sim=no`` (``I refs``: user-space instructions of the
process and its threads), with ``PYTHONHASHSEED=0``; medians (min-max) of ``--runs``:

- floor: ``python -c "import numpy"``;
- VW: ``python -m vowpalwabbit -d FILE --quiet``;
- olcli: ``python -m olcli train FILE --quiet`` (the installed or checked-out olcli; with
  ``--tree DIR``, one case per source tree DIR, run from DIR with ``PYTHONPATH=DIR``: two
  versions side by side; a tree without its own AOT build finds one through ``OLCLI_AOT_DIR``
  in the environment, which the cases inherit).

FILE is the first ``--lines`` lines of a9a (the harness's data folder). Instructions are not
time: a start-up's page faults and dynamic linking cost time per instruction that computing
does not, so the ratio to the floor in instructions is larger than in seconds; it is the
steadier figure for comparing versions. Writes benchmarks/results/``--out``.md and .json.
Needs ``valgrind`` (each case takes 10-30 s under it).
"""

import argparse
import os
import re
import shutil
import statistics
import tempfile

from benchmarks import harness
from benchmarks.harness import OLCLI, PY, VW


def instructions(command, env, cwd=None) -> int:
    """The ``I refs`` count of one process under cachegrind."""
    done = harness.measure(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                            *command], env=env, cwd=cwd, separate_stderr=True)
    found = re.search(r"I\s+refs:\s+([0-9,]+)", done.stderr)
    if not found:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1).replace(",", ""))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--tree", action="append", default=[], metavar="DIR",
                        help="an olcli source tree to count (repeatable; default: the olcli this Python imports)")
    parser.add_argument("--out", default="startup_instructions")
    args = harness.arguments(__doc__.split("\n\n")[0], runs=3, parser=parser)
    if not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed")
    source = harness.shared_file(args.data, "a9a")
    harness.require([source])
    folder = tempfile.mkdtemp(prefix="startup-instructions-")
    try:
        path = harness.head(source, args.lines, os.path.join(folder, "a9a.vw"))
        env = harness.python_env(PYTHONHASHSEED=0)
        cases = {"python -c \"import numpy\" (floor)": ([PY, "-c", "import numpy"], env, None),
                 "VW (python -m vowpalwabbit)": ([*VW, "-d", path, "--quiet"], env, None)}
        for tree in args.tree or [None]:
            name = f"olcli train ({tree})" if tree else "olcli train"
            cases[name] = ([*OLCLI, "train", path, "--quiet"],
                           harness.python_env(env, PYTHONPATH=tree) if tree else env, tree)
        counts = {name: [] for name in cases}
        results = harness.Results(args.out, "Start-up in instructions: olcli, VW and the Python + NumPy floor")
        for run in range(args.runs):
            for name, (command, case_env, cwd) in cases.items():
                counts[name].append(instructions(command, case_env, cwd))
                print(f"run {run + 1} {name}: {counts[name][-1]:,}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    names = list(cases)
    floor, vw = (statistics.median(counts[name]) for name in names[:2])
    results.say(f"{args.lines} lines of a9a, default learner; instructions (valgrind cachegrind `I refs`), "
                f"medians (min-max) of {args.runs} runs, PYTHONHASHSEED=0.")
    results.say()
    results.table(["process", "instructions (millions)", "/ floor", "/ VW"],
                  [[name, harness.fmt(harness.stats(c / 1e6 for c in counts[name]), 1),
                    f"{statistics.median(counts[name]) / floor:.2f}", f"{statistics.median(counts[name]) / vw:.2f}"]
                   for name in names], "llrr")
    results.data = {"args": vars(args), "instructions": counts}
    print(f"wrote {results.write()}")


if __name__ == "__main__":
    main()
