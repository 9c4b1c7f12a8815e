"""Multiclass member subsets of the default mixture (stop 44, results in
benchmarks/results/mix_members_multiclass_s44.md): the progressive 0/1 error when only the
members of a subset carry prior weight. The others still learn but weigh 0, and the
members learn independently of the mixture, so the loss is that of a mixture of just the
subset (the prior's other entries kept: 0.7 for gd, 0.1 for the others, renormalised).

Each subset gets a copy of a source tree (SRC: `git archive 3c26c82 olcli | tar -x -C
SRC`, the four-member code) with PRIOR's entries of the other members set to 0, and the
smallest L and the weights taken over the subset only; run under the JIT.

    python run.py [gd,gd_x6 ...]      (no argument: all 15 subsets)"""
import itertools, json, os, re, shutil, subprocess, sys, tempfile
MEMBERS = ("gd", "gd_x6", "gd_x20", "coin")
PRIOR = (0.7, 0.1, 0.1, 0.1)
SRC = os.environ.get("SRC", "/tmp/msub/base")
SETS = {"letter": ("/work/shared/data/letter/train.vw", "--oaa 26"),
        "news20": ("/work/shared/data/news20_bydate/train.vw", "--oaa 20"),
        "gen multiclass": (os.environ.get("GEN", "/tmp/msub/multiclass.vw"), "--oaa 10")}   # GEN: olcli.datagen multiclass --lines 50000

def tree(subset):
    name = "_".join(subset)
    root = os.path.join(os.path.dirname(SRC), f"t_{name}")
    if not os.path.exists(root):
        shutil.copytree(SRC, root, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        path = f"{root}/olcli/engine/mixture.py"
        text = open(path).read()
        prior = tuple(p if m in subset else 0.0 for m, p in zip(MEMBERS, PRIOR))
        text = text.replace("PRIOR = (0.7, 0.1, 0.1, 0.1)", f"PRIOR = {prior!r}")
        old2 = "        out[k] = PRIOR[k] * math.exp(-rate * (scalars[LOSSES + k] - low))\n"
        assert old2 in text
        text = text.replace(old2, "        out[k] = PRIOR[k] * math.exp(-rate * (scalars[LOSSES + k] - low)) if PRIOR[k] > 0.0 else 0.0\n")
        old = ("    low = scalars[LOSSES]\n    for k in range(1, N_MEMBERS):\n"
               "        low = min(low, scalars[LOSSES + k])\n")
        assert old in text
        text = text.replace(old, "    low = math.inf\n    for k in range(N_MEMBERS):\n"
                            "        if PRIOR[k] > 0.0:\n            low = min(low, scalars[LOSSES + k])\n")
        open(path, "w").write(text)
    return root

def run(root, path, flags):
    report = f"{root}/r.json"
    env = dict(os.environ, PYTHONPATH=root, OLCLI_KERNELS="jit")
    subprocess.run([sys.executable, "-m", "olcli", "train", path, "--mix", "-b", "18", *flags.split(),
                    "--loss", "logistic", "--quiet", "--report", report], env=env, check=True, cwd=root)
    return json.load(open(report))["average_loss"]

subsets = [s for r in range(1, 5) for s in itertools.combinations(MEMBERS, r)]
if len(sys.argv) > 1:
    subsets = [tuple(a.split(",")) for a in sys.argv[1:]]
out = {}
for s in subsets:
    root = tree(s)
    out["+".join(s)] = {name: run(root, p, f) for name, (p, f) in SETS.items()}
    print("+".join(s), out["+".join(s)], flush=True)
    json.dump(out, open(os.path.join(os.path.dirname(SRC), "out.json"), "w"), indent=1)
