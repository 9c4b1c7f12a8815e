"""Crafted model files and example caches: >= 10,000 of them, none may crash olcli.

    python -m benchmarks.crafted_files [MODELS] [CACHES] [--seed S[,S...]] [--out FILE]

Runs the Hypothesis harness of tests/test_safety_models.py (header fields replaced,
removed or added, payloads cut, extended or poisoned, cache blocks with changed
counts and contents; checksums recomputed so that validation, not the checksum,
has to catch them) on many files. Each file is examined in a child process, which
writes it to disk before examining it, so that a segmentation fault is counted
(and the file kept) instead of ending the harness. Outcomes:

- refused: a ModelError/CacheError with a message (what must happen to a bad file);
- accepted: loaded as a consistent model (table shape from -b and classes, the
  algorithm's slots, finite numbers) that predicts finite values on sample data,
  or a cache whose every block is learned without a problem;
- problem: a traceback (any other exception), an inconsistent file accepted, a
  non-finite prediction, or a segmentation fault.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT


def child(kind: str, count: int, seed: int, folder: str) -> None:
    """Examine ``count`` crafted files; one JSON line per file in folder/log.jsonl."""
    from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings, strategies as st

    from tests import test_safety_models as harness

    log = open(os.path.join(folder, "log.jsonl"), "a")
    current = os.path.join(folder, "current.bin")
    cache_path = os.path.join(folder, "c.olcache")
    if kind == "model":
        bases = harness.base_models()
        strategy = harness.crafted_models(bases)
    else:
        harness.base_cache(cache_path)
        raw = open(cache_path, "rb").read()
        strategy = harness.crafted_caches(raw)

    @hypothesis_seed(seed)
    @settings(max_examples=count, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def examine(data):
        crafted = data.draw(strategy)
        raw_file = crafted[1] if kind == "model" else crafted
        with open(current, "wb") as f:
            f.write(raw_file)
        if kind == "model":
            outcome, details = harness.examine_model(raw_file)
        else:
            with open(cache_path, "wb") as f:
                f.write(raw_file)
            outcome, details = harness.examine_cache(cache_path)
        log.write(json.dumps({"kind": kind, "outcome": outcome, "details": str(details)[:300]}) + "\n")
        log.flush()

    examine()


def run(kind: str, total: int, folder: Path, seed: int) -> list:
    log = folder / "log.jsonl"
    done = []
    attempt = 0
    while len(done) < total:
        attempt += 1
        before = len(done)
        process = subprocess.run([sys.executable, "-m", "benchmarks.crafted_files", "--child", kind,
                                  str(total - len(done)), str(seed + attempt), str(folder)], cwd=ROOT,
                                 capture_output=True, text=True)
        lines = log.read_text().splitlines() if log.exists() else []
        done += [json.loads(line) for line in lines]
        log.unlink(missing_ok=True)
        if process.returncode != 0:
            crashed = folder / f"crash-{kind}-{attempt}.bin"
            if (folder / "current.bin").exists():
                (folder / "current.bin").rename(crashed)
            # A negative code is a signal (a segmentation fault is -11): olcli crashed.
            # A positive one is an exception that escaped the harness; its last line
            # says which (an olcli traceback or the harness' own error).
            last = (process.stderr.strip().splitlines() or [""])[-1][:300]
            how = (f"child died (signal {-process.returncode})" if process.returncode < 0
                   else f"child failed (exit {process.returncode}, traceback)")
            done.append({"kind": kind, "outcome": "problem", "details": f"{how}: {last}"})
        if len(done) == before:
            raise SystemExit(f"no progress: {process.stderr[-2000:]}")
        print(f"{kind}: {len(done)} of {total}", flush=True)
    return done


def _reason(message: str) -> str:
    """A refusal without the file's name and numbers, to count kinds of refusals."""
    import re

    message = re.sub(r"\S*(crafted\.olm|c\.olcache) ", "", message)
    message = re.sub(r"block \d+", "block N", message)
    message = re.sub(r"-?\d[\d.e+-]*", "N", message)
    return message[:90]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="?", type=int, default=10_000)
    parser.add_argument("caches", nargs="?", type=int, default=2_000)
    parser.add_argument("--seed", default="13",
                        help="one seed, or several separated by commas (each runs MODELS and CACHES files)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "crafted_files.md"))
    options = parser.parse_args()
    started = time.perf_counter()
    seeds = [int(s) for s in options.seed.split(",")]
    with tempfile.TemporaryDirectory(prefix="crafted-files-") as folder:
        results = []
        for seed in seeds:
            results += run("model", options.models, Path(folder), seed)
            results += run("cache", options.caches, Path(folder), seed + 1000)
        crashes = []
        for crash in Path(folder).glob("crash-*"):
            kept = Path(tempfile.gettempdir()) / "crafted-files-crashes"
            kept.mkdir(exist_ok=True)
            crashes.append(str(crash.rename(kept / crash.name)))
    elapsed = time.perf_counter() - started
    counts = collections.Counter((r["kind"], r["outcome"]) for r in results)
    problems = [r for r in results if r["outcome"] == "problem"]
    reasons = collections.Counter(_reason(r["details"]) for r in results if r["outcome"] == "refused")
    lines = [
        "# Crafted model files and example caches",
        "",
        f"`python -m benchmarks.crafted_files {options.models} {options.caches} --seed {options.seed}` "
        f"({time.strftime('%Y-%m-%d')}, {elapsed:.0f} s; seeds {', '.join(map(str, seeds))}, "
        f"each {options.models} models and {options.caches} caches): the Hypothesis harness of",
        "`tests/test_safety_models.py`, each file examined in a child process (a segmentation fault",
        "would be counted, not fatal). Checksums are recomputed, so validation has to catch every file.",
        "",
        "| files | crafted | refused with a message | accepted (consistent, finite predictions) | problems |",
        "|---|---:|---:|---:|---:|",
    ]
    for kind in ("model", "cache"):
        n = sum(v for (k, _), v in counts.items() if k == kind)
        lines.append(f"| {kind} | {n} | {counts[(kind, 'refused')]} | {counts[(kind, 'accepted')]} | "
                     f"{counts[(kind, 'problem')]} |")
    lines += ["", f"Crashes (killed by a signal, e.g. segmentation faults): {sum('child died' in r['details'] for r in problems)}; "
                  f"tracebacks: {sum('traceback' in r['details'] for r in problems)}; "
                  f"inconsistent files accepted or non-finite predictions: "
                  f"{sum('accepted' in r['details'] for r in problems)}.", ""]
    if problems:
        lines += ["Problems:", ""] + [f"- {r['kind']}: {r['details']}" for r in problems[:50]] + [""]
    lines += ["Most common refusals (file name left out):", ""]
    for reason, n in reasons.most_common(12):
        lines.append(f"- {n} x {reason}")
    lines.append("")
    Path(options.out).write_text("\n".join(lines))
    print("\n".join(lines))
    if crashes:
        print("crashes kept:", crashes)


if __name__ == "__main__":
    main()
