"""VW's contextual-bandit test-suite command lines and cbify simulations, run with VW 9.11.9 (issue 30).

    python -m benchmarks.cb_vs_vw [--vw-tests DIR] [--data DIR] [--skip-suite] [--skip-cbify]
                                  [--out benchmarks/results/cb_vs_vw.md]

Part 1 (suite). Every test of VW's ``core.vwtest.json`` whose ``vw_command`` enables one of the
contextual-bandit reductions (``--cb``, ``--cb_adf``, ``--cb_explore_adf``, ``--cbify``; the
legacy ``--cb_explore`` lines are listed too) is run verbatim with ``python -m vowpalwabbit``
in a scratch folder laid out like VW's ``test/`` folder (train-sets/, test-sets/, pred-sets/
link to the data; models/ starts empty; tests run in id order so a line that reads
``-i models/x`` finds the model an earlier line wrote). From VW's stderr it records
``number of examples`` (per pass when VW prints the per-pass form), ``total feature number``
and ``average loss``, and beside them the same three numbers from VW's reference stderr
(``diff_files.stderr``) when that file is in the data folder. Each line's options are
classified (which reduction family, which exploration rule, which cb_type, which other
options), and the table has an empty ``olcli`` column: olcli's side is filled in when the
reduction exists (no number is invented for it here).

Part 2 (cbify). ``--cbify K --cb_explore_adf --epsilon 0.05`` and
``--cbify K --cb_explore_adf --squarecb`` on letter (K=26), news20 (K=20) and covtype (K=2;
its +1/-1 labels are written as 1/2 to a scratch copy) from the shared data folder: VW's
progressive CB loss (cbify's ``average loss``: the fraction of examples where the sampled
action was not the true class) and wall time of the whole process, with the wall time of
``python -m vowpalwabbit`` on an empty input beside it (the start-up floor, included in each
wall). These are the bar olcli's ``--cbify`` must meet (issue 30: loss <= 1.02 x VW's,
wall <= 1.0 x VW's).

Part 3 (dsjson). Each Decision Service JSON file of VW's tests is read by
``olcli.cb_format.read_dsjson``, written back as ADF text, and run through VW beside VW's own
``--dsjson`` run with the same options: equal ``number of examples``, ``total feature number`` and
``average loss`` show that cb_format maps the JSON context to the features VW's JSON parser makes.
Part 4 (oracle). The pure-Python oracle ``tests/naive_cb.py`` run side by side with VW on the
same data, with VW's plain learner (``--sgd --power_t 0 -l L``; the oracle's ``VWPlainSGD``):
every exploration rule x cb_type on VW's ADF test files (average loss), and ``--cbify`` on slices
of letter / covtype / news20 with VW's per-action index placement (the oracle hashes features with
``tests/naive.py``'s VW hash). Equal losses show the oracle states VW's semantics.

Part 5 (olcli.cb). ``olcli.cb.CbExploreAdf`` over a ``Learner`` with VW's plain learner
(``gd`` with adaptive/normalized/invariant off, power_t 0) beside VW on a seeded synthetic stream of
2,000 ADF events (``tests/test_cb.py``'s generator): average loss of both, and wall (olcli: the event
loop in-process after a warm-up on another learner, so no Numba compilation; VW: the whole process).

Part 6 (olcli vw). Every suite line of ``--cb_explore_adf``, ``--cbify``, ``--cb_adf`` and ``--cb`` run verbatim by
``olcli vw`` and by VW 9.11.9 in the same run, each in its own scratch folder: same ``number of
examples`` and ``total feature number`` and ``average loss`` within 1%, refused by name (exit 2), or
failed. Part 7: whole-process wall of both on 5,000 generated ADF events.
``--only-olcli-vw`` keeps parts 1-5 from the last JSON and reruns parts 6 and 7.

``--reuse-json`` keeps parts 1 and 2 from the last run's JSON and reruns parts 3 to 5.
"""

import argparse
import collections
import json
import os
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness

SHARED = Path(harness.DATA)
RESULTS = Path(harness.RESULTS)

FAMILIES = ("--cb_explore_adf", "--cbify", "--cb_adf", "--cb_explore", "--cb")
EXPLORATION = ("--epsilon", "--first", "--bag", "--softmax", "--squarecb", "--cover", "--regcb",
               "--regcbopt", "--rnd", "--synthcover", "--large_action_space", "--graph_feedback")
# Options olcli's issue 30 scope names (beyond the linear learner's own options).
ISSUE_SCOPE = {"--cb", "--cb_adf", "--cb_explore_adf", "--cbify", "--cb_type", "--epsilon", "--first",
               "--bag", "--softmax", "--lambda", "--squarecb", "--gamma_scale", "--eval", "--dsjson"}


def option_names(command):
    """The option tokens of a VW command line (``--x`` / ``-x``; ``--x=v`` gives ``--x``)."""
    names = []
    for tok in shlex.split(command):
        if tok.startswith("-") and not re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?", tok):
            names.append(tok.split("=", 1)[0])
    return names


def family(names):
    """The CB reduction a line enables (the outermost one when several are named)."""
    for fam in FAMILIES:
        if fam in names:
            return fam
    return None


SUMMARY = {
    "examples": re.compile(r"^number of examples(?: per pass)? = (\d+)", re.M),
    "features": re.compile(r"^total feature number = (\d+)", re.M),
    "loss": re.compile(r"^average loss = (.+)$", re.M),
}


def summary(text):
    out = {}
    for key, rx in SUMMARY.items():
        m = rx.search(text)
        out[key] = m.group(1).strip() if m else None
    return out


def scratch_dir(vw_tests):
    work = Path(tempfile.mkdtemp(prefix="cb_vs_vw_"))
    for sub in ("train-sets", "test-sets", "pred-sets"):
        if (vw_tests / sub).exists():
            os.symlink(vw_tests / sub, work / sub)
    (work / "models").mkdir()
    return work


def run_suite(vw_tests):
    tests = json.loads((vw_tests / "core.vwtest.json").read_text())
    rows = []
    work = scratch_dir(vw_tests)
    for t in sorted(tests, key=lambda t: t["id"]):
        cmd = t.get("vw_command")
        if not cmd:
            continue
        names = option_names(cmd)
        fam = family(names)
        if fam is None:
            continue
        t0 = time.perf_counter()
        try:
            proc = harness.run_vw(shlex.split(cmd), cwd=work, check=False, separate_stderr=True, timeout=300)
            err, rc = proc.stderr + proc.output, proc.returncode
        except RuntimeError:  # the timeout
            err, rc = "timeout", -1
        wall = time.perf_counter() - t0
        got = summary(err)
        ref = {"examples": None, "features": None, "loss": None}
        ref_file = (t.get("diff_files") or {}).get("stderr")
        if ref_file and (vw_tests / ref_file).exists():
            ref = summary((vw_tests / ref_file).read_text(errors="replace"))
        last_err = ""
        if rc != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            last_err = lines[-1][:160] if lines else ""
        rows.append({"id": t["id"], "command": cmd, "family": fam, "names": names, "rc": rc, "wall": wall,
                     "vw": got, "ref": ref, "error": last_err})
        print(f"{t['id']:>4} {fam:<16} rc={rc} n={got['examples']} f={got['features']} loss={got['loss']}",
              file=sys.stderr, flush=True)
    return rows


def classify(rows):
    fam_count = collections.Counter(r["family"] for r in rows)
    opt_count = collections.Counter()
    for r in rows:
        for n in sorted(set(r["names"])):
            opt_count[n] += 1
    explore = collections.Counter()
    cb_type = collections.Counter()
    for r in rows:
        toks = shlex.split(r["command"])
        rules = [n for n in EXPLORATION if n in r["names"]]
        if r["family"] in ("--cb_explore_adf", "--cbify", "--cb_explore"):
            explore[" ".join(rules) or "(epsilon-greedy, default epsilon 0.05)"] += 1
        ct = "(default)"
        for i, tok in enumerate(toks):
            if tok == "--cb_type" and i + 1 < len(toks):
                ct = toks[i + 1]
            elif tok.startswith("--cb_type="):
                ct = tok.split("=", 1)[1]
        cb_type[ct] += 1
    return fam_count, opt_count, explore, cb_type


def covtype_as_multiclass(src, dst):
    with open(src) as fin, open(dst, "w") as fout:
        for line in fin:
            label, rest = line.split(" ", 1)
            fout.write(("2 " if label.strip() == "-1" else "1 ") + rest)


CBIFY_SETS = [("letter", "letter/train.vw", 26), ("news20", "news20_bydate/train.vw", 20),
              ("covtype (binary as 1/2)", "covtype_binary_20k/train.vw", 2)]
CBIFY_RULES = [("--epsilon 0.05", ["--epsilon", "0.05"]), ("--squarecb", ["--squarecb"])]


def run_cbify(data, repeats):
    tmp = Path(tempfile.mkdtemp(prefix="cb_vs_vw_cbify_"))
    empty = tmp / "empty.vw"
    empty.write_text("")
    floor = []
    for _ in range(repeats):
        floor.append(harness.run_vw(["-d", empty, "--quiet"], check=False).wall)
    rows = []
    for name, rel, k in CBIFY_SETS:
        path = data / rel
        if name.startswith("covtype"):
            conv = tmp / "covtype_12.vw"
            covtype_as_multiclass(path, conv)
            path = conv
        for rule_name, rule in CBIFY_RULES:
            args = ["--cbify", str(k), "--cb_explore_adf"] + rule + ["-d", str(path)]
            walls, got = [], None
            for _ in range(repeats):
                proc = harness.run_vw(args, check=False, separate_stderr=True)
                walls.append(proc.wall)
                got = summary(proc.stderr)
            rows.append({"data": name, "k": k, "rule": rule_name, "command": " ".join(args[:-2] + ["-d", rel]),
                         "vw": got, "wall": min(walls), "walls": walls})
            print(f"cbify {name} {rule_name}: {got} wall {min(walls):.2f}s", file=sys.stderr, flush=True)
    return rows, min(floor)


DSJSON_CASES = [("dsjson_cb.json", "--cb_explore_adf --epsilon 0.2 -q GT"), ("cb_simple.json", "--cb_explore_adf"),
                ("decisionservice.json", "--cb_explore_adf"), ("no_shared_features.json", "--cb_adf"),
                ("cb_features_w_zero_vals.dsjson", "--cb_adf"), ("cb_simple_pdrop.json", "--cb_adf")]


def adf_text(events):
    out = []
    for e in events:
        if e.shared is not None:
            out.append("shared " + (e.shared or "|"))
        for i, feats in enumerate(e.actions):
            label = f"0:{e.cost!r}:{e.probability!r} " if e.chosen == i and e.cost is not None else ""
            out.append(label + (feats or "|"))
        out.append("")
    return "\n".join(out) + "\n"


def run_dsjson(vw_tests):
    from olcli import cb_format
    tmp = Path(tempfile.mkdtemp(prefix="cb_vs_vw_ds_"))
    rows = []
    for name, opts in DSJSON_CASES:
        path = vw_tests / "train-sets" / name
        with open(path) as f:
            events = list(cb_format.read_dsjson(f, name))
        txt = tmp / (name + ".txt")
        txt.write_text(adf_text(events))
        ds = harness.run_vw(["--dsjson", "-d", path] + opts.split(), check=False, separate_stderr=True)
        tx = harness.run_vw(["-d", txt] + opts.split(), check=False, separate_stderr=True)
        rows.append({"file": name, "options": opts, "dsjson": summary(ds.stderr), "text": summary(tx.stderr)})
        print(f"dsjson {name}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


ORACLE_FILES = ["cb_test.ldf", "cb_test_non_binary_costs.ldf", "cb_adf_sm.data", "cb_test_small.ldf"]
ORACLE_RULES = [(("epsilon", 0.1), "--epsilon 0.1"), (("softmax", 1.0, 0.0), "--softmax --lambda 1"),
                (("squarecb", 10.0, 0.0), "--squarecb"), (("first", 2, 0.0), "--first 2"),
                (("bag", 3, 0.0), "--bag 3")]
POISSON_CDF = [0.3678794411714423, 0.7357588823428846, 0.9196986029286058, 0.9810118431238462,
               0.9963401531726563, 0.9994058151824183, 0.9999167588507120, 0.9999897508033254]


def _oracle_modules():
    from olcli import cb_format
    from tests import naive, naive_cb
    return naive, naive_cb, cb_format


def _named_features(text):
    f, ns = {}, " "
    for tok in text.split():
        if tok.startswith("|"):
            ns = tok[1:] or " "
            continue
        name, _, v = tok.partition(":")
        key = ns + "^" + name
        f[key] = f.get(key, 0.0) + (float(v) if v else 1.0)
    return f


def run_oracle(vw_tests, data, lr=0.1):
    naive, nc, cf = _oracle_modules()
    rows = []
    for name in ORACLE_FILES:
        path = vw_tests / "train-sets" / name
        with open(path) as f:
            events = [nc.Event(_named_features(e.shared or ""), [_named_features(a) for a in e.actions], e.chosen,
                               e.cost if e.cost is not None else 0.0, e.probability or 0.0)
                      for e in cf.read_adf(f, name)]
        for rule, opt in ORACLE_RULES:
            for cb_type in ("mtr", "ips", "dm", "dr"):
                if rule[0] == "squarecb" and cb_type != "mtr":
                    continue
                rng = nc.LabelRange()
                state = [0]   # VW's random state (--random_seed 0) drives bag's Poisson(1) draws

                def draws(_member):
                    u, state[0] = nc.merand48(state[0])
                    return next((i for i, c in enumerate(POISSON_CDF) if u <= c), 8)
                full_rule = rule + (draws,) if rule[0] == "bag" else rule
                x = nc.CbExploreAdf(full_rule, cb_type=cb_type, make_regressor=lambda: nc.VWPlainSGD(lr, rng),
                                    constant=False)
                total, labelled = 0.0, 0
                for e in events:
                    _, loss = x.step(e)
                    total += loss
                    labelled += e.labelled
                cmd = f"--cb_explore_adf {opt} --cb_type {cb_type} --noconstant --sgd --power_t 0 -l {lr}"
                proc = harness.run_vw(["-d", path] + cmd.split(), check=False, separate_stderr=True)
                rows.append({"what": name, "command": cmd, "oracle": f"{total / labelled:.6f}",
                             "vw": summary(proc.stderr)["loss"]})
                print(f"oracle {name} {cmd}: {rows[-1]['oracle']} vw {rows[-1]['vw']}", file=sys.stderr, flush=True)
    # cbify with VW's per-action placement of hashed indices
    constant = 11650396 & ((1 << 18) - 1)
    tmp = Path(tempfile.mkdtemp(prefix="cb_vs_vw_oracle_"))
    for label, rel, k, n in [("letter", "letter/train.vw", 26, 1000), ("letter", "letter/train.vw", 26, 16000),
                             ("covtype (1/2)", "covtype_binary_20k/train.vw", 2, 1000),
                             ("covtype (1/2)", "covtype_binary_20k/train.vw", 2, 20000),
                             ("news20", "news20_bydate/train.vw", 20, 1000)]:
        with open(data / rel) as f:
            raw = [next(f) for _ in range(n)]
        if k == 2:
            raw = [("2 " if ln.split(" ", 1)[0] == "-1" else "1 ") + ln.split(" ", 1)[1] for ln in raw]
        (tmp / "in.vw").write_text("".join(raw))
        examples = []
        for ln in raw:
            head, feats = ln.split("|", 1)
            toks = feats.split()
            ns, fd = toks[0], {constant: 1.0}
            for t in toks[1:]:
                nm, _, v = t.partition(":")
                i = naive.vw_strings_index(ns.encode(), nm.encode(), 18)
                fd[i] = fd.get(i, 0.0) + (float(v) if v else 1.0)
            examples.append((int(head.split()[0]), fd))
        for rule, opt in [(("epsilon", 0.05), "--epsilon 0.05"), (("squarecb", 10.0, 0.0), "--squarecb")]:
            rng = nc.LabelRange()
            x = nc.CbExploreAdf(rule, make_regressor=lambda: nc.VWPlainSGD(0.01, rng), constant=False)
            loss, _ = nc.cbify(examples, k, x, copies=nc.vw_action_copies)
            cmd = f"--cbify {k} --cb_explore_adf {opt} --sgd --power_t 0 -l 0.01"
            proc = harness.run_vw(["-d", tmp / "in.vw"] + cmd.split(), check=False, separate_stderr=True)
            rows.append({"what": f"{label}, first {n} lines", "command": cmd, "oracle": f"{loss:.6f}",
                         "vw": summary(proc.stderr)["loss"]})
            print(f"oracle {label} {cmd}: {rows[-1]['oracle']} vw {rows[-1]['vw']}", file=sys.stderr, flush=True)
    return rows


def distinct_stream(n=2000, seed=5):
    """Like tests/test_cb.py's synthetic stream, but no feature repeats within a line."""
    import random
    from olcli import cb_format
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        k = rnd.randint(2, 4)
        shared = "|u " + " ".join(f"s{j}:{rnd.uniform(-1, 1):.3f}" for j in rnd.sample(range(6), 2))
        actions = tuple("|a " + " ".join(f"x{j}:{rnd.uniform(-1, 1):.3f}" for j in rnd.sample(range(8), 3))
                        for _ in range(k))
        out.append(cb_format.CbEvent(shared, actions) if i % 7 == 6 else
                   cb_format.CbEvent(shared, actions, rnd.randrange(k), round(rnd.uniform(-1, 2), 3),
                                     round(rnd.uniform(0.2, 1.0), 3)))
    return out


def run_olcli_cb(n=2000):
    import olcli
    from olcli import cb
    test_cb = harness.tests_module("test_cb")
    plain_learner, synthetic = test_cb.plain_learner, test_cb.synthetic
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="cb_vs_vw_olcli_"))
    basic = [("epsilon", {"epsilon": 0.05}, "--epsilon 0.05"), ("squarecb", {}, "--squarecb"),
             ("softmax", {"lam": 1.0}, "--softmax --lambda 1")]
    copies = [("epsilon", {"epsilon": 0.05, "cb_type": "dr"}, "--epsilon 0.05 --cb_type dr"),
              ("bag", {"bag": 3}, "--bag 3"), ("bag", {"bag": 3, "cb_type": "dr"}, "--bag 3 --cb_type dr"),
              ("bag", {"bag": 4, "epsilon": 0.1, "greedify": True}, "--bag 4 --epsilon 0.1 --greedify")]
    streams = [("tests' synthetic stream (repeated features)", synthetic(n, seed=5), "plain", basic),
               ("stream without repeated features", distinct_stream(n), "plain", basic),
               ("stream without repeated features", distinct_stream(n), "default", basic),
               ("stream without repeated features", distinct_stream(n), "plain_noconstant", copies)]
    for s_i, (stream, events, learner_kind, rules) in enumerate(streams):
        text = []
        for e in events:
            text.append("shared " + e.shared)
            text += [(f"0:{e.cost}:{e.probability} " if e.chosen == i else "") + a for i, a in enumerate(e.actions)]
            text.append("")
        path = tmp / f"events{s_i}.txt"
        path.write_text("\n".join(text) + "\n")

        def make():
            if learner_kind == "default":
                return olcli.Learner("gd", loss="squared")
            return plain_learner(learner_kind == "plain")
        for rule, kwargs, opt in rules:
            warm = cb.CbExploreAdf(make(), rule, **kwargs)
            cb.run(events[:5], warm)
            policy = cb.CbExploreAdf(make(), rule, **kwargs)
            t0 = time.perf_counter()
            cb.run(events, policy)
            wall = time.perf_counter() - t0
            cmd = f"--cb_explore_adf {opt}" + (" --sgd --power_t 0 -l 0.1" if learner_kind != "default" else "") \
                + (" --noconstant" if learner_kind == "plain_noconstant" else "")
            proc = harness.run_vw(["-d", path] + cmd.split(), check=False, separate_stderr=True)
            vw_wall = proc.wall
            got = summary(proc.stderr)
            rows.append({"stream": stream, "learner": learner_kind, "command": cmd,
                         "olcli_loss": f"{policy.average_loss:.6f}", "olcli_examples": policy.examples,
                         "olcli_features": policy.total_features, "olcli_wall": wall, "vw": got, "vw_wall": vw_wall})
            print(f"olcli.cb {cmd}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


OLCLI_VW_FAMILIES = ("--cb_explore_adf", "--cb_adf", "--cb", "--cbify")


def _close(a, b, rel=0.01):
    """Two printed average losses within ``rel`` (both 'n.a.' counts as equal)."""
    if a is None or b is None:
        return False
    try:
        x, y = float(a.split()[0]), float(b.split()[0])
    except ValueError:
        return a == b
    return abs(x - y) <= rel * abs(y) or abs(x - y) <= 1e-6


def run_olcli_vw(vw_tests):
    """Part 6: every suite line of --cb_explore_adf, --cb_adf, --cb and --cbify run verbatim by ``olcli vw`` and
    by VW 9.11.9, each in its own scratch folder laid out as VW's test/ (lines in id order, so a line's
    -i finds what an earlier line of the same program wrote with -f)."""
    tests = json.loads((vw_tests / "core.vwtest.json").read_text())
    olcli_dir, vw_dir = scratch_dir(vw_tests), scratch_dir(vw_tests)
    rows = []
    for t in sorted(tests, key=lambda t: t["id"]):
        cmd = t.get("vw_command")
        if not cmd or family(option_names(cmd)) not in OLCLI_VW_FAMILIES:
            continue
        words = shlex.split(cmd)
        ours = harness.measure([*harness.OLCLI, "vw", *words], cwd=olcli_dir, check=False, separate_stderr=True,
                               timeout=600)
        theirs = harness.run_vw(words, cwd=vw_dir, check=False, separate_stderr=True, timeout=600)
        err = ours.stderr.strip().splitlines()
        refused = ours.returncode == 2 and bool(err) and "not supported" in err[-1]
        got, want = summary(ours.stderr), summary(theirs.stderr + theirs.output)
        same = (ours.returncode == 0 and theirs.returncode == 0 and got["examples"] == want["examples"]
                and got["features"] == want["features"]
                and (_close(got["loss"], want["loss"]) or got == want == dict.fromkeys(got)))   # (--help: none)
        status = "refused" if refused else "same" if same else "failed" if ours.returncode != 0 else "differs"
        rows.append({"id": t["id"], "command": cmd, "family": family(option_names(cmd)), "status": status,
                     "olcli": got, "vw": want, "olcli_rc": ours.returncode, "vw_rc": theirs.returncode,
                     "olcli_wall": ours.wall, "vw_wall": theirs.wall,
                     "message": err[-1][:200] if err and ours.returncode != 0 else ""})
        print(f"{t['id']:>4} {status:<8} olcli {got} vw {want} {rows[-1]['message'][:90]}", file=sys.stderr,
              flush=True)
    return rows


def run_olcli_vw_wall(events=5000, seed=7):
    """Part 7: whole-process wall of ``olcli vw`` and VW on one generated ADF stream (tests/test_cb_cli.py's
    generator: 2-4 actions, 2 shared and 3 action features, every 6th event unlabelled)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from test_cb_cli import generated

    work = Path(tempfile.mkdtemp(prefix="cb_wall_"))
    data = work / "events.txt"
    data.write_text(generated(n=events, seed=seed)[0])
    rows = []
    for options in (["--epsilon", "0.1"], ["--squarecb"], ["--cb_type", "dr"], ["--bag", "3"]):
        words = ["--cb_explore_adf", *options, "-d", str(data)]
        ours = harness.measure([*harness.OLCLI, "vw", *words], cwd=work, check=False, separate_stderr=True)
        theirs = harness.run_vw(words, cwd=work, check=False, separate_stderr=True)
        rows.append({"options": " ".join(options), "events": events, "olcli": summary(ours.stderr),
                     "vw": summary(theirs.stderr + theirs.output), "olcli_wall": ours.wall, "vw_wall": theirs.wall,
                     "load": ours.load})
        print(f"wall {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def olcli_vw_wall_lines(rows):
    lines = ["", "## Part 7: wall time, olcli vw beside VW on one generated stream", "",
             f"{rows[0]['events']:,} ADF events from `tests/test_cb_cli.py`'s generator, `--cb_explore_adf` with VW's "
             "default learner; whole processes (start-up included). olcli's CB run is a per-event Python loop "
             "(parse, score, explore, learn through the Learner), far from the issue's wall target (<= 1.0x VW).", "",
             "| options | olcli avg loss | VW avg loss | olcli wall s | VW wall s | ratio | load |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| `{r['options']}` | {fmt(r['olcli']['loss'])} | {fmt(r['vw']['loss'])} | "
                     f"{r['olcli_wall']:.2f} | {r['vw_wall']:.2f} | {r['olcli_wall'] / r['vw_wall']:.1f} | "
                     f"{r['load']:.1f} |")
    return lines


def olcli_vw_lines(rows):
    """The markdown of part 6."""
    counts = collections.Counter(r["status"] for r in rows)
    ran = len(rows) - counts["refused"]
    lines = ["", "## Part 6: VW's CB test-suite lines under `olcli vw`, beside VW 9.11.9", "",
             f"Every line of `core.vwtest.json` whose outermost reduction is `--cb_explore_adf`, `--cbify`, "
             f"`--cb_adf` or `--cb` ({len(rows)} lines), run verbatim by `olcli vw` and by VW in the same run, each program in "
             "its own scratch folder. *same* = exit 0 for both, equal `number of examples` and `total feature "
             "number`, and `average loss` within 1% of VW's; *refused* = olcli exit 2 naming an option it does "
             "not have; *failed* = another error (e.g. an `-i` of a model file written by VW or by a refused "
             "line); *differs* = ran, numbers not the same.", "",
             f"**{counts['same']} of the {ran} lines olcli does not refuse are the same as VW "
             f"({100.0 * counts['same'] / ran if ran else 0:.0f}%; issue target: >= 90%)**; "
             f"{counts['refused']} refused by name, {counts['failed']} failed, {counts['differs']} differ.", "",
             "| id | command | status | olcli n / f / loss | VW n / f / loss | olcli wall s | VW wall s | olcli's "
             "message |", "| ---: | --- | --- | --- | --- | ---: | ---: | --- |"]
    for r in rows:
        a = " / ".join(fmt(r["olcli"][k]) for k in ("examples", "features", "loss"))
        b = " / ".join(fmt(r["vw"][k]) for k in ("examples", "features", "loss"))
        cmd = r["command"].replace("|", "\\|")
        msg = r["message"].replace("|", "\\|")
        lines.append(f"| {r['id']} | `{cmd}` | {r['status']} | {a} | {b} | {r['olcli_wall']:.2f} | "
                     f"{r['vw_wall']:.2f} | {msg} |")
    refused = collections.Counter(r["message"].removeprefix("Error: ").split(":")[0].split()[0] for r in rows
                                  if r["status"] == "refused")
    lines += ["", "Refused, by the option named first:", "", "| option | lines |", "| --- | ---: |"]
    lines += [f"| `{n}` | {c} |" for n, c in refused.most_common()]
    return lines


def fmt(v):
    return "" if v is None else str(v)


def write_report(out, suite, cbify, floor, started, dsjson=(), oracle=(), olcli_cb=(), olcli_vw=(), wall=()):
    lines = ["# VW's contextual-bandit lines and cbify simulations, VW 9.11.9 (issue 30)", "",
             f"Written by `python -m benchmarks.cb_vs_vw`, run started {started} UTC on this machine "
             "(2 cores shared with other work). VW is the vowpalwabbit Python package 9.11.9 run as "
             "`python -m vowpalwabbit`. The `olcli` columns stay empty until olcli has the reduction: "
             "no number there is invented.", ""]
    if suite:
        fam_count, opt_count, explore, cb_type = classify(suite)
        ran = [r for r in suite if r["rc"] == 0]
        lines += ["## Part 1: VW's own test-suite lines of the CB reductions", "",
                  f"{len(suite)} lines of `core.vwtest.json` enable a CB reduction; VW 9.11.9 ran "
                  f"{len(ran)} of them with exit 0 here.", "",
                  "| family (outermost reduction) | lines |", "| --- | ---: |"]
        lines += [f"| `{f}` | {c} |" for f, c in fam_count.most_common()]
        agree = sum(1 for r in ran if r["ref"]["examples"] is not None
                    and (r["vw"]["examples"], r["vw"]["features"]) == (r["ref"]["examples"], r["ref"]["features"]))
        with_ref = sum(1 for r in ran if r["ref"]["examples"] is not None)
        lines += ["", f"Of the {len(ran)} that ran, {with_ref} have a reference stderr with a summary; "
                  f"{agree} of those print the reference's `number of examples` and `total feature number`.", "",
                  "Exploration rule (lines of `--cb_explore_adf`, `--cbify`, `--cb_explore`):", "",
                  "| rule | lines |", "| --- | ---: |"]
        lines += [f"| `{e}` | {c} |" for e, c in explore.most_common()]
        lines += ["", "`--cb_type` (all lines):", "", "| cb_type | lines |", "| --- | ---: |"]
        lines += [f"| `{e}` | {c} |" for e, c in cb_type.most_common()]
        lines += ["", "All options and how many lines use each (bold: in issue 30's scope):", "",
                  "| option | lines |", "| --- | ---: |"]
        for n, c in opt_count.most_common():
            lines.append(f"| {'**' if n in ISSUE_SCOPE else ''}`{n}`{'**' if n in ISSUE_SCOPE else ''} | {c} |")
        lines += ["", "Per line (n = number of examples, f = total feature number; `ref` = VW's reference stderr "
                  "shipped with the test; wall includes Python start-up):", "",
                  "| id | family | command | rc | VW n | VW f | VW avg loss | ref n | ref f | ref avg loss "
                  "| wall s | olcli n | olcli f | olcli avg loss |",
                  "| ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | --- | --- | --- |"]
        for r in suite:
            cmd = r["command"].replace("|", "\\|")
            note = f" ({r['error']})".replace("|", "\\|") if r["rc"] != 0 and r["error"] else ""
            lines.append(f"| {r['id']} | `{r['family']}` | `{cmd}`{note} | {r['rc']} | {fmt(r['vw']['examples'])} | "
                         f"{fmt(r['vw']['features'])} | {fmt(r['vw']['loss'])} | {fmt(r['ref']['examples'])} | "
                         f"{fmt(r['ref']['features'])} | {fmt(r['ref']['loss'])} | {r['wall']:.2f} |  |  |  |")
    if cbify:
        lines += ["", "## Part 2: cbify simulations on the shared multiclass data", "",
                  "Progressive CB loss = VW's `average loss` under `--cbify` (the fraction of examples whose "
                  "sampled action is not the true class; loss0=0, loss1=1). Wall = whole process, best of "
                  f"the repeats; VW's start-up floor (`python -m vowpalwabbit` on an empty file) was {floor:.2f} s "
                  "and is included in each wall. Targets for olcli: loss <= 1.02 x VW, wall <= 1.0 x VW.", "",
                  "| data | K | command | examples | features | VW CB loss | VW wall s (runs) | olcli CB loss "
                  "| olcli wall s | loss ratio | wall ratio |",
                  "| --- | ---: | --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |"]
        for r in cbify:
            walls = ", ".join(f"{w:.2f}" for w in r["walls"])
            lines.append(f"| {r['data']} | {r['k']} | `{r['command']}` | {fmt(r['vw']['examples'])} | "
                         f"{fmt(r['vw']['features'])} | {fmt(r['vw']['loss'])} | {r['wall']:.2f} ({walls}) "
                         "|  |  |  |  |")
    if dsjson:
        lines += ["", "## Part 3: Decision Service JSON read by olcli.cb_format, checked through VW", "",
                  "Each file is read by `cb_format.read_dsjson` and written back as ADF text; VW runs both. "
                  "VW's text CB label has no weight field, so pdrop's event weight 1/(1-pdrop) (cb_format's "
                  "`CbEvent.weight`) is not in the text: the pdrop line can only agree where the weight does "
                  "not enter the printed numbers. n / f / loss are "
                  "`number of examples`, `total feature number`, `average loss`.", "",
                  "| file | options | VW `--dsjson` n / f / loss | VW on cb_format's text n / f / loss | same |",
                  "| --- | --- | --- | --- | --- |"]
        for r in dsjson:
            a = " / ".join(fmt(r["dsjson"][k]) for k in ("examples", "features", "loss"))
            b = " / ".join(fmt(r["text"][k]) for k in ("examples", "features", "loss"))
            lines.append(f"| {r['file']} | `{r['options']}` | {a} | {b} | {'yes' if a == b else '**no**'} |")
    if oracle:
        same = sum(1 for r in oracle if r["oracle"] == r["vw"])
        lines += ["", "## Part 4: the oracle (tests/naive_cb.py) beside VW 9.11.9", "",
                  "Both with VW's plain learner (`--sgd --power_t 0`; the oracle's `VWPlainSGD`: w += 2·l·weight·"
                  "(y − ŷ)·x, ŷ clipped to the label range for updates, raw scores for ranking). cbify rows use "
                  "VW's per-action index placement (`naive_cb.vw_action_copies`) over features hashed as VW does "
                  f"(`tests/naive.py`). {same} of {len(oracle)} average losses are printed identically. The oracle "
                  "computes in float64 and VW in float32: over thousands of cbify examples a rounding difference "
                  "can flip one sampled action and the two runs then follow different paths (see the full-file "
                  "rows beside the 1000-line ones).", "",
                  "| data | VW options | oracle avg loss | VW avg loss | same |", "| --- | --- | ---: | ---: | --- |"]
        for r in oracle:
            lines.append(f"| {r['what']} | `{r['command']}` | {r['oracle']} | {fmt(r['vw'])} | "
                         f"{'yes' if r['oracle'] == r['vw'] else '**no**'} |")
    if olcli_cb:
        lines += ["", "## Part 5: olcli.cb (Python API, over a Learner) beside VW 9.11.9", "",
                  "2,000 synthetic ADF events (2-4 actions, costs in [-1, 2], logged p in [0.2, 1], every 7th "
                  "unlabelled; seed 5). olcli: `cb.CbExploreAdf` over `Learner(\"gd\", adaptive=0, normalized=0, "
                  "invariant=0, power_t=0, eta=0.1)` (plain; VW `--sgd --power_t 0 -l 0.1`) or `Learner(\"gd\")` "
                  "(default: VW's adaptive, normalized, invariant gd, `-l 0.5`); wall = the event loop after a "
                  "warm-up (no compilation). olcli sums a feature repeated within a line into one (the project's "
                  "rule), VW updates each occurrence: the same for plain SGD, not for the default learner, "
                  "hence the stream without repeats for the default-learner rows. The dr and bag rows run with "
                  "`--noconstant` (a Learner with constant=False): olcli.cb keeps weight copies as prefixed "
                  "namespaces of one Learner, whose single constant row the copies would share. "
                  "VW: the same events as ADF text, wall = the whole `python -m vowpalwabbit` process (start-up "
                  "included). The olcli event loop is a per-event Python loop (parse, score, learn): it shows "
                  "the semantics agree, not the speed the issue asks for.", "",
                  "| events | VW options | olcli n / f / avg loss | VW n / f / avg loss | same | olcli wall s "
                  "| VW wall s |",
                  "| --- | --- | --- | --- | --- | ---: | ---: |"]
        for r in olcli_cb:
            a = f"{r['olcli_examples']} / {r['olcli_features']} / {r['olcli_loss']}"
            b = " / ".join(fmt(r["vw"][k]) for k in ("examples", "features", "loss"))
            lines.append(f"| {r['stream']} | `{r['command']}` | {a} | {b} | {'yes' if a == b else '**no**'} | "
                         f"{r['olcli_wall']:.2f} | {r['vw_wall']:.2f} |")
    if olcli_vw:
        lines += olcli_vw_lines(olcli_vw)
    if wall:
        lines += olcli_vw_wall_lines(wall)
    out.write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vw-tests", type=Path, default=SHARED / "vw_tests")
    ap.add_argument("--data", type=Path, default=SHARED)
    ap.add_argument("--skip-suite", action="store_true")
    ap.add_argument("--skip-cbify", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reuse-json", action="store_true", help="keep parts 1-2 from --json, rerun part 3")
    ap.add_argument("--only-olcli-vw", action="store_true", help="keep parts 1-5 from --json, rerun part 6")
    ap.add_argument("--json", type=Path, default=RESULTS / "cb_vs_vw.json")
    ap.add_argument("--out", type=Path, default=RESULTS / "cb_vs_vw.md")
    args = ap.parse_args()
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    if args.reuse_json or args.only_olcli_vw:
        old = json.loads(args.json.read_text())
        started, suite, cbify, floor = old["started"], old["suite"], old["cbify"], old["floor"]
    else:
        suite = [] if args.skip_suite else run_suite(args.vw_tests)
        cbify, floor = ([], 0.0) if args.skip_cbify else run_cbify(args.data, args.repeats)
    if args.only_olcli_vw:
        old = json.loads(args.json.read_text())
        dsjson, oracle, olcli_cb = old["dsjson"], old["oracle"], old["olcli_cb"]
    else:
        dsjson = run_dsjson(args.vw_tests)
        oracle = run_oracle(args.vw_tests, args.data)
        olcli_cb = run_olcli_cb()
    olcli_vw = run_olcli_vw(args.vw_tests)
    wall = run_olcli_vw_wall()
    args.json.write_text(json.dumps({"started": started, "suite": suite, "cbify": cbify, "floor": floor,
                                     "dsjson": dsjson, "oracle": oracle, "olcli_cb": olcli_cb,
                                     "olcli_vw": olcli_vw, "olcli_vw_wall": wall,
                                     "olcli_vw_started": time.strftime("%Y-%m-%d %H:%M", time.gmtime())},
                                    indent=1))
    write_report(args.out, suite, cbify, floor, started, dsjson, oracle, olcli_cb, olcli_vw, wall)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
