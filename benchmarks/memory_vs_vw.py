"""Peak memory of olcli and VW side by side (issue 26): the same data, the same -b.

    python benchmarks/memory_vs_vw.py [--data DIR] [--work DIR] [--bits 18,24,26,28]
                                      [--click-lines 1000000] [--skip-click]

Each run is one process started the way a user starts it (``olcli train`` from the
venv, ``python -m vowpalwabbit`` for VW 9.11.9), its peak resident set size taken
from the kernel (wait4's ru_maxrss of that child alone). Runs:

1. 2,000 lines of a9a (train.vw) at each -b: VW's default, olcli's default (--mix)
   and every single algorithm, each writing its model (-f / VW's -f);
2. the click log (benchmarks/make_click_log.py's generator, 1M lines) at -b 24:
   VW's default against olcli's default, and olcli's default at -b 28 to the end,
   then the -b 28 model loaded and saved in one process (olcli.load, Learner.save).

Results: a Markdown table on stdout (benchmarks/results/memory_vs_vw.md keeps one).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from setup_data import generated  # noqa: E402

VENV = os.path.dirname(sys.executable)
OLCLI = os.path.join(VENV, "olcli")
ALGORITHMS = ["mix", "gd", "coin", "scinol2", "scinol1", "sgd", "adagrad", "adagrad-dual", "ftrl"]


def peak(command, out=subprocess.DEVNULL):
    """(peak RSS in MB, seconds, exit code) of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"# exit {code}: {' '.join(command)}\n# {err.strip()[-400:]}", file=sys.stderr)
    return usage.ru_maxrss / 1024.0, elapsed, code


def olcli_train(data, bits, algorithm, model, report=None):
    command = [OLCLI, "train", data, "-b", str(bits), "-f", model, "--quiet"]
    if algorithm != "mix":
        command.append(f"--{algorithm}")
    if report:
        command += ["--report", report]
    return peak(command)


def vw_train(data, bits, model):
    return peak([sys.executable, "-m", "vowpalwabbit", "-d", data, "-b", str(bits), "-f", model, "--quiet"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    parser.add_argument("--bits", default="18,24,26,28")
    parser.add_argument("--click-lines", type=int, default=1_000_000)
    parser.add_argument("--skip-click", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    bits = [int(b) for b in args.bits.split(",")]

    a9a = os.path.join(args.work, "a9a_2000.vw")
    with open(os.path.join(args.data, "a9a", "train.vw")) as source, open(a9a, "w") as out:
        for _, line in zip(range(2000), source):
            out.write(line)
    model = os.path.join(args.work, "memory.model")
    # warm-up: compile/load every kernel once (the Numba cache), so that no row measures a compilation
    for algorithm in ALGORITHMS:
        olcli_train(a9a, 18, algorithm, model)

    rows = {}
    rows["VW (default)"] = [vw_train(a9a, b, model + ".vw")[0] for b in bits]
    for algorithm in ALGORITHMS:
        name = "olcli (default, --mix)" if algorithm == "mix" else f"olcli --{algorithm}"
        rows[name] = [olcli_train(a9a, b, algorithm, model)[0] for b in bits]

    print("## Peak RSS (MB), 2,000 lines of a9a, by -b\n")
    print("| learner | " + " | ".join(f"-b {b}" for b in bits) + f" | growth -b {bits[0]} to -b {bits[-1]} |")
    print("|---|" + "---:|" * (len(bits) + 1))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in values) + f" | {values[-1] - values[0]:+.0f} |")

    if args.skip_click:
        return
    click = generated(args, "click", args.click_lines, f"clicks_{args.click_lines // 1_000_000}m.vw")
    vw24 = vw_train(click, 24, model + ".vw")
    ol24 = olcli_train(click, 24, "mix", model)
    ol28 = olcli_train(click, 28, "mix", model + "28")
    timing = save_and_load(model + "28")
    print(f"\n## The click log ({args.click_lines:,} lines), default learners\n")
    print("| run | peak RSS MB | wall s | ratio to VW -b 24 |")
    print("|---|---:|---:|---:|")
    print(f"| VW -b 24 | {vw24[0]:.0f} | {vw24[1]:.1f} | 1.00 |")
    print(f"| olcli -b 24 | {ol24[0]:.0f} | {ol24[1]:.1f} | {ol24[0] / vw24[0]:.2f} |")
    print(f"| olcli -b 28 (exit {ol28[2]}) | {ol28[0]:.0f} | {ol28[1]:.1f} | {ol28[0] / vw24[0]:.2f} |")
    print(f"\nmodel files: -b 24 {os.path.getsize(model) / 1e6:.1f} MB, -b 28 "
          f"{os.path.getsize(model + '28') / 1e6:.1f} MB; the -b 28 model in one process: "
          f"load {timing['load']:.2f} s, save {timing['save']:.2f} s (median of 3)")


def save_and_load(path):
    """Seconds to load (olcli.load: read, checks, table) and save (Learner.save) a model, in a fresh process."""
    code = ("import json, statistics, sys, time, olcli\n"
            "loads, saves = [], []\n"
            "for _ in range(3):\n"
            "    t = time.perf_counter(); learner = olcli.load(sys.argv[1]); loads.append(time.perf_counter() - t)\n"
            "    t = time.perf_counter(); learner.save(sys.argv[1] + '.again'); saves.append(time.perf_counter() - t)\n"
            "    del learner\n"
            "print(json.dumps({'load': statistics.median(loads), 'save': statistics.median(saves)}))\n")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)

if __name__ == "__main__":
    main()
