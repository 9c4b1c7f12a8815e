"""Peak memory of olcli and VW side by side (issue 26): the same data, the same -b.

    python -m benchmarks.memory_vs_vw [--data DIR] [--work DIR] [--bits 18,24,26,28]
                                      [--click-lines 1000000] [--skip-click] [--aot-dir DIR]

Each run is one process started the way a user starts it (``olcli train`` from the
venv, ``python -m vowpalwabbit`` for VW 9.11.9), its peak resident set size taken
from the kernel (wait4's ru_maxrss of that child alone). olcli runs once per kernel
path: Numba's JIT (``OLCLI_KERNELS=jit``) and, when a build of these very sources
exists (``python -m olcli.aot.build [--output-dir DIR]``), the ahead-of-time kernels
(``OLCLI_KERNELS=aot``, ``OLCLI_AOT_DIR``). Runs:

1. 2,000 lines of a9a (train.vw) at each -b: VW's default, olcli's default (--mix)
   and every single algorithm, each writing its model (-f / VW's -f);
2. the click log (benchmarks/make_click_log.py's generator, 1M lines): VW's default
   and olcli's default at each -b (to the end, model written), every single
   algorithm at -b 24; then the -b 28 model loaded and saved in one process
   (olcli.load, Learner.save), wall and CPU seconds.

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
from benchmarks.setup_data import generated  # noqa: E402

VENV = os.path.dirname(sys.executable)
OLCLI = os.path.join(VENV, "olcli")
ALGORITHMS = ["mix", "gd", "coin", "scinol2", "scinol1", "sgd", "adagrad", "adagrad-dual", "ftrl"]


def peak(command, out=subprocess.DEVNULL, env=None):
    """(peak RSS in MB, seconds, exit code) of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - started
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"# exit {code}: {' '.join(command)}\n# {err.strip()[-400:]}", file=sys.stderr)
    return usage.ru_maxrss / 1024.0, elapsed, code


def olcli_train(data, bits, algorithm, model, env=None):
    command = [OLCLI, "train", data, "-b", str(bits), "-f", model, "--quiet"]
    if algorithm != "mix":
        command.append(f"--{algorithm}")
    return peak(command, env=env)


def kernel_paths(aot_dir):
    """[(label, environment)]: the JIT, and the AOT build when it is there and not stale."""
    jit = dict(os.environ, OLCLI_KERNELS="jit")
    aot = dict(os.environ, OLCLI_KERNELS="aot", **({"OLCLI_AOT_DIR": aot_dir} if aot_dir else {}))
    why = subprocess.run([sys.executable, "-c", "from olcli import aot; from olcli.engine.jit import engine_stamp; "
                          "print(aot.available(engine_stamp()) or '')"],
                         env=dict(aot, OLCLI_KERNELS="jit"), capture_output=True, text=True).stdout.strip()
    if why:
        print(f"(AOT kernels not measured: {why})\n")
        return [("JIT", jit)]
    return [("JIT", jit), ("AOT", aot)]


def vw_train(data, bits, model):
    return peak([sys.executable, "-m", "vowpalwabbit", "-d", data, "-b", str(bits), "-f", model, "--quiet"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    parser.add_argument("--bits", default="18,24,26,28")
    parser.add_argument("--click-lines", type=int, default=1_000_000)
    parser.add_argument("--aot-dir", help="the AOT build to measure (default: olcli's own)")
    parser.add_argument("--skip-click", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    bits = [int(b) for b in args.bits.split(",")]

    a9a = os.path.join(args.work, "a9a_2000.vw")
    with open(os.path.join(args.data, "a9a", "train.vw")) as source, open(a9a, "w") as out:
        for _, line in zip(range(2000), source):
            out.write(line)
    model = os.path.join(args.work, "memory.model")
    paths = kernel_paths(args.aot_dir)
    # warm-up: compile/load every kernel once (the Numba cache), so that no row measures a compilation
    for _, env in paths:
        for algorithm in ALGORITHMS:
            olcli_train(a9a, 18, algorithm, model, env)

    rows = {"VW (default)": [vw_train(a9a, b, model + ".vw")[0] for b in bits]}
    for label, env in paths:
        for algorithm in ALGORITHMS:
            name = ("olcli (default, --mix)" if algorithm == "mix" else f"olcli --{algorithm}") + f", {label}"
            rows[name] = [olcli_train(a9a, b, algorithm, model, env)[0] for b in bits]

    print("## Peak RSS (MB), 2,000 lines of a9a, by -b\n")
    print("| learner | " + " | ".join(f"-b {b}" for b in bits) + f" | growth -b {bits[0]} to -b {bits[-1]} |")
    print("|---|" + "---:|" * (len(bits) + 1))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in values) + f" | {values[-1] - values[0]:+.0f} |")
    sys.stdout.flush()

    if args.skip_click:
        return
    click = generated(args, "click", args.click_lines, f"clicks_{args.click_lines // 1_000_000}m.vw")
    runs = {"VW (default)": [vw_train(click, b, model + ".vw") for b in bits]}
    for label, env in paths:
        runs[f"olcli (default, --mix), {label}"] = [olcli_train(click, b, "mix", f"{model}{b}", env) for b in bits]
    print(f"\n## Peak RSS (MB), the click log ({args.click_lines:,} lines), by -b; ratio to VW at the same -b\n")
    print("| learner | " + " | ".join(f"-b {b}" for b in bits) + " | wall s (each -b) |")
    print("|---|" + "---:|" * (len(bits) + 1))
    vw = runs["VW (default)"]
    for name, values in runs.items():
        cells = [f"{v[0]:.0f}" + ("" if name.startswith("VW") else f" ({v[0] / w[0]:.2f} x)")
                 + ("" if v[2] == 0 else f" exit {v[2]}") for v, w in zip(values, vw)]
        print(f"| {name} | " + " | ".join(cells) + " | " + " / ".join(f"{v[1]:.0f}" for v in values) + " |")
    sys.stdout.flush()
    if 24 in bits:
        print(f"\n## Peak RSS (MB), the click log, every algorithm at -b 24 (VW's default: {vw[bits.index(24)][0]:.0f})\n")
        print("| learner | " + " | ".join(label for label, _ in paths) + " |")
        print("|---|" + "---:|" * len(paths))
        for algorithm in ALGORITHMS[1:]:
            cells = [olcli_train(click, 24, algorithm, model + ".alg", env) for _, env in paths]
            print(f"| olcli --{algorithm} | " + " | ".join(f"{c[0]:.0f} ({c[0] / vw[bits.index(24)][0]:.2f} x)"
                                                             for c in cells) + " |", flush=True)
    top = bits[-1]
    timing = save_and_load(f"{model}{top}", paths[-1][1])
    sizes = ", ".join(f"-b {b} {os.path.getsize(f'{model}{b}') / 1e6:.1f} MB" for b in bits
                      if os.path.exists(f"{model}{b}"))
    print(f"\nmodel files: {sizes}; the -b {top} model in one process ({paths[-1][0]}), median of 3: "
          f"load {timing['load']:.2f} s wall / {timing['load_cpu']:.2f} s CPU, "
          f"save {timing['save']:.2f} s wall / {timing['save_cpu']:.2f} s CPU; load average {os.getloadavg()[0]:.1f}")


def save_and_load(path, env=None):
    """Wall and CPU seconds to load (olcli.load: read, checks, table) and save (Learner.save)
    a model, in a fresh process (median of 3)."""
    code = ("import json, statistics, sys, time, olcli\n"
            "got = {'load': [], 'save': [], 'load_cpu': [], 'save_cpu': []}\n"
            "def timed(name, call):\n"
            "    w, c = time.perf_counter(), time.process_time(); out = call()\n"
            "    got[name].append(time.perf_counter() - w); got[name + '_cpu'].append(time.process_time() - c)\n"
            "    return out\n"
            "for _ in range(3):\n"
            "    learner = timed('load', lambda: olcli.load(sys.argv[1]))\n"
            "    timed('save', lambda: learner.save(sys.argv[1] + '.again'))\n"
            "    del learner\n"
            "print(json.dumps({k: statistics.median(v) for k, v in got.items()}))\n")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)

if __name__ == "__main__":
    main()
