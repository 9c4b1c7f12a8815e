"""Start-up against VW and the Python + NumPy floor (issue 25), side by side in one run.

    python benchmarks/startup_vs_vw.py [--runs 7] [--files 100] [--lines 2000] [--out NAME]

Cases, each a process started as a user starts it (``/work/venv``'s interpreter):

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

FILE is the first ``--lines`` lines of a9a (``/work/shared/data/a9a/train.vw``). The
small-file loop: ``--files`` files of ``--lines`` lines (consecutive slices of a9a's
train and test sets), one process each, run one after the other, for VW and both olcli
modes, the loops interleaved. Wall seconds, CPU seconds and peak RSS (ru_maxrss) from
wait4; medians (min-max) over ``--runs``, cases interleaved with a rotating first.
Writes benchmarks/results/``--out``.md and .json. The processes run without
PYTHONDONTWRITEBYTECODE (``env_with``): Python modules load from .pyc files, as installed.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PY = sys.executable
OLCLI = [PY, "-m", "olcli"]
A9A = "/work/shared/data/a9a"


def measure(command, env=None) -> dict:
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    error = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.stderr.close()
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed ({status}): {error.decode(errors='replace')[-800:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "stderr": error.decode(errors="replace")}


def env_with(**changes) -> dict:
    """The environment of a user's process: PYTHONDONTWRITEBYTECODE (set in this machine's
    sessions) is dropped, so that olcli's modules load from their .pyc files as in an
    installed copy (pip writes them) instead of being compiled from source on every run."""
    env = dict(os.environ)
    env.pop("OLCLI_KERNELS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


def slices(folder: str, files: int, lines: int) -> list:
    """``files`` files of ``lines`` lines each, from a9a's train then test set."""
    source = []
    for name in ("train.vw", "test.vw"):
        with open(os.path.join(A9A, name), "rb") as f:
            source.extend(f.readlines())
    paths = []
    for k in range(files):
        chunk = source[(k * lines) % max(1, len(source) - lines):][:lines]
        path = os.path.join(folder, f"part{k:03d}.vw")
        with open(path, "wb") as f:
            f.writelines(chunk)
        paths.append(path)
    return paths


def imports_numba(path: str) -> bool:
    probe = subprocess.run([PY, "-X", "importtime", "-m", "olcli", "train", path, "--quiet"],
                           env=env_with(OLCLI_KERNELS="aot"), capture_output=True, text=True)
    return any(line.rstrip().endswith("| numba") or line.rstrip().endswith("|   numba")
               for line in probe.stderr.splitlines())


def installed_cases(venv: str, work: str) -> list:
    """(name, argv) of the issue's first-run commands, in ``venv`` (paths in ``work``)."""
    olcli = os.path.join(venv, "bin", "olcli")
    sample = os.path.join(os.path.dirname(HERE), "sample_data")
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


def serve_until_answered(olcli: str, model: str, work: str, env: dict) -> dict:
    """Start ``olcli serve -i model --port 0`` and time it until one line is answered."""
    import socket

    port_file = os.path.join(work, "serve.port")
    if os.path.exists(port_file):
        os.remove(port_file)
    start = time.perf_counter()
    process = subprocess.Popen([olcli, "serve", "-i", model, "--port", "0", "--port-file", port_file], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if process.poll() is not None:
                raise SystemExit(f"olcli serve stopped: {process.stderr.read().decode(errors='replace')[-800:]}")
            time.sleep(0.005)
        with socket.create_connection(("127.0.0.1", int(open(port_file).read())), timeout=60) as s:
            s.sendall(b"|a x\n")
            reply = b""
            while not reply.endswith(b"\n"):
                reply += s.recv(4096)
        wall = time.perf_counter() - start
    finally:
        process.terminate()
        error = process.communicate(timeout=60)[1]
    return {"wall": wall, "stderr": error.decode(errors="replace")}


def first_runs_installed(venv: str) -> list:
    """Each of ``installed_cases`` twice in ``venv`` (the default kernel mode, an empty Numba
    cache): rows of name, first and second wall seconds, Numba imported by the first run."""
    work = tempfile.mkdtemp(prefix="installed-")
    rows = []
    try:
        env = env_with(NUMBA_CACHE_DIR=os.path.join(work, "numba-cache"))
        for name, argv in installed_cases(venv, work):
            runs = []
            for _ in range(2):
                if argv[0] == "serve":
                    runs.append(serve_until_answered(argv[1], argv[2], work, env))
                else:
                    runs.append(measure(argv, env))
            probe = (["-X", "importtime", "-m", "olcli", "serve", "--help"] if argv[0] == "serve"
                     else ["-X", "importtime", "-m", "olcli", *argv[1:]])
            done = subprocess.run([os.path.join(venv, "bin", "python"), *probe], env=env, capture_output=True,
                                  text=True, cwd=work)
            numba = any(line.rstrip().endswith("| numba") or line.rstrip().endswith("|   numba")
                        for line in done.stderr.splitlines())
            rows.append({"name": name, "first": runs[0]["wall"], "second": runs[1]["wall"],
                         "numba": None if argv[0] == "serve" else numba,
                         "notice": "compiling" in runs[0]["stderr"]})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def summary(values) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--loop-runs", type=int, default=1)
    parser.add_argument("--out", default="startup_vs_vw")
    parser.add_argument("--skip-jit", action="store_true",
                        help="leave out the JIT's cases (their warm-up compiles every kernel the run needs)")
    parser.add_argument("--installed", metavar="VENV",
                        help="a fresh venv where `pip install .` of a clean clone ran: first runs there")
    args = parser.parse_args()
    installed = first_runs_installed(args.installed) if args.installed else []

    folder = tempfile.mkdtemp(prefix="startup-vs-vw-")
    try:
        paths = slices(folder, max(1, args.files), args.lines)
        first = paths[0]
        cases = {
            "python -c \"import numpy\" (floor)": ([PY, "-c", "import numpy"], env_with()),
            "VW (python -m vowpalwabbit)": ([PY, "-m", "vowpalwabbit", "-d", first, "--quiet"], env_with()),
            "olcli AOT (OLCLI_KERNELS=aot)": (OLCLI + ["train", first, "--quiet"], env_with(OLCLI_KERNELS="aot")),
            "olcli JIT (OLCLI_KERNELS=jit, warm cache)": (OLCLI + ["train", first, "--quiet"],
                                                          env_with(OLCLI_KERNELS="jit")),
        }
        if args.skip_jit:
            cases.pop("olcli JIT (OLCLI_KERNELS=jit, warm cache)")
        for command, env in cases.values():  # warm the file cache (and the JIT's kernel cache)
            measure(command, env)
        started_load = os.getloadavg()[0]
        results = {name: [] for name in cases}
        names = list(cases)
        for run in range(args.runs):
            order = names[run % len(names):] + names[:run % len(names)]
            for name in order:
                results[name].append(measure(*cases[name]))

        first_runs = {}
        for mode in ("aot",) if args.skip_jit else ("aot", "jit"):
            cache = tempfile.mkdtemp(prefix="empty-numba-cache-", dir=folder)
            env = env_with(OLCLI_KERNELS=mode, NUMBA_CACHE_DIR=cache)
            one = measure(OLCLI + ["train", first, "--quiet"], env)
            two = measure(OLCLI + ["train", first, "--quiet"], env)
            first_runs[mode] = {"first": one, "second": two,
                                "compiled notice": "compiling" in one["stderr"]}

        loops = {"VW": [], "olcli AOT": []} if args.skip_jit else {"VW": [], "olcli AOT": [], "olcli JIT": []}
        loop_commands = {
            "VW": (lambda p: [PY, "-m", "vowpalwabbit", "-d", p, "--quiet"], env_with()),
            "olcli AOT": (lambda p: OLCLI + ["train", p, "--quiet"], env_with(OLCLI_KERNELS="aot")),
            "olcli JIT": (lambda p: OLCLI + ["train", p, "--quiet"], env_with(OLCLI_KERNELS="jit")),
        }
        for run in range(args.loop_runs):
            for name in (list(loops)[run % len(loops):] + list(loops)[:run % len(loops)]):
                make, env = loop_commands[name]
                started = time.perf_counter()
                cpu = 0.0
                for path in paths:
                    cpu += measure(make(path), env)["cpu"]
                loops[name].append({"wall": time.perf_counter() - started, "cpu": cpu})
        ended_load = os.getloadavg()[0]
        numba_in_aot = imports_numba(first)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    floor = statistics.median(r["wall"] for r in results[names[0]])
    vw_wall = statistics.median(r["wall"] for r in results[names[1]])
    vw_rss = statistics.median(r["rss"] for r in results[names[1]])
    lines = [f"# Start-up against VW and the Python + NumPy floor (issue 25)", "",
             f"`python benchmarks/startup_vs_vw.py --runs {args.runs} --files {args.files} --lines {args.lines}`; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Machine: {os.cpu_count()} cores, shared; "
             f"load average (1 min) {started_load:.1f} at the start, {ended_load:.1f} at the end. "
             f"Python {sys.version.split()[0]}. Medians (min-max) of {args.runs} interleaved runs.", "",
             f"## {args.lines} lines of a9a, default learner (olcli train FILE --quiet; VW -d FILE --quiet)", "",
             "| process | wall s | CPU s | peak RSS MB | wall / VW | wall / floor | RSS / VW |",
             "|---|---|---|---|---:|---:|---:|"]
    for name in names:
        rows = results[name]
        wall = statistics.median(r["wall"] for r in rows)
        rss = statistics.median(r["rss"] for r in rows)
        lines.append(f"| {name} | {summary([r['wall'] for r in rows])} | {summary([r['cpu'] for r in rows])} | "
                     f"{summary([r['rss'] for r in rows])} | {wall / vw_wall:.2f} | {wall / floor:.2f} | "
                     f"{rss / vw_rss:.2f} |")
    lines += ["", f"The AOT run imports Numba: {'yes' if numba_in_aot else 'no'} (`-X importtime`).", "",
              "## First run after install (empty Numba cache), then the second run", "",
              "| olcli mode | first run wall s | second run wall s | first / second | compile notice on stderr |",
              "|---|---|---|---:|---|"]
    for mode, row in first_runs.items():
        lines.append(f"| {mode} | {row['first']['wall']:.3f} | {row['second']['wall']:.3f} | "
                     f"{row['first']['wall'] / row['second']['wall']:.2f} | "
                     f"{'yes' if row['compiled notice'] else 'no'} |")
    if installed:
        lines += ["", f"## First runs in a fresh venv after `pip install .` ({args.installed}; no warm step)", "",
                  "Default kernel mode, empty Numba cache; each command run twice.", "",
                  "| command | first run wall s | second run wall s | first / second | compile notice | "
                  "Numba imported |", "|---|---|---|---:|---|---|"]
        for row in installed:
            numba = "–" if row["numba"] is None else "yes" if row["numba"] else "no"
            lines.append(f"| {row['name']} | {row['first']:.3f} | {row['second']:.3f} | "
                         f"{row['first'] / row['second']:.2f} | {'yes' if row['notice'] else 'no'} | {numba} |")
    vw_loop = statistics.median(r["wall"] for r in loops["VW"])
    lines += ["", f"## Small-file loop: {args.files} files of {args.lines} lines, one process each", "",
              "| tool | total wall s | total CPU s | wall / VW |", "|---|---|---|---:|"]
    for name, rows in loops.items():
        wall = statistics.median(r["wall"] for r in rows)
        lines.append(f"| {name} | {summary([r['wall'] for r in rows])} | {summary([r['cpu'] for r in rows])} | "
                     f"{wall / vw_loop:.2f} |")
    text = "\n".join(lines) + "\n"
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, args.out + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(RESULTS, args.out + ".json"), "w") as f:
        json.dump({"args": vars(args), "cases": {k: [{m: v for m, v in r.items() if m != "stderr"} for r in rows]
                                                 for k, rows in results.items()},
                   "first_runs": {k: {"first": v["first"]["wall"], "second": v["second"]["wall"],
                                      "notice": v["compiled notice"]} for k, v in first_runs.items()},
                   "loops": loops, "aot_imports_numba": numba_in_aot, "installed": installed}, f, indent=1)
    print(text)


if __name__ == "__main__":
    main()
