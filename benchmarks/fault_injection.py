"""Fault injection: SIGINT, SIGTERM and SIGHUP at random moments of real olcli runs.

    python -m benchmarks.fault_injection [RUNS] [--seed S] [--out FILE]

Each run starts ``python -m olcli train`` (or ``test``) on generated data, in a fresh
directory holding a previous model, and sends one signal at a random moment
between the process's start and its natural end, so that signals land in start-up
(imports, option checks), loading the model, compiling or loading kernels,
learning, and saving. A run *holds* when:

- the previous model is byte-identical, or the model file is a new valid model
  (it loads, and has learned at least what the previous one had);
- no temporary file is left in the directory;
- stderr has no traceback;
- the exit code is 128 + signal (the report, when one was written, says
  ``complete: false``), or 0 with a complete report (the signal came after
  everything was written);
- stderr says what happened in an ``Error:`` line when the exit code is 128 + n.

Signals that arrive before olcli's first line of code runs (the interpreter's own
start-up) cannot be handled by olcli; such runs are counted separately (``before
olcli``: the process died of the signal with no model touched). The script prints
the totals and writes them, with the configuration, to the results file.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS, run_olcli, start_olcli

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

CONFIGS = [
    # (name, extra train args, data lines, bits): enough data for a few seconds of learning,
    # small and large tables (loading and saving a 2^24 table take a while, so signals land
    # there too), passes over a cache, interactions, multiclass.
    ("default -b 18", [], 400_000, 18),
    ("default -b 24 (slow load and save)", ["-b", "24"], 150_000, 24),
    ("ftrl --passes 3", ["--ftrl", "--passes", "3", "--cache", "c.olcache"], 120_000, 18),
    ("scinol2 -q ab", ["--scinol2", "-q", "ab"], 150_000, 18),
    ("oaa 5", ["--oaa", "5"], 150_000, 18),
]


def make_data(path: Path, lines: int, rng: random.Random, classes: int = 0) -> None:
    with open(path, "w") as out:
        for i in range(lines):
            label = rng.randint(1, classes) if classes else rng.choice((-1, 1))
            a = " ".join(f"x{rng.randint(0, 5000)}" for _ in range(8))
            b = " ".join(f"y{rng.randint(0, 300)}:{rng.random():.3f}" for _ in range(3))
            out.write(f"{label} |a {a} |b {b}\n")


def start(args, cwd, **kwargs):
    return start_olcli(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kwargs)


def prepare(base: Path, rng: random.Random) -> dict:
    """Data and a previous model per configuration; the time a whole run takes."""
    plans = {}
    for name, extra, lines, bits in CONFIGS:
        folder = base / name.replace(" ", "_").replace("(", "").replace(")", "")
        folder.mkdir()
        classes = int(extra[extra.index("--oaa") + 1]) if "--oaa" in extra else 0
        make_data(folder / "data.vw", lines, rng, classes)
        make_data(folder / "first.vw", 500, rng, classes)
        loss = [] if classes else ["--loss", "logistic"]
        train = ["train", "first.vw", *loss, *[a for a in extra if a not in ("--passes", "3", "--cache", "c.olcache")],
                 "-f", "previous.olm", "--quiet"]
        run_olcli(train, cwd=folder)
        passes = [a for a in extra if a in ("--passes", "3", "--cache", "c.olcache")]
        args = ["train", "data.vw", "-i", "model.olm", "-f", "model.olm", "--report", "r.json", "--quiet", *passes]
        shutil.copy(folder / "previous.olm", folder / "model.olm")
        seconds = run_olcli(args, cwd=folder).wall
        total = json.loads((folder / "r.json").read_text())["examples"]
        plans[name] = {"folder": folder, "args": args, "seconds": seconds, "examples": total}
    return plans


def one_run(plan: dict, signum: int, delay: float) -> dict:
    import olcli

    folder = plan["folder"]
    for leftover in ("r.json", "c.olcache"):
        (folder / leftover).unlink(missing_ok=True)
    shutil.copy(folder / "previous.olm", folder / "model.olm")
    previous = (folder / "previous.olm").read_bytes()
    before = set(os.listdir(folder))
    process = start(plan["args"], folder)
    time.sleep(delay)
    process.send_signal(signum)
    _, err = process.communicate(timeout=600)
    err = err.decode("utf-8", "replace")
    code = process.returncode
    after = set(os.listdir(folder)) - {"r.json", "c.olcache"}
    problems = []
    if after - before:
        problems.append(f"files left: {sorted(after - before)}")
    if "Traceback" in err:
        problems.append("Python's KeyboardInterrupt traceback" if "KeyboardInterrupt" in err else "traceback")
    # olcli's handler never raises KeyboardInterrupt: one means Python's own handler was
    # still in place, i.e. the signal came before olcli installed its handlers.
    before_handlers = "KeyboardInterrupt" in err or "Failed to import the site module" in err
    if code == -signum or before_handlers:
        phase = "before olcli's handlers (Python's start-up, ~first 50 ms)"
        if (folder / "model.olm").read_bytes() != previous:
            problems.append("model changed by a process that never ran olcli")
        return {"phase": phase, "problems": problems, "code": code, "err": err[-3000:]}
    model_bytes = (folder / "model.olm").read_bytes()
    if model_bytes == previous:
        model_state = "unchanged"
    else:
        try:
            learned = olcli.load(folder / "model.olm").counters["examples"]
            kept = olcli.load(folder / "previous.olm").counters["examples"]
            model_state = "new" if learned >= kept else "smaller?"
            if learned < kept:
                problems.append("the new model has learned less than the previous one")
        except Exception as exc:  # noqa: BLE001 - a harness counts every failure
            model_state = "invalid"
            problems.append(f"model does not load: {exc}")
    report = None
    if (folder / "r.json").exists():
        try:
            report = json.loads((folder / "r.json").read_text())
        except ValueError:
            problems.append("report is not JSON")
    if code == 128 + signum:
        if report is not None and report.get("complete") is not False:
            problems.append("exit 128+n but the report says complete")
        if "Error: " not in err:
            problems.append("no message")
        read = (report or {}).get("examples") or 0
        if model_state != "new" or read == 0:
            phase = "start-up, loading, compiling"
        elif read < plan["examples"]:
            phase = "learning"
        else:
            phase = "saving (everything learned)"
    elif code == 0:
        if report is None or report.get("complete") is not True:
            problems.append("exit 0 without a complete report")
        phase = "after the run"
    else:
        problems.append(f"exit code {code}")
        phase = "?"
    return {"phase": phase, "problems": problems, "code": code, "model": model_state, "err": err[-3000:]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="?", type=int, default=200)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", default=os.path.join(RESULTS, "fault_injection.md"))
    parser.add_argument("--only", help="run only the configurations whose name contains this")
    options = parser.parse_args()
    if options.only:
        CONFIGS[:] = [c for c in CONFIGS if options.only in c[0]]
    rng = random.Random(options.seed)
    base = Path(tempfile.mkdtemp(prefix="fault-injection-"))
    try:
        plans = prepare(base, rng)
        results = []
        names = list(plans)
        for k in range(options.runs):
            name = names[k % len(names)]
            plan = plans[name]
            signum = SIGNALS[rng.randrange(len(SIGNALS))]
            delay = rng.uniform(0.0, plan["seconds"] * 1.1)
            outcome = one_run(plan, signum, delay)
            outcome.update({"config": name, "signal": signal.Signals(signum).name, "delay": delay})
            results.append(outcome)
            mark = "ok " if not outcome["problems"] else "BAD"
            print(f"{mark} {k + 1:4d} {name:28s} {outcome['signal']:7s} at {delay:5.2f}s -> exit {outcome['code']:4d}"
                  f" {outcome['phase']}{'; ' + '; '.join(outcome['problems']) if outcome['problems'] else ''}",
                  flush=True)
            if outcome["problems"]:
                print("    " + outcome["err"].replace("\n", "\n    "), flush=True)
        write_results(options, plans, results)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def write_results(options, plans, results) -> None:
    held = sum(1 for r in results if not r["problems"])
    by_phase = {}
    for r in results:
        entry = by_phase.setdefault(r["phase"], [0, 0])
        entry[0] += 1
        entry[1] += not r["problems"]
    by_signal = {}
    for r in results:
        entry = by_signal.setdefault(r["signal"], [0, 0])
        entry[0] += 1
        entry[1] += not r["problems"]
    lines = [
        "# Fault injection: signals at random moments",
        "",
        f"`python -m benchmarks.fault_injection {options.runs} --seed {options.seed}` "
        f"({time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {os.cpu_count()} cores).",
        "",
        "Each run: `olcli train data.vw -i model.olm -f model.olm --report r.json` (same file in and out), one",
        "signal (SIGINT, SIGTERM or SIGHUP, at random) at a uniformly random moment between the start",
        "of the process and 1.1 x the length of an undisturbed run. Held = previous model byte-identical",
        "or a new valid model that learned at least as much, no temporary file, no traceback, exit",
        "128 + signal with an `Error:` line and `complete: false` (or exit 0 with `complete: true`",
        "when the signal came after everything was written).",
        "",
        f"**{held} of {len(results)} runs held.**",
        "",
        "| configuration | undisturbed run (s) |",
        "|---|---:|",
        *[f"| `{name}` | {plan['seconds']:.2f} |" for name, plan in plans.items()],
        "",
        "| where the signal landed | runs | held |",
        "|---|---:|---:|",
        *[f"| {phase} | {n} | {ok} |" for phase, (n, ok) in sorted(by_phase.items())],
        "",
        "| signal | runs | held |",
        "|---|---:|---:|",
        *[f"| {name} | {n} | {ok} |" for name, (n, ok) in sorted(by_signal.items())],
        "",
    ]
    failures = [r for r in results if r["problems"]]
    if failures:
        lines += ["Runs that did not hold:", ""]
        for r in failures:
            lines.append(f"- `{r['config']}`, {r['signal']} at {r['delay']:.2f} s: exit {r['code']}, "
                         f"{'; '.join(r['problems'])}")
        lines.append("")
    Path(options.out).write_text("\n".join(lines))
    print(f"\n{held} of {len(results)} runs held; written to {options.out}")


if __name__ == "__main__":
    main()
