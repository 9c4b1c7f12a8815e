"""Every olcli algorithm untuned, and the default, against VW's untuned learners, same run.

    pip install ".[bench]" && python -m benchmarks.defaults_vs_vw [DATA_DIR] [--scale F] [--out FILE]
        [--only TEXT ...] [--no-cases]

DATA_DIR defaults to ../shared/data beside the repo. Writes benchmarks/results/defaults_vs_vw.md
(issue 14: "a default that is never worse than VW's best untuned learner").

Part 1, the sets: every dataset of DATA_DIR's README (6 binary with the logistic loss, 2
regression with the squared loss, 2 multiclass with --oaa K and the logistic loss) and every
kind of olcli.datagen (click and text: binary; regression; multiclass: --oaa 10). Single pass,
-b 18, no option but the loss (and --oaa K). For every olcli algorithm at its defaults
(``olcli train FILE --ALGO ...``, a subprocess each, progressive loss from the JSON report) and
for VW 9.11.9's default learner, --coin and --ftrl (through its Python API, full precision;
benchmarks/vw_learners_vs_vw.vw_loss): the progressive loss (multiclass: the 0/1 error, as VW
--oaa reports it) and, where the set has a test split, the loss of the final model on it
(``olcli test``, VW ``-t -i``). The generated sets are written with ``--lines`` = their full size
times --scale (default 0.25: click 250,000 lines, text, regression and multiclass 50,000), to keep
the whole script near 30 minutes on the 2-core machine; the real sets are used whole.

The default's targets, checked per set: progressive loss <= 1.02 x min(VW default, VW --coin),
and strictly below VW default on >= 80% of the sets. The same two counts are given for every
olcli algorithm, so the choice of the default can be read from the table. Wall time and CPU
time (the subprocess's user + system, from wait4) of every olcli run are recorded; the
cost target compares the default's wall time with the fastest single learner's on each set
(they run one after the other in the same loop, so the machine's load is shared; the load
average is printed with the results).

Part 2, VW's own test cases (skip with --no-cases): every test of vw_tests/core.vwtest.json
whose command trains VW's default learner untuned on one data file (no -t/-i, no option that
selects or tunes a learner: -l, --power_t, --initial_t, --adaptive, --normalized, --invariant,
--l1, --l2, --sgd, --ftrl, --coin, ...), and whose options olcli's ``train`` reads (it takes
VW's spellings): the command is run as ``olcli train`` with the default algorithm (and, for
comparison, --gd and --adagrad), in this process, output files (-f, -p, --readable_model,
--invert_hash, --cache_file) and cache flags (-c, -k: olcli's cache would be written beside
the data) dropped. The loss is compared with the reference loss in the
test's stderr file (``average loss = X``, holdout loss when VW printed "h"). A command olcli
refuses (exit code 2: an option or input it does not have) is listed as such and not counted.
Target: the default's loss <= 1.02 x the reference on >= 90% of the cases olcli can run (a
reference of 0 counts as met when olcli's loss is <= 1e-6).
"""

import argparse
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import DATA, run_olcli, vw_progressive_loss
from benchmarks.vw_learners_vs_vw import vw_loss  # VW's progressive loss, full precision
from olcli.engine.registry import ALGORITHMS, DEFAULT_ALGORITHM

HERE = os.path.dirname(os.path.abspath(__file__))

RESULTS = os.path.join(HERE, "results", "defaults_vs_vw.md")
VW_LEARNERS = {"VW default": "", "VW --coin": "--coin", "VW --ftrl": "--ftrl"}
# Issue 29's next bar: VW's default learner with the best -l of this grid, chosen in hindsight
# on each set (the least progressive loss; its test loss is that -l's).
VW_GRID = (0.03, 0.1, 0.3, 0.5, 1, 3, 10)
LOGISTIC = ("--loss logistic", "--loss_function logistic")

# name -> (kind, train, test or None, olcli flags, VW flags); "@kind" = olcli.datagen output
SETS = {
    "a9a": ("binary", "a9a/train.vw", "a9a/test.vw", *LOGISTIC),
    "w8a": ("binary", "w8a/train.shuf42.vw", "w8a/test.shuf42.vw", *LOGISTIC),
    "cod_rna": ("binary", "cod_rna/train.shuf42.vw", None, *LOGISTIC),
    "covtype": ("binary", "covtype_binary_20k/train.vw", None, *LOGISTIC),
    "phishing": ("binary", "phishing_libsvm/train.vw", None, *LOGISTIC),
    "sst2": ("binary", "sst2/train.vw", "sst2/test.vw", *LOGISTIC),
    "gen click": ("binary", "@click", None, *LOGISTIC),
    "gen text": ("binary", "@text", None, *LOGISTIC),
    "california_housing": ("regression", "california_housing/data.shuf42.vw", None, "", ""),
    "msd_year": ("regression", "msd_year_cs190/data.shuf42.vw", None, "", ""),
    "gen regression": ("regression", "@regression", None, "", ""),
    "letter": ("multiclass", "letter/train.vw", "letter/test.vw", "--oaa 26 --loss logistic",
               "--oaa 26 --loss_function logistic"),
    "news20": ("multiclass", "news20_bydate/train.vw", "news20_bydate/test.vw", "--oaa 20 --loss logistic",
               "--oaa 20 --loss_function logistic"),
    "gen multiclass": ("multiclass", "@multiclass", None, "--oaa 10 --loss logistic",
                       "--oaa 10 --loss_function logistic"),
}
FULL_LINES = {"click": 1_000_000, "text": 200_000, "regression": 200_000, "multiclass": 200_000}


# ---------------------------------------------------------------------------
# Part 1: the sets

def generate(kind, scale, tmp):
    path = os.path.join(tmp, f"{kind}.vw")
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "olcli.datagen", kind, "--lines", str(int(FULL_LINES[kind] * scale)),
                        "-o", path], check=True)
    return path


def olcli_run(train, test, algorithm, flags, tmp):
    """(progressive loss, test loss or None, wall s, CPU s) of ``olcli train`` (and ``olcli test``)."""
    model, report = os.path.join(tmp, "m.olm"), os.path.join(tmp, "r.json")
    done = run_olcli(["train", train, f"--{algorithm}", "-b", "18", *shlex.split(flags), "--quiet"]
                     + (["-f", model] if test else []), report=report)
    test_loss = run_olcli(["test", test, "-i", model, "--quiet"], report=report).summary["loss"] if test else None
    return done.summary["loss"], test_loss, done.wall, done.cpu


def vw_run(train, test, flags, tmp):
    """(progressive loss, test loss or None) of VW through its Python API."""
    if not test:
        return vw_loss(train, flags), None
    model = os.path.join(tmp, "vw.model")
    progressive = vw_loss(train, f"{flags} -f {shlex.quote(model)}")
    loss = re.search(r"--loss_function \S+", flags)   # not kept in VW's model: without it -t reports squared loss
    test_loss = vw_progressive_loss(f"-d {shlex.quote(test)} -t -i {shlex.quote(model)} --quiet "
                                    f"{loss.group(0) if loss else ''}")
    return progressive, test_loss


def run_sets(data, scale, only, tmp, algorithms=None):
    rows = []
    algorithms = algorithms or list(ALGORITHMS)
    for name, (kind, train, test, olcli_flags, vw_flags) in SETS.items():
        if only and not any(text in name for text in only):
            continue
        train = generate(train[1:], scale, tmp) if train.startswith("@") else os.path.join(data, train)
        test = test and os.path.join(data, test)
        row = dict(name=name, kind=kind, test=bool(test), olcli={}, vw={})
        for algorithm in algorithms:
            row["olcli"][algorithm] = olcli_run(train, test, algorithm, olcli_flags, tmp)
        for label, flags in VW_LEARNERS.items():
            row["vw"][label] = vw_run(train, test, f"{vw_flags} {flags}", tmp)
        grid = {rate: vw_run(train, test, f"{vw_flags} -l {rate}", tmp) for rate in VW_GRID}
        rate = min(grid, key=lambda r: grid[r][0])
        row["tuned"] = (rate, grid[rate], {r: v[0] for r, v in grid.items()})
        rows.append(row)
        shown = ", ".join(f"{a} {v[0]:.4g}" for a, v in row["olcli"].items())
        print(f"{name}: {shown}; " + ", ".join(f"{k} {v[0]:.4g}" for k, v in row["vw"].items())
              + f"; tuned VW -l {rate} {grid[rate][0]:.4g}", file=sys.stderr, flush=True)
    return rows


def cost_runs(data, scale, only, repeats, tmp):
    """Wall and CPU time only: every algorithm once to warm Numba's cache (discarded, so
    that a kernel compiled because an engine file changed is not timed), then ``repeats``
    rounds in which every algorithm runs once, interleaved; the minimum of each."""
    out = []
    for name, (kind, train, _, olcli_flags, _) in SETS.items():
        if only and not any(text in name for text in only):
            continue
        train = generate(train[1:], scale, tmp) if train.startswith("@") else os.path.join(data, train)
        for algorithm in ALGORITHMS:
            olcli_run(train, None, algorithm, olcli_flags, tmp)
        times = {a: [] for a in ALGORITHMS}
        for _ in range(repeats):
            for algorithm in ALGORITHMS:
                times[algorithm].append(olcli_run(train, None, algorithm, olcli_flags, tmp)[2:])
        best = {a: (min(t[0] for t in v), min(t[1] for t in v)) for a, v in times.items()}
        out.append((name, best))
        print(f"{name}: " + ", ".join(f"{a} {w:.2f}s ({c:.2f})" for a, (w, c) in best.items()), file=sys.stderr,
              flush=True)
    return out


def cost_report(rows, default, repeats):
    singles = [a for a in ALGORITHMS if a != "mix"]
    out = [f"### Cost, warmed and repeated: min of {repeats} interleaved runs, wall s (CPU s)", "",
           "| set | " + " | ".join(ALGORITHMS) + " | default / fastest single: wall | CPU |",
           "|---|" + "---:|" * (len(ALGORITHMS) + 2)]
    for name, best in rows:
        wall = best[default][0] / min(best[a][0] for a in singles)
        cpu = best[default][1] / min(best[a][1] for a in singles)
        out.append(f"| {name} | " + " | ".join(f"{w:.2f} ({c:.2f})" for w, c in best.values())
                   + f" | {wall:.2f} | {cpu:.2f} |")
    return out


def targets(rows, algorithm):
    """(sets within 1.02 x min(VW default, coin), sets strictly below VW default, sets)."""
    within = sum(r["olcli"][algorithm][0] <= 1.02 * min(r["vw"]["VW default"][0], r["vw"]["VW --coin"][0])
                 for r in rows)
    below = sum(r["olcli"][algorithm][0] < r["vw"]["VW default"][0] for r in rows)
    return within, below, len(rows)


def _cell(x):
    return "—" if x is None else f"{x:.4f}" if abs(x) < 100 else f"{x:.5g}"


def tuned_report(rows, default):
    """The default against VW's default learner tuned in hindsight over VW_GRID (issue 29)."""
    out = ["### The default against VW tuned in hindsight (progressive loss)", "",
           f"VW's default learner with each -l of {', '.join(map(str, VW_GRID))}; the best per set.", "",
           "| set | kind | olcli default | VW default | VW --coin | tuned VW (-l) | default / min(VW default, coin) "
           "| default / tuned VW |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mine = r["olcli"][default][0]
        rate, (tuned, _), _ = r["tuned"]
        best = min(r["vw"]["VW default"][0], r["vw"]["VW --coin"][0])
        out.append(f"| {r['name']} | {r['kind']} | {_cell(mine)} | {_cell(r['vw']['VW default'][0])} | "
                   f"{_cell(r['vw']['VW --coin'][0])} | {_cell(tuned)} ({rate:g}) | {mine / best:.4f} | "
                   f"{mine / tuned:.4f} |")
    scored = [r for r in rows if r["kind"] != "multiclass"]
    met = sum(r["olcli"][default][0] <= 1.05 * r["tuned"][1][0] for r in scored)
    within = sum(r["olcli"][default][0] <= 1.02 * min(r["vw"]["VW default"][0], r["vw"]["VW --coin"][0])
                 for r in rows)
    out += ["", f"Default <= 1.02 x min(VW default, VW --coin): {within} of {len(rows)} sets; "
            f"default <= 1.05 x tuned VW (binary and regression sets): {met} of {len(scored)}.", "",
            "Every -l of the grid (progressive loss):", "",
            "| set | " + " | ".join(f"-l {g:g}" for g in VW_GRID) + " |", "|---|" + "---:|" * len(VW_GRID)]
    for r in rows:
        out.append(f"| {r['name']} | " + " | ".join(_cell(r["tuned"][2][g]) for g in VW_GRID) + " |")
    return out + [""]


def sets_report(rows, default):
    out = []
    algorithms = list(rows[0]["olcli"]) if rows else list(ALGORITHMS)
    for part, index in (("Progressive loss", 0), ("Test loss (final model on the test split)", 1)):
        shown = [r for r in rows if index == 0 or r["test"]]
        if not shown:
            continue
        out += [f"### {part}", "", "| set | kind | " + " | ".join(f"olcli {a}" for a in algorithms) + " | "
                + " | ".join(VW_LEARNERS) + " | default / min(VW default, coin) | default < VW default |",
                "|---|---|" + "---:|" * (len(algorithms) + len(VW_LEARNERS) + 2)]
        for r in shown:
            mine = r["olcli"][default][index]
            best = min(r["vw"]["VW default"][index], r["vw"]["VW --coin"][index])
            out.append(f"| {r['name']} | {r['kind']} | "
                       + " | ".join(("**" + _cell(r["olcli"][a][index]) + "**") if a == default
                                    else _cell(r["olcli"][a][index]) for a in algorithms) + " | "
                       + " | ".join(_cell(v[index]) for v in r["vw"].values())
                       + f" | {mine / best:.4f} | {'yes' if mine < r['vw']['VW default'][index] else 'no'} |")
        out.append("")
    out += ["### The targets, per olcli algorithm (progressive loss)", "",
            "| algorithm | sets <= 1.02 x min(VW default, coin) | sets < VW default | both targets |",
            "|---|---:|---:|---|"]
    for a in algorithms:
        kinds = []
        for kind in ("binary", "regression", "multiclass"):
            part = [r for r in rows if r["kind"] == kind]
            if part:
                w, b, n = targets(part, a)
                kinds.append(f"{kind} {w}/{n}, {b}/{n}")
        w, b, n = targets(rows, a)
        met = w == n and b >= 0.8 * n
        out.append(f"| {a}{' (default)' if a == default else ''} | {w}/{n} | {b}/{n} | "
                   f"{'met' if met else 'missed'} ({'; '.join(kinds)}) |")
    out += ["", "### Cost: wall time and CPU time of every olcli run (s)", "",
            "| set | " + " | ".join(algorithms) + " | default / fastest single wall |",
            "|---|" + "---:|" * (len(algorithms) + 1)]
    singles = [a for a in algorithms if a != "mix"]
    for r in rows:
        fastest = min((r["olcli"][a][2] for a in singles), default=None)
        out.append(f"| {r['name']} | " + " | ".join(f"{r['olcli'][a][2]:.2f} ({r['olcli'][a][3]:.2f})"
                                                   for a in algorithms)
                   + (f" | {r['olcli'][default][2] / fastest:.2f} |" if fastest else " | — |"))
    return out


# ---------------------------------------------------------------------------
# Part 2: VW's test cases

KNOBS = {"-l", "--learning_rate", "--power_t", "--initial_t", "--adaptive", "--normalized", "--invariant", "--l1",
         "--l2", "--sgd", "--ftrl", "--coin", "--pistol", "--freegrad", "--ftrl_alpha", "--ftrl_beta", "--bfgs",
         "--conjugate_gradient", "--decay_learning_rate"}
READ = {"-d", "--data", "-k", "--kill_cache", "-c", "--cache", "-f", "--final_regressor", "-b", "--bit_precision",
        "--loss_function", "--quantile_tau", "-q", "--quadratic", "--interactions", "--noconstant", "--passes",
        "--holdout_off", "--quiet", "--progress", "-P", "-p", "--predictions", "--readable_model", "--invert_hash",
        "--cubic", "--ignore", "--keep", "--ignore_linear", "--oaa", "--hash_seed", "--ngram", "--skips",
        "--holdout_period", "--cache_file", "--permutations", "--leave_duplicate_interactions", "--hash",
        "--early_terminate", "-C", "--constant", "--holdout_after", "--min_prediction", "--max_prediction"}
OUTPUTS = {"-f", "--final_regressor", "-p", "--predictions", "--readable_model", "--invert_hash", "--cache_file"}
CACHE = {"-c", "--cache", "-k", "--kill_cache"}   # dropped: olcli -c would write a cache beside the data


def vw_cases(vw_tests):
    """(id, command tokens, reference loss, holdout) of the untuned default-learner cases."""
    cases = []
    for test in json.load(open(os.path.join(vw_tests, "core.vwtest.json"))):
        tokens = shlex.split(test.get("vw_command", ""))
        if not tokens:  # a test of another tool (no VW command)
            continue
        options = {t.split("=")[0] for t in tokens if t.startswith("-") and not re.fullmatch(r"-?[0-9.]+", t)}
        if options & {"-t", "--testonly", "-i", "--initial_regressor"} or options & KNOBS or options - READ:
            continue
        stderr = test.get("diff_files", {}).get("stderr")
        if not stderr or not os.path.exists(os.path.join(vw_tests, stderr)):
            continue
        found = re.search(r"average loss = ([-0-9.e+]+)( h)?", open(os.path.join(vw_tests, stderr)).read())
        if not found:  # no loss printed (or "n.a.": no labeled example)
            continue
        cases.append((test["id"], tokens, float(found.group(1)), bool(found.group(2))))
    return cases


def olcli_command(tokens, vw_tests):
    """The VW command for ``olcli train``: data paths absolute, output files dropped."""
    out, skip = [], False
    for k, token in enumerate(tokens):
        if skip:
            skip = False
            continue
        name = token.split("=")[0]
        if name in CACHE:
            continue
        if name in OUTPUTS:
            skip = "=" not in token
            continue
        if k and tokens[k - 1] in ("-d", "--data") or name.startswith(("-d=", "--data=")):
            token = os.path.join(vw_tests, token) if not name.startswith("-") else \
                f"{name}={os.path.join(vw_tests, token.split('=', 1)[1])}"
        out.append(token)
    return out


def olcli_in_process(arguments):
    """(exit code, average loss or None) of ``olcli train ARGUMENTS`` run in this process."""
    from olcli.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        code = 0
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                main(["train", *arguments, "--quiet", "--report", report])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                os.chdir(cwd)
        if code or not os.path.exists(report):
            return code or 1, None
        return 0, json.load(open(report)).get("average_loss")


def run_cases(vw_tests, algorithms, limit=0):
    rows = []
    for case_id, tokens, reference, holdout in vw_cases(vw_tests)[:limit or None]:
        arguments = olcli_command(tokens, vw_tests)
        losses = {}
        for algorithm in algorithms:
            code, loss = olcli_in_process(arguments + [f"--{algorithm}"])
            losses[algorithm] = (f"exit {code}" if code else "no loss" if loss is None else float(loss))
        rows.append(dict(id=case_id, command=" ".join(tokens), reference=reference, holdout=holdout,
                         losses=losses))
        print(f"case {case_id}: ref {reference:g} " + ", ".join(f"{a} {v}" for a, v in losses.items()),
              file=sys.stderr, flush=True)
    return rows


def ratio(loss, reference):
    if not isinstance(loss, float):
        return None
    if reference == 0.0:
        return 1.0 if loss <= 1e-6 else float("inf")
    return loss / reference


def cases_report(rows, algorithms, default):
    out = ["| test id | command | VW reference loss | " + " | ".join(f"olcli {a} (ratio)" for a in algorithms) + " |",
           "|---:|---|---:|" + "---:|" * len(algorithms)]
    for r in rows:
        cells = []
        for a in algorithms:
            loss = r["losses"][a]
            q = ratio(loss, r["reference"])
            cells.append(str(loss) if q is None else f"{loss:.6g} ({q:.3f})")
        out.append(f"| {r['id']} | `{r['command']}` | {r['reference']:g}{' h' if r['holdout'] else ''} | "
                   + " | ".join(cells) + " |")
    out += ["", "| algorithm | cases olcli runs | loss <= 1.02 x reference | share | median ratio |",
            "|---|---:|---:|---:|---:|"]
    for a in algorithms:
        ratios = sorted(q for q in (ratio(r["losses"][a], r["reference"]) for r in rows) if q is not None)
        met = sum(q <= 1.02 for q in ratios)
        median = ratios[len(ratios) // 2] if ratios else float("nan")
        out.append(f"| {a}{' (default)' if a == default else ''} | {len(ratios)} of {len(rows)} | {met} | "
                   f"{met / max(1, len(ratios)):.0%} | {median:.3f} |")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=DATA)
    parser.add_argument("--scale", type=float, default=0.25, help="generated sets: this share of their full size")
    parser.add_argument("--out", default=RESULTS)
    parser.add_argument("--only", nargs="*", default=[], help="run only the sets whose name contains one of these")
    parser.add_argument("--no-cases", action="store_true", help="skip VW's test cases")
    parser.add_argument("--algorithms", nargs="*", default=[], choices=list(ALGORITHMS),
                        help="run only these olcli algorithms on the sets (default: all; the default is always run)")
    parser.add_argument("--default", default=DEFAULT_ALGORITHM, choices=list(ALGORITHMS),
                        help="the algorithm the targets are checked for (default: olcli's default)")
    parser.add_argument("--cases", type=int, default=0, help="run only the first N of VW's cases (0: all)")
    parser.add_argument("--cost-repeats", type=int, default=0,
                        help="only the cost: warm, then N interleaved rounds of every algorithm (no VW, no losses)")
    args = parser.parse_args()
    data = os.path.abspath(args.data)
    default = args.default
    started = time.perf_counter()
    lines = ["# olcli's algorithms untuned, and the default, against VW's untuned learners", "",
             f"`python -m benchmarks.defaults_vs_vw --scale {args.scale} --default {default}`"
             f"{' --only ' + ' '.join(args.only) if args.only else ''}; the targets are checked for `--{default}` "
             f"(olcli's default: `--{DEFAULT_ALGORITHM}`); "
             f"VW is vowpalwabbit 9.11.9. Load average at the start: {os.getloadavg()[0]:.1f} "
             f"({os.cpu_count()} cores). Single pass, -b 18; binary sets: logistic loss; regression: squared; "
             "multiclass: --oaa K with the logistic loss, the loss is the 0/1 error.", ""]
    if args.cost_repeats:
        with tempfile.TemporaryDirectory() as tmp:
            lines += cost_report(cost_runs(data, args.scale, args.only, args.cost_repeats, tmp), default,
                                 args.cost_repeats)
        lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}."]
        print("\n".join(lines))
        if args.out:
            with open(args.out, "w") as handle:
                handle.write("\n".join(lines) + "\n")
        return
    with tempfile.TemporaryDirectory() as tmp:
        chosen = [default] + [a for a in args.algorithms if a != default] if args.algorithms else None
        rows = run_sets(data, args.scale, args.only, tmp, chosen)
    lines += tuned_report(rows, default)
    lines += sets_report(rows, default)
    if not args.no_cases:
        algorithms = [default] + [a for a in ("gd", "adagrad", "scinol2") if a != default]
        cases = run_cases(os.path.join(data, "vw_tests"), algorithms, args.cases)
        lines += ["", "## VW's own test cases: untuned default learner, olcli's default on the same command", ""]
        lines += cases_report(cases, algorithms, default)
    lines += ["", f"Load average at the end: {os.getloadavg()[0]:.1f}; {time.perf_counter() - started:.0f} s in all."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
