"""Start-up against VW and the Python + NumPy floor, side by side in one run.

    python -m benchmarks.startup_vs_vw [--runs 7] [--lines 2000] [--files 100] [--loop-lines 200]
                                       [--data DIR] [--skip-jit] [--installed VENV]

Cases, each a process started as a user starts it (this interpreter), measured by
``benchmarks.harness`` (wall, CPU from wait4, peak RSS, load average):

- floor: ``python -c "import numpy"``;
- VW: ``python -m vowpalwabbit -d FILE --quiet`` (vowpalwabbit 9.11.9, its default learner);
- olcli AOT: ``olcli train FILE --quiet`` with ``OLCLI_KERNELS=aot`` (the kernels compiled
  ahead of time, olcli/aot; the run must not import Numba: checked with ``-X importtime``);
- olcli JIT: the same with ``OLCLI_KERNELS=jit`` (Numba's JIT, warm on-disk cache);
- first run after install: both olcli modes with an empty Numba cache (``NUMBA_CACHE_DIR`` a
  new folder): what a fresh install's first command costs (the JIT compiles, AOT must not);
- with ``--installed VENV`` (a fresh virtual environment where ``pip install .`` of a clean
  clone ran, nothing warmed): the issue's commands (the README's train and test,
  ``--ftrl --loss hinge -q ab``, ``--oaa 26``, ``--ngram 2``, libsvm input, ``olcli vw`` lines,
  ``olcli serve`` until it answers a line) run twice each in that venv, in the default mode,
  with an empty Numba cache: the first run against the second, and whether Numba was imported.

FILE is the first ``--lines`` lines of a9a (``a9a/train.vw`` of the data folder: ``--data``,
``OLCLI_BENCH_DATA`` or the harness's default). The small-file loop: ``--files`` files of
``--loop-lines`` lines (consecutive slices of a9a's train and test sets), one process each, run
one after the other, for the floor, VW and the olcli modes, the loops interleaved (``--loop-runs``
each).
Medians (min-max) over ``--runs``, cases interleaved with a rotating first. Writes
benchmarks/results/``--out``.md and .json.
"""

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time

from benchmarks import harness
from benchmarks.harness import OLCLI, PY, VW

ROOT = harness.ROOT


def slices(a9a: str, folder: str, files: int, lines: int) -> list:
    """``files`` files of ``lines`` lines each, from a9a's train then test set (folder ``a9a``)."""
    source = []
    for name in ("train.vw", "test.vw"):
        with open(os.path.join(a9a, name), "rb") as f:
            source.extend(f.readlines())
    paths = []
    for k in range(files):
        chunk = source[(k * lines) % max(1, len(source) - lines):][:lines]
        path = os.path.join(folder, f"part{lines}-{k:03d}.vw")
        with open(path, "wb") as f:
            f.writelines(chunk)
        paths.append(path)
    return paths


def imports_numba(command, env=None) -> bool:
    return "numba" in harness.imported_modules(command, env=env)


def installed_cases(venv: str, work: str) -> list:
    """(name, argv) of the issue's first-run commands, in ``venv`` (paths in ``work``)."""
    olcli = os.path.join(venv, "bin", "olcli")
    sample = os.path.join(ROOT, "sample_data")
    model = os.path.join(work, "a9a.olm")
    train, test = os.path.join(sample, "a9a_train.vw"), os.path.join(sample, "a9a_test.vw")
    return [
        ("README: olcli train a9a --loss logistic -f a9a.olm", [olcli, "train", train, "--loss", "logistic", "-f", model]),
        ("README: olcli test a9a -i a9a.olm", [olcli, "test", test, "-i", model]),
        ("train --ftrl --loss hinge -q ab", [olcli, "train", train, "--ftrl", "--loss", "hinge", "-q", "ab"]),
        ("train letter --oaa 26", [olcli, "train", os.path.join(sample, "letter_train.vw"), "--oaa", "26"]),
        ("train --ngram 2", [olcli, "train", train, "--ngram", "2"]),
        ("train libsvm input", [olcli, "train", os.path.join(sample, "a9a_train.libsvm")]),
        ("olcli vw -d a9a --l2 1e-6 --loss_function logistic",
         [olcli, "vw", "-d", train, "--l2", "1e-6", "--loss_function", "logistic"]),
        ("olcli vw -d letter --oaa 26 -q ff", [olcli, "vw", "-d", os.path.join(sample, "letter_train.vw"),
                                               "--oaa", "26", "-q", "ff"]),
        ("olcli serve -i a9a.olm, until it answers a line", ["serve", olcli, model]),
    ]


def serve_until_answered(olcli: str, model: str, work: str, env: dict) -> harness.Measured:
    """Start ``olcli serve -i model --port 0`` (a :class:`harness.Running`) and time it until one
    line is answered: the Measured of the server, its wall the time to that answer."""
    port_file = os.path.join(work, "serve.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    server = harness.Running([olcli, "serve", "-i", model, "--port", "0", "--port-file", port_file], env=env,
                             stderr=subprocess.PIPE)
    try:
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if server.poll() is not None:
                raise SystemExit(f"olcli serve stopped: {server.communicate()[1].decode(errors='replace')[-800:]}")
            time.sleep(0.005)
        with socket.create_connection(("127.0.0.1", int(open(port_file).read())), timeout=60) as s:
            s.sendall(b"|a x\n")
            reply = b""
            while not reply.endswith(b"\n"):
                reply += s.recv(4096)
        wall = time.perf_counter() - server.started
    finally:
        server.send_signal(15)
        error = server.communicate(timeout=60)[1]
    server.measured.wall, server.measured.stderr = wall, error.decode(errors="replace")
    return server.measured


def first_runs_installed(venv: str) -> list:
    """Each of ``installed_cases`` twice in ``venv`` (the default kernel mode, an empty Numba
    cache): rows of name, first and second wall seconds, Numba imported by the first run."""
    work = tempfile.mkdtemp(prefix="installed-")
    rows = []
    try:
        env = harness.python_env(NUMBA_CACHE_DIR=os.path.join(work, "numba-cache"))
        for name, argv in installed_cases(venv, work):
            runs = []
            for _ in range(2):
                if argv[0] == "serve":
                    runs.append(serve_until_answered(argv[1], argv[2], work, env))
                else:
                    runs.append(harness.measure(argv, env=env, cwd=work))
            python = os.path.join(venv, "bin", "python")
            probe = ([python, "-m", "olcli", "serve", "--help"] if argv[0] == "serve"
                     else [python, "-m", "olcli", *argv[1:]])
            numba = imports_numba(probe, env)
            rows.append({"name": name, "first": runs[0].wall, "second": runs[1].wall,
                         "numba": None if argv[0] == "serve" else numba,
                         "notice": "compiling" in runs[0].output + runs[0].stderr})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def summary(values) -> str:
    return harness.fmt(harness.stats(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=2000, help="lines of a9a in the start-up case")
    parser.add_argument("--files", type=int, default=100, help="files in the small-file loop (0: no loop)")
    parser.add_argument("--loop-lines", type=int, default=None,
                        help="lines of each file of the loop (default: --lines)")
    parser.add_argument("--loop-runs", type=int, default=1)
    parser.add_argument("--out", default="startup_vs_vw")
    parser.add_argument("--skip-jit", action="store_true",
                        help="leave out the JIT's cases (their warm-up compiles every kernel the run needs)")
    parser.add_argument("--installed", metavar="VENV",
                        help="a fresh venv where `pip install .` of a clean clone ran: first runs there")
    args = harness.arguments(__doc__.split("\n\n")[0], runs=7, parser=parser)
    loop_lines = args.loop_lines or args.lines
    a9a = os.path.join(args.data, "a9a")
    harness.require([os.path.join(a9a, "train.vw"), os.path.join(a9a, "test.vw")])
    results = harness.Results(args.out, "Start-up against VW and the Python + NumPy floor")
    installed = first_runs_installed(args.installed) if args.installed else []

    folder = tempfile.mkdtemp(prefix="startup-vs-vw-")
    try:
        first = slices(a9a, folder, 1, args.lines)[0]
        paths = slices(a9a, folder, args.files, loop_lines)
        aot, jit = harness.python_env(OLCLI_KERNELS="aot"), harness.python_env(OLCLI_KERNELS="jit")
        commands = {
            "python -c \"import numpy\" (floor)": ([PY, "-c", "import numpy"], harness.python_env()),
            "VW (python -m vowpalwabbit)": ([*VW, "-d", first, "--quiet"], harness.python_env()),
            "olcli AOT (OLCLI_KERNELS=aot)": ([*OLCLI, "train", first, "--quiet"], aot),
            "olcli JIT (OLCLI_KERNELS=jit, warm cache)": ([*OLCLI, "train", first, "--quiet"], jit),
        }
        if args.skip_jit:
            commands.popitem()
        # the warm-up run of each case fills the file cache (and the JIT's kernel cache)
        runs = harness.interleaved({name: (lambda c=c: harness.measure(c[0], env=c[1]))
                                    for name, c in commands.items()}, args.runs)
        names = list(commands)

        first_runs = {}
        for mode in ("aot",) if args.skip_jit else ("aot", "jit"):
            cache = tempfile.mkdtemp(prefix="empty-numba-cache-", dir=folder)
            env = harness.python_env(OLCLI_KERNELS=mode, NUMBA_CACHE_DIR=cache)
            one = harness.measure([*OLCLI, "train", first, "--quiet"], env=env)
            two = harness.measure([*OLCLI, "train", first, "--quiet"], env=env)
            first_runs[mode] = {"first": one, "second": two, "compiled notice": "compiling" in one.output}

        loop_commands = {"python -c \"import numpy\" (floor)": ([PY, "-c", "import numpy"], harness.python_env()),
                         "VW": ([*VW, "--quiet", "-d"], harness.python_env()),
                         "olcli AOT": ([*OLCLI, "train", "--quiet"], aot),
                         "olcli JIT": ([*OLCLI, "train", "--quiet"], jit)}
        if args.skip_jit:
            loop_commands.popitem()

        def loop(command, env):
            started, cpu, rss, loads = time.perf_counter(), 0.0, 0.0, []
            for path in paths:
                one = harness.measure([*command, path], env=env)
                cpu, rss = cpu + one.cpu, max(rss, one.rss)
                loads.append(one.load)
            return harness.Measured(command, time.perf_counter() - started, cpu, rss, sum(loads) / len(loads), 0, "")

        loops = harness.interleaved({name: (lambda c=c: loop(*c)) for name, c in loop_commands.items()},
                                    args.loop_runs, warm_up=False) if paths else {}
        numba_in_aot = imports_numba([*OLCLI, "train", first, "--quiet"], aot)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    say = results.say
    floor = harness.median_of(runs[names[0]], "wall")
    vw_wall = harness.median_of(runs[names[1]], "wall")
    vw_cpu = harness.median_of(runs[names[1]], "cpu")
    floor_cpu = harness.median_of(runs[names[0]], "cpu")
    vw_rss = harness.median_of(runs[names[1]], "rss")
    say(f"Medians (min-max) of {args.runs} interleaved runs; data: {args.data}.")
    say()
    say(f"## {args.lines} lines of a9a, default learner (olcli train FILE --quiet; VW -d FILE --quiet)")
    say()
    rows = []
    for name in names:
        wall, cpu, rss = (harness.median_of(runs[name], key) for key in ("wall", "cpu", "rss"))
        rows.append([name, summary([r.wall for r in runs[name]]), summary([r.cpu for r in runs[name]]),
                     summary([r.rss for r in runs[name]]), f"{wall / vw_wall:.2f}", f"{wall / floor:.2f}",
                     f"{cpu / vw_cpu:.2f}", f"{cpu / floor_cpu:.2f}", f"{rss / vw_rss:.2f}"])
    results.table(["process", "wall s", "CPU s", "peak RSS MB", "wall / VW", "wall / floor", "CPU / VW",
                   "CPU / floor", "RSS / VW"], rows, "llllrrrrr")
    say()
    say(f"The AOT run imports Numba: {'yes' if numba_in_aot else 'no'} (`-X importtime`).")
    say()
    say("## First run after install (empty Numba cache), then the second run")
    say()
    results.table(["olcli mode", "first run wall s", "second run wall s", "first / second",
                   "compile notice on stderr"],
                  [[mode, f"{row['first'].wall:.3f}", f"{row['second'].wall:.3f}",
                    f"{row['first'].wall / row['second'].wall:.2f}", "yes" if row["compiled notice"] else "no"]
                   for mode, row in first_runs.items()], "lllrl")
    if installed:
        say()
        say(f"## First runs in a fresh venv after `pip install .` ({args.installed}; no warm step)")
        say()
        say("Default kernel mode, empty Numba cache; each command run twice.")
        say()
        results.table(["command", "first run wall s", "second run wall s", "first / second", "compile notice",
                       "Numba imported"],
                      [[row["name"], f"{row['first']:.3f}", f"{row['second']:.3f}",
                        f"{row['first'] / row['second']:.2f}", "yes" if row["notice"] else "no",
                        "–" if row["numba"] is None else "yes" if row["numba"] else "no"] for row in installed],
                      "lllrll")
    if loops:
        vw_loop = harness.median_of(loops["VW"], "wall")
        vw_loop_cpu = harness.median_of(loops["VW"], "cpu")
        say()
        say(f"## Small-file loop: {args.files} files of {loop_lines} lines, one process each")
        say()
        floor_name = next(iter(loops))
        floor_loop = harness.median_of(loops[floor_name], "wall")
        floor_loop_cpu = harness.median_of(loops[floor_name], "cpu")
        say("The floor's process is given each file's path as an argument it does not read.")
        say()
        results.table(["tool", "total wall s", "total CPU s", "wall / VW", "CPU / VW", "wall / floor", "CPU / floor",
                       "load"],
                      [[name, summary([r.wall for r in rows_]), summary([r.cpu for r in rows_]),
                        f"{harness.median_of(rows_, 'wall') / vw_loop:.2f}",
                        f"{harness.median_of(rows_, 'cpu') / vw_loop_cpu:.2f}",
                        f"{harness.median_of(rows_, 'wall') / floor_loop:.2f}",
                        f"{harness.median_of(rows_, 'cpu') / floor_loop_cpu:.2f}",
                        f"{harness.median_of(rows_, 'load'):.1f}"] for name, rows_ in loops.items()], "lllrrrrr")
    results.data = {"args": vars(args),
                    "cases": {name: [r.numbers() for r in rows_] for name, rows_ in runs.items()},
                    "first_runs": {k: {"first": v["first"].wall, "second": v["second"].wall,
                                       "notice": v["compiled notice"]} for k, v in first_runs.items()},
                    "loops": {name: [r.numbers() for r in rows_] for name, rows_ in loops.items()},
                    "aot_imports_numba": numba_in_aot, "installed": installed}
    print(f"wrote {results.write()}")


if __name__ == "__main__":
    main()
