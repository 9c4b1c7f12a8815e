"""VW's own test-suite command lines, run verbatim under `olcli vw`.

    python -m benchmarks.vw_command_lines [VW_TESTS_DIR] [--only ID ...] [--out PATH]

VW_TESTS_DIR defaults to ../shared/data/vw_tests beside the repo (core.vwtest.json, VW's
reference stderr files and data; PROVENANCE.md there). For each test of core.vwtest.json with
a `vw_command` (the `bash_command` tests are shell scripts, not VW command lines):

1. The line is run verbatim as `olcli vw <vw_command>` in a scratch directory laid out like
   VW's `test/` folder, where VW's test runner runs it: train-sets/, test-sets/, pred-sets/
   hold links to the data files (so caches and outputs are written in the scratch folder,
   never into the shared data), models/ is empty. Tests run in id order, so a test that
   reads a model (`-i models/x.model`) finds the one its `depends_on` test wrote.
2. Outcome: *ran* (exit 0), *refused* (exit 2 with `X: not supported; ...` or `X: not
   supported on a contextual-bandit line ...` naming a VW option of the line), *data
   refused* (exit 1: no line of the data, or most lines, are ones olcli reads; the error
   names the file, line and text: a deliberate difference, listed in ``KNOWN``),
   *skipped* (it needs the model of a test that was refused), or *failed* (anything else: a
   crash, a refusal that names no option of the line, ...).
4. Every line that ran is run again as `olcli train <vw_command>` (the same words, VW's
   spellings; olcli's default learner unless the line chooses one) in a second
   scratch directory with its own models/, and its exit code and counts are compared with
   VW's reference the same way (the report's "under olcli train" columns).
3. For the ran ones, `number of examples` (per pass when VW prints `number of examples per
   pass`) and `total feature number` are read from olcli's stderr and from VW's reference
   stderr (`diff_files.stderr`) and compared; average loss is shown for information.

Independently of olcli's option table, each line is also classified by the list of VW
reductions below (``NONLINEAR``, written from VW's documentation): a line that enables none of
them, and reads no model of a test that does, uses a linear learner. That column shows which refusals are VW reductions olcli does not
have and which are linear-learner options olcli lacks.

Writes benchmarks/results/vw_command_lines.md (per-case table and totals).
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import harness

DEFAULT_DIR = Path(harness.DATA) / "vw_tests"

# VW reductions and learners that are not a linear model learned online, and input
# formats olcli does not read (from VW's --help; a line naming any of them is not a
# linear-learner line).
NONLINEAR = {
    "--bfgs", "--conjugate_gradient", "--nn", "--ksvm", "--lrq", "--lrqfa", "--stage_poly", "--autolink",
    "--rank", "--new_mf", "--boosting", "--bootstrap", "--lda", "--binary", "--csoaa", "--csoaa_ldf", "--wap_ldf",
    "--ect", "--log_multi", "--recall_tree", "--plt", "--multilabel_oaa", "--memory_tree", "--emt", "--search",
    "--active", "--active_cover", "--automl", "--marginal", "--replay_b", "--replay_c", "--baseline", "--OjaNewton",
    "--svrg", "--topk", "--confidence", "--multiworld_test", "--cs_active", "--print", "--noop", "--sender",
    "--dsjson", "--json", "--csv", "--flatbuffer", "--interact", "--mf", "--explore_eval", "--warm_cb",
    "--slates", "--cbify", "--cbzo", "--cats", "--cats_pdf", "--cats_tree", "--cb", "--cb_adf", "--cb_explore",
    "--cb_explore_adf", "--ccb_explore_adf", "--cb_dro", "--squarecb", "--large_action_space",
    "--experimental_igl", "--offset_tree", "--sample_pdf", "--get_pmf", "--pmf_to_pdf", "--cb_sample",
    "--classweight", "--scorer", "--daemon", "--named_labels", "--oaa_subsample", "--shared_feature_reduction",
    "--freegrad", "--pistol", "--sgd", "--gd_mf", "--eigen_memory_tree", "--cb_discrete", "--epsilon_decay",
    "--explore_eval", "--multitask", "--audit_regressor", "--ot", "--top", "--cbify_ldf", "--epsilon",
    "--confidence_after_training",
}

# Differences from VW that olcli makes on purpose (README "For VW users"), shown beside the case.
KNOWN = {
    193: "olcli skips a line holding a NUL byte as binary data, with a warning naming it (6 of the 11 "
         "lines end in '\\0'), and a run that skipped most of its lines exits 1; VW's C-string parsing "
         "ends each at the NUL and reads '1 | x:0.7'",
    204: "the labels are '1:1', '2:0' (cost-sensitive class:cost); VW's simple-label parser reads the number "
         "before ':' and ignores the rest, olcli refuses a label that is not a number (cost-sensitive "
         "reductions are not supported)",
}

NUMBER = re.compile(r"^number of examples(?: per pass)? = (\d+)", re.M)
FEATURES = re.compile(r"^total feature number = (\d+)", re.M)
LOSS = re.compile(r"^average loss = (\S+)( h)?", re.M)


def options_of(command: str) -> list:
    return [token.split("=")[0] if token.startswith("--") else token[:2]
            for token in shlex.split(command)
            if token.startswith("-") and len(token) > 1 and not re.match(r"^-[\d.]", token)]


def numbers(text: str) -> dict:
    found = {}
    for key, pattern in (("examples", NUMBER), ("features", FEATURES)):
        match = pattern.search(text)
        found[key] = int(match.group(1)) if match else None
    match = LOSS.search(text)
    found["loss"] = (match.group(1) + (" h" if match.group(2) else "")) if match else None
    return found


def scratch(vw_dir: Path) -> Path:
    """A folder laid out like VW's test/: links to every data file, empty models/."""
    work = Path(tempfile.mkdtemp(prefix="olcli_vw_lines_"))
    for sub in ("train-sets", "test-sets", "pred-sets"):
        for path in (vw_dir / sub).rglob("*"):
            target = work / path.relative_to(vw_dir)
            if path.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                os.symlink(path, target)
    (work / "models").mkdir()
    return work


def train_case(case: dict, work: Path) -> None:
    """The line that ran under `olcli vw`, as `olcli train` with the same words."""
    done = harness.run_olcli(["train", *shlex.split(case["command"])], cwd=work, check=False, separate_stderr=True,
                             timeout=600, stdin=subprocess.DEVNULL)
    case["train_exit"] = done.returncode
    case["train"] = numbers(done.stderr) if done.returncode == 0 else None
    if done.returncode != 0:
        last = [line for line in done.stderr.splitlines() if line.strip()]
        case["train_detail"] = last[-1] if last else f"exit {done.returncode}"
    theirs = case.get("theirs") or {}
    case["train_match"] = None if case.get("match") is None or case["train"] is None else (
        case["train"]["examples"] == theirs["examples"] and case["train"]["features"] == theirs["features"])


def run_case(test: dict, work: Path, vw_dir: Path, outcomes: dict, linear: dict) -> dict:
    command = test["vw_command"]
    opts = options_of(command)
    # linear: no reduction in the line, nor in the tests whose models it reads
    case = {"id": test["id"], "command": command,
            "linear": not (set(opts) & NONLINEAR) and all(linear.get(d, True) for d in test.get("depends_on", []))}
    failed_deps = [d for d in test.get("depends_on", []) if outcomes.get(d) not in ("ran",)]
    done = harness.run_olcli(["vw", *shlex.split(command)], cwd=work, check=False, separate_stderr=True, timeout=600,
                             stdin=subprocess.DEVNULL)
    case["seconds"] = done.wall
    err = done.stderr
    case["exit"] = done.returncode
    refusal = re.search(r"^Error: (\S+)(?: \S+){0,2}: not supported(?:; | on a contextual-bandit line)(.*)$", err, re.M)
    vw_model = re.search(r"(?:^| )-i (model-sets/\S+)", command)
    if done.returncode == 2 and refusal:
        named = refusal.group(1)
        case["outcome"] = "refused" if named in opts or named.split("=")[0] in opts else "failed"
        case["detail"] = refusal.group(0)[len("Error: "):]
        case["refused_option"] = named
    elif done.returncode == 0:
        case["outcome"] = "ran"
        reference = test.get("diff_files", {}).get("stderr")
        ours = numbers(err)
        theirs = numbers((vw_dir / reference).read_text(errors="replace")) if reference and \
            (vw_dir / reference).exists() else {"examples": None, "features": None, "loss": None}
        case.update(ours=ours, theirs=theirs)
        if theirs["examples"] is None and theirs["features"] is None:
            case["match"] = None
            case["detail"] = "VW's reference stderr has no summary" if reference else "no reference stderr"
        else:
            case["match"] = ours["examples"] == theirs["examples"] and ours["features"] == theirs["features"]
            case["detail"] = "" if case["match"] else (
                f"examples {ours['examples']} vs VW {theirs['examples']}, "
                f"features {ours['features']} vs VW {theirs['features']}"
                + (f" ({KNOWN[test['id']]})" if test["id"] in KNOWN else ""))
    elif done.returncode == 1 and test["id"] in KNOWN and ("no example could be read" in err
                                                            or "most lines were bad and skipped" in err):
        case["outcome"] = "data refused"
        case["detail"] = KNOWN[test["id"]]
    elif vw_model:
        case["outcome"] = "skipped"
        case["detail"] = f"reads {vw_model.group(1)}, a model file written by VW (not in the data copy)"
    elif failed_deps:
        case["outcome"] = "skipped"
        case["detail"] = f"needs the output of test {', '.join(map(str, failed_deps))} (not run)"
    else:
        case["outcome"] = "failed"
        last = [line for line in err.splitlines() if line.strip()]
        case["detail"] = last[-1] if last else f"exit {done.returncode}"
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("vw_dir", nargs="?", default=str(DEFAULT_DIR))
    parser.add_argument("--only", nargs="*", type=int)
    parser.add_argument("--out", default=str(Path(harness.RESULTS) / "vw_command_lines.md"))
    args = parser.parse_args()
    vw_dir = Path(args.vw_dir)
    tests = sorted(json.load(open(vw_dir / "core.vwtest.json")), key=lambda t: t["id"])
    wanted = set(args.only or [])
    if wanted:  # with their dependencies
        by_id = {t["id"]: t for t in tests}
        stack = list(wanted)
        while stack:
            for dep in by_id[stack.pop()].get("depends_on", []):
                if dep not in wanted:
                    wanted.add(dep)
                    stack.append(dep)
        tests = [t for t in tests if t["id"] in wanted]
    work = scratch(vw_dir)
    work_train = scratch(vw_dir)
    cases, outcomes, linear = [], {}, {}
    bash = 0
    started = time.perf_counter()
    for test in tests:
        if "vw_command" not in test:
            bash += 1
            continue
        case = run_case(test, work, vw_dir, outcomes, linear)
        if case["outcome"] == "ran":
            train_case(case, work_train)
        outcomes[test["id"]] = case["outcome"]
        linear[test["id"]] = case["linear"]
        cases.append(case)
        mark = {True: "match", False: "MISMATCH", None: "-"}[case.get("match")] if case["outcome"] == "ran" else ""
        print(f"{case['id']:>4} {case['outcome']:<8} {mark:<8} {case.get('detail', '')[:110]}", flush=True)
    elapsed = time.perf_counter() - started
    write_results(cases, bash, Path(args.out), vw_dir, elapsed, partial=bool(args.only))


def write_results(cases, bash, out: Path, vw_dir: Path, elapsed: float, partial: bool) -> None:
    ran = [c for c in cases if c["outcome"] == "ran"]
    compared = [c for c in ran if c.get("match") is not None]
    matching = [c for c in compared if c["match"]]
    refused = [c for c in cases if c["outcome"] == "refused"]
    skipped = [c for c in cases if c["outcome"] == "skipped"]
    failed = [c for c in cases if c["outcome"] == "failed"]
    data_refused = [c for c in cases if c["outcome"] == "data refused"]
    linear = [c for c in cases if c["linear"]]
    linear_refused = [c for c in refused if c["linear"]]
    by_option = {}
    for c in linear_refused:
        by_option[c["refused_option"]] = by_option.get(c["refused_option"], 0) + 1
    load = os.getloadavg()
    train_ran = sum(c.get("train_exit") == 0 for c in ran)
    train_failed = [c for c in ran if c.get("train_exit") not in (0, None)]
    train_compared = [c for c in ran if c.get("train_match") is not None]
    train_matching = sum(bool(c["train_match"]) for c in train_compared)
    train_compared = len(train_compared)
    lines = [
        "# VW's test-suite command lines under `olcli vw`",
        "",
        f"Generated by `benchmarks/vw_command_lines.py` from `{vw_dir.name}/core.vwtest.json` (VW snapshot "
        "872fd8d; reference stderr files from VW's repository). "
        f"{'Partial run (--only). ' if partial else ''}"
        f"Wall time {elapsed:.0f} s, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}.",
        "",
        "## Totals",
        "",
        f"- command lines: {len(cases)} `vw_command` tests ({bash} `bash_command` tests are shell scripts, not run)",
        f"- **runnable (olcli vw ran them): {len(ran)}**; compared with VW's reference: {len(compared)}; "
        f"**same `number of examples` and `total feature number`: {len(matching)} of {len(compared)}"
        f"{f' ({100 * len(matching) / len(compared):.1f}%)' if compared else ''}**",
        f"- **refused by name (exit 2, the option named is in the line): {len(refused)}**",
        f"- data refused (exit 1, no line olcli reads; a known difference, see the table): {len(data_refused)}",
        f"- skipped (they read a model written by a refused test): {len(skipped)}",
        f"- failed (neither ran nor refused by name): {len(failed)}",
        f"- lines that enable no VW reduction (a linear learner, by this script's own list): {len(linear)}; "
        f"of them ran {sum(c['outcome'] == 'ran' for c in linear)}, refused {len(linear_refused)}, "
        f"data refused {sum(c['outcome'] == 'data refused' for c in linear)}, "
        f"skipped {sum(c['outcome'] == 'skipped' for c in linear)}, failed {sum(c['outcome'] == 'failed' for c in linear)}",
        "- linear-learner lines refused, by the option named: "
        + (", ".join(f"`{k}` {v}" for k, v in sorted(by_option.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"),
        "",
        f"- **the lines olcli vw ran, as `olcli train` with the same words: ran {train_ran} of {len(ran)}"
        f"; same counts as VW's reference: {train_matching} of {train_compared}**"
        + ("" if not train_failed else " (not run: " + ", ".join(f"{c['id']}: {c['train_detail'][:120]}"
                                                                  for c in train_failed) + ")"),
        "",
        "## Runnable lines",
        "",
        "| id | command | examples olcli / VW | features olcli / VW | avg loss olcli / VW | result "
        "| olcli train: examples / features / avg loss |",
        "| ---: | --- | --- | --- | --- | --- | --- |",
    ]
    for c in ran:
        o, t = c["ours"], c["theirs"]
        result = {True: "match", False: "**mismatch**", None: "no reference"}[c["match"]]
        if c["match"] is False and c["id"] in KNOWN:
            result += ": " + KNOWN[c["id"]]
        trained = c.get("train")
        under_train = (f"{trained['examples']} / {trained['features']} / {trained['loss']}"
                       + {True: " (match)", False: " (**mismatch**)", None: ""}[c.get("train_match")]
                       if trained else f"exit {c.get('train_exit')}: {c.get('train_detail', '')[:80]}")
        lines.append(f"| {c['id']} | `{c['command']}` | {o['examples']} / {t['examples']} | "
                     f"{o['features']} / {t['features']} | {o['loss']} / {t['loss']} | {result} | "
                     f"{under_train.replace('|', '/')} |")
    for title, group in (("Failed", failed), ("Data refused", data_refused), ("Skipped", skipped),
                         ("Refused", refused)):
        lines += ["", f"## {title} ({len(group)})", "", "| id | linear | command | olcli says |",
                  "| ---: | --- | --- | --- |"]
        for c in group:
            lines.append(f"| {c['id']} | {'yes' if c['linear'] else 'no'} | `{c['command']}` | "
                         f"{c.get('detail', '').replace('|', '/')} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[8:18]))
    print(f"written {out}")


if __name__ == "__main__":
    main()
