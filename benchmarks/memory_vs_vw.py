"""Peak memory of olcli and VW side by side (issue 26): the same data, the same -b.

    python -m benchmarks.memory_vs_vw [--data DIR] [--work DIR] [--bits 18,24,26,28]
                                      [--click-lines 1000000] [--skip-click] [--aot-dir DIR]
                                      [--python PATH] [--kernels jit,aot] [--algorithms mix,gd,...]

Each run is one process started the way a user starts it (``python -m olcli train``,
``python -m vowpalwabbit`` for VW 9.11.9) and measured by ``benchmarks.harness``: its peak
resident set size is the process's own high-water mark (VmHWM, sampled; wait4's ru_maxrss
when it ended first). The data come from the harness's data folder (``--data``,
``OLCLI_BENCH_DATA``), the click log from ``olcli.datagen`` (``--work``). olcli runs once per kernel
path (``--kernels``): Numba's JIT (``OLCLI_KERNELS=jit``) and, when a build of these very sources
exists (``python -m olcli.aot.build [--output-dir DIR]``), the ahead-of-time kernels
(``OLCLI_KERNELS=aot``, ``OLCLI_AOT_DIR``). ``--python PATH`` runs olcli with another
interpreter (another install, e.g. a ``pip install .`` venv whose AOT kernels match its own
sources); VW always runs with this one. olcli's processes start in ``--work`` so that a checkout
in the current folder does not shadow that install. Runs:

1. 2,000 lines of a9a (train.vw) at each -b: VW's default, olcli's default (--mix)
   and every single algorithm, each writing its model (-f / VW's -f);
2. the click log (``olcli.datagen``'s click generator, 1M lines): VW's default
   and olcli's default at each -b (to the end, model written), every single
   algorithm at -b 24; then the -b 28 model loaded and saved in one process
   (olcli.load, Learner.save), wall and CPU seconds.

Results: Markdown tables on stdout and in benchmarks/results/``--out``.md (harness.Results).
"""

import argparse
import json
import os

from benchmarks import harness
from benchmarks.harness import PY

ALGORITHMS = ["mix", "gd", "coin", "scinol2", "scinol1", "sgd", "adagrad", "adagrad-dual", "ftrl"]


def peak(result: harness.Measured):
    """(peak RSS in MB, seconds, exit code) of one measured process; a failure is printed."""
    if result.returncode != 0:
        print(f"# exit {result.returncode}: {' '.join(result.command)}\n# {result.output.strip()[-400:]}")
    return result.rss, result.wall, result.returncode


OLCLI_PY = PY      # the interpreter olcli runs with (--python)
WORK = os.getcwd()  # where olcli's processes start (--work)


def olcli_train(data, bits, algorithm, model, env=None):
    args = ["train", data, "-b", bits, "-f", model, "--quiet"]
    if algorithm != "mix":
        args.append(f"--{algorithm}")
    return peak(harness.measure([OLCLI_PY, "-m", "olcli", *map(str, args)], env=env, cwd=WORK, check=False))


def kernel_paths(aot_dir, wanted=("jit", "aot")):
    """[(label, environment)]: the JIT, and the AOT build when it is there and not stale
    (those of ``wanted``)."""
    jit = harness.python_env(OLCLI_KERNELS="jit")
    aot = harness.python_env(OLCLI_KERNELS="aot", **({"OLCLI_AOT_DIR": aot_dir} if aot_dir else {}))
    paths = [("JIT", jit)] if "jit" in wanted else []
    if "aot" in wanted:
        why = harness.measure([OLCLI_PY, "-c", "from olcli import aot; from olcli.kernel_stamp import engine_stamp; "
                               "print(aot.available(engine_stamp()) or '')"],
                              env=dict(aot, OLCLI_KERNELS="jit"), cwd=WORK, separate_stderr=True).output.strip()
        if why:
            print(f"(AOT kernels not measured: {why})\n")
        else:
            paths.append(("AOT", aot))
    if not paths:
        raise SystemExit("no kernel path to measure (--kernels)")
    return paths


def olcli_install() -> str:
    """Which olcli runs: the interpreter, the package's folder and version."""
    found = harness.measure([OLCLI_PY, "-c", "import os, olcli; print(os.path.dirname(olcli.__file__), olcli.__version__)"],
                            cwd=WORK, separate_stderr=True).output.strip()
    return f"olcli: `{OLCLI_PY}`, {found}"


def vw_train(data, bits, model):
    return peak(harness.run_vw(["-d", data, "-b", bits, "-f", model, "--quiet"], check=False))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", default="18,24,26,28")
    parser.add_argument("--click-lines", type=int, default=1_000_000)
    parser.add_argument("--aot-dir", help="the AOT build to measure (default: olcli's own)")
    parser.add_argument("--skip-click", action="store_true")
    parser.add_argument("--algorithms", default=",".join(ALGORITHMS), help="comma-separated (mix: the default)")
    parser.add_argument("--out", default="memory_vs_vw")
    parser.add_argument("--python", default=PY, help="the interpreter olcli runs with (default: this one)")
    parser.add_argument("--kernels", default="jit,aot", help="kernel paths to measure: jit, aot or both")
    args = harness.arguments(parser.description, runs=1, parser=parser)
    global OLCLI_PY, WORK
    OLCLI_PY, WORK = args.python, os.path.abspath(args.work)
    args.work = WORK
    algorithms = args.algorithms.split(",")
    results = harness.Results(args.out, "Peak memory of olcli and VW side by side: the same data, the same -b")
    print = results.say  # noqa: A001 (every line of the tables goes to the results file too)
    bits = [int(b) for b in args.bits.split(",")]

    harness.require([harness.shared_file(args.data, "a9a")])
    a9a = harness.head(harness.shared_file(args.data, "a9a"), 2000, os.path.join(args.work, "a9a_2000.vw"))
    model = os.path.join(args.work, "memory.model")
    paths = kernel_paths(args.aot_dir, args.kernels.split(","))
    print(olcli_install() + f"; VW: `{PY} -m vowpalwabbit`; kernel paths: {', '.join(p[0] for p in paths)}\n")
    # warm-up: compile/load every kernel once (the Numba cache), so that no row measures a compilation
    for _, env in paths:
        for algorithm in algorithms:
            olcli_train(a9a, 18, algorithm, model, env)

    rows = {"VW (default)": [vw_train(a9a, b, model + ".vw")[0] for b in bits]}
    for label, env in paths:
        for algorithm in algorithms:
            name = ("olcli (default, --mix)" if algorithm == "mix" else f"olcli --{algorithm}") + f", {label}"
            rows[name] = [olcli_train(a9a, b, algorithm, model, env)[0] for b in bits]

    print("## Peak RSS (MB), 2,000 lines of a9a, by -b\n")
    print("| learner | " + " | ".join(f"-b {b}" for b in bits) + f" | growth -b {bits[0]} to -b {bits[-1]} |")
    print("|---|" + "---:|" * (len(bits) + 1))
    for name, values in rows.items():
        print(f"| {name} | " + " | ".join(f"{v:.0f}" for v in values) + f" | {values[-1] - values[0]:+.0f} |")

    if args.skip_click:
        results.write(extra_json=False)
        return
    click = harness.click_log(args.work, args.click_lines)
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
    if 24 in bits:
        print(f"\n## Peak RSS (MB), the click log, every algorithm at -b 24 (VW's default: {vw[bits.index(24)][0]:.0f})\n")
        print("| learner | " + " | ".join(label for label, _ in paths) + " |")
        print("|---|" + "---:|" * len(paths))
        for algorithm in [a for a in algorithms if a != "mix"]:
            cells = [olcli_train(click, 24, algorithm, model + ".alg", env) for _, env in paths]
            print(f"| olcli --{algorithm} | " + " | ".join(f"{c[0]:.0f} ({c[0] / vw[bits.index(24)][0]:.2f} x)"
                                                             for c in cells) + " |")
    top = bits[-1]
    timing = save_and_load(f"{model}{top}", paths[-1][1])
    sizes = ", ".join(f"-b {b} {os.path.getsize(f'{model}{b}') / 1e6:.1f} MB" for b in bits
                      if os.path.exists(f"{model}{b}"))
    print(f"\nmodel files: {sizes}; the -b {top} model in one process ({paths[-1][0]}), median of 3: "
          f"load {timing['load']:.2f} s wall / {timing['load_cpu']:.2f} s CPU, "
          f"save {timing['save']:.2f} s wall / {timing['save_cpu']:.2f} s CPU; load average {os.getloadavg()[0]:.1f}")
    results.write(extra_json=False)


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
    return json.loads(harness.measure([OLCLI_PY, "-c", code, path], env=env, cwd=WORK, separate_stderr=True).output)


if __name__ == "__main__":
    main()
