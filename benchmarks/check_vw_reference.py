"""Check tests/naive_vw.py (pure-Python references of VW's default learner and --coin) against VW.

    python -m benchmarks.check_vw_reference [DATA_DIR] [--only NAME ...] [--no-extra] [--rsqrtss]

DATA_DIR defaults to ../shared/data beside the repo. For every case the script runs VW itself
(the vowpalwabbit package, through its Python API so that the progressive average loss is read at
full precision rather than the 6 decimals VW prints) and the reference over the same file, and
prints:

* VW's average loss, the reference's, and their relative difference;
* max|dp|: the largest absolute difference between VW's per-example predictions (``-p``, printed
  with 6 significant digits) and the reference's;
* sens: how chaotic the run is -- the largest relative change of the reference's own loss when
  every feature value is multiplied by an independent random factor in [1 - 1e-7, 1 + 1e-7]
  (float32 rounding size; two draws). VW computes in float32 and the reference in float64, so
  on a case whose sens is large no float64 reference can agree with VW better than about sens;
* slots: how many of the file's first 20 examples get exactly the weight slots ``vw --audit``
  prints (a hashing mistake shows there, not as a loss difference);
* secs: wall time of the case.

The first block is the brief: VW's test cases 584, 3, 5, 7, 36, 725 (default learner and its
knobs) and 189, 599 (--coin) from vw_tests/INDEX.md, a few more from INDEX.md (578 hinge,
579 poisson, 30 --l1, 680 --l1 --l2), and single-pass logistic and logistic --coin on five
binary datasets. The second block (skip with --no-extra) runs copies of 0002.dat and
0001.dat (labels -1/+1) with importance weights cycling 0.5, 1, 2, 3.5, 0.25, under more flag
combinations than VW's tests exercise.

The reference needs VW's weight slots, so this script reads VW's text format and hashes the way
VW 9 does by default (``--hash strings``; parse_example.cc, hashstring.h):

* a namespace ``|name[:scale]`` has index ``name[0]`` and hash ``hashstring(name, 0)``; the
  default namespace (``| ...``) has index ' ' and hash 0; namespaces that share a first
  character share one feature group, groups in order of first appearance;
* a feature ``name[:value]`` gets ``hashstring(name, namespace hash)``: ``hashstring`` trims
  blanks and, when the name is all decimal digits, returns ``int(name) + seed``, else
  MurmurHash3_x86_32(name, seed) (``--hash all`` would always murmur); ``:value`` alone gets
  namespace hash + a running count; ``name:string`` gets hashstring(string, hashstring(name, ns));
* value = namespace scale * feature value (1 if absent); zero-valued features are dropped;
* then the constant feature (hash 11650396, value 1) unless --noconstant;
* then the -q interactions, in order: for ``-q ab``, for each feature i of a and each feature j
  of b (j from i on when a == b), hash (16777619 * h_i) XOR h_j, value x_i x_j;
* slot = hash mod 2**bits (the stride VW multiplies indices by does not change it). Labels,
  importances and values are rounded to float32, as VW reads them.

Two VW 9.11.9 output facts the columns account for: for --coin, ``-p`` prints the test-time
prediction (sum of the stored W_XT times x, before the example is learned) while the loss VW
reports is that of the progressive prediction, so max|dp| compares -p with the reference's
``predict`` taken before ``learn``; and VW's 1/sqrt(G) is exact (see --rsqrtss).

--rsqrtss adds a column that reruns the default-learner cases with the CPU's ``rsqrtss`` for
1/sqrt(G) (compiled on the fly with the system C compiler, called through ctypes): VW's gd.cc
selects that instruction on SSE2 builds, but the 9.11.9 wheel contains no rsqrtss (nor the Quake
constant of its non-SIMD fallback) and matches the exact 1/sqrt; the column shows how far the
approximation would move the losses.
"""

import argparse
import ctypes
import os
import random
import shlex
import shutil
import struct
import subprocess
import tempfile
import time

from benchmarks import harness
from benchmarks.harness import DATA, vw_workspace
from tests import naive  # the tests' MurmurHash3
from tests import naive_vw

FNV_PRIME = 16777619
T = "vw_tests/train-sets"
# (name, data file relative to DATA_DIR or a generated variant "@name", VW flags)
CASES = [
    ("vw 584 default", f"{T}/0002.dat", ""),
    ("vw 3 --invariant", f"{T}/0002.dat", "--invariant"),
    ("vw 5 --adaptive -q", f"{T}/0002.dat", "--initial_t 1 --adaptive --invariant -q Tf -q ff"),
    ("vw 7 --power_t 0.45", f"{T}/0002.dat", "--power_t 0.45"),
    ("vw 36 0/1 labels", f"{T}/0001.dat", ""),
    ("vw 725 logistic", f"{T}/0001_25.dat", "--loss_function logistic"),
    ("vw 189 --coin", f"{T}/0001.dat", "--coin"),
    ("vw 599 --coin", f"{T}/0002_25.dat", "--coin"),
    ("vw 578 hinge", f"{T}/0002.dat", "--loss_function hinge"),
    ("vw 579 poisson", f"{T}/0002.dat", "--loss_function poisson"),
    ("vw 30 --l1 0.01", f"{T}/0001.dat", "--l1 0.01"),
    ("vw 680 --l1 --l2", f"{T}/0002_25.dat", "--l1 0.001 --l2 0.001"),
]
for _name, _file in [("a9a", "a9a/train.vw"), ("w8a", "w8a/train.shuf42.vw"),
                     ("phishing", "phishing_libsvm/train.vw"), ("covtype20k", "covtype_binary_20k/train.vw"),
                     ("cod_rna", "cod_rna/train.shuf42.vw")]:
    CASES.append((f"{_name} logistic", _file, "--loss_function logistic -b 18"))
    CASES.append((f"{_name} logistic --coin", _file, "--loss_function logistic -b 18 --coin"))
N_BRIEF = len(CASES)
# Importance-weighted copies ("@reg": 0002.dat, "@bin": 0001.dat with labels -1/+1).
EXTRA = [
    ("reg default", "@reg", ""),
    ("reg --normalized", "@reg", "--normalized"),
    ("reg --adaptive", "@reg", "--adaptive"),
    ("reg --sgd", "@reg", "--sgd"),
    ("reg --sgd -l 1", "@reg", "--sgd -l 1"),
    ("reg --normalized --invariant --power_t 0.3", "@reg", "--normalized --invariant --power_t 0.3"),
    ("reg --adaptive --power_t 0.7 -l 0.3", "@reg", "--adaptive --power_t 0.7 -l 0.3"),
    ("reg --initial_t 10", "@reg", "--initial_t 10"),
    ("reg --l2 0.01", "@reg", "--l2 0.01"),
    ("reg quantile tau 0.3", "@reg", "--loss_function quantile --quantile_tau 0.3"),
    ("reg poisson", "@reg", "--loss_function poisson"),
    ("reg --min/max_prediction .3 .6", "@reg", "--min_prediction 0.3 --max_prediction 0.6"),
    ("reg --min_prediction 0.6", "@reg", "--min_prediction 0.6"),
    ("reg --coin", "@reg", "--coin"),
    ("bin logistic", "@bin", "--loss_function logistic"),
    ("bin logistic --l1 0.001", "@bin", "--loss_function logistic --l1 0.001"),
    ("bin logistic --normalized --power_t 0.6", "@bin", "--loss_function logistic --normalized --power_t 0.6"),
    ("bin logistic --coin", "@bin", "--loss_function logistic --coin"),
    ("bin hinge", "@bin", "--loss_function hinge"),
    ("bin hinge --adaptive", "@bin", "--loss_function hinge --adaptive"),
    ("bin classic", "@bin", "--loss_function classic"),
]
WEIGHTS = [0.5, 1.0, 2.0, 3.5, 0.25]


def make_variants(data_dir, tmp):
    """The importance-weighted copies of 0002.dat and 0001.dat the EXTRA cases use."""
    paths = {"@reg": os.path.join(tmp, "reg.dat"), "@bin": os.path.join(tmp, "bin.dat")}
    with open(os.path.join(data_dir, T, "0002.dat")) as src, open(paths["@reg"], "w") as dst:
        for k, line in enumerate(src):
            label, _, rest = line.split(" ", 2)
            dst.write(f"{label} {WEIGHTS[k % 5]} {rest}")
    with open(os.path.join(data_dir, T, "0001.dat")) as src, open(paths["@bin"], "w") as dst:
        for k, line in enumerate(src):
            label, rest = line.split(" ", 1)
            dst.write(f"{'1' if label == '1' else '-1'} {WEIGHTS[k % 5]} {rest}")
    return paths


# ---------------------------------------------------------------------------
# VW text format -> (label, importance, initial, [(slot, value), ...])
# ---------------------------------------------------------------------------

def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def hashstring(name: str, seed: int) -> int:
    """hashstring.h: blanks trimmed; all digits -> the integer plus the seed; else murmur."""
    data = name.encode().strip(bytes(range(0x21)))
    if data.isdigit():
        return int(data) + seed
    return naive.murmur3_32(data, seed & 0xFFFFFFFF)


def parse_float(text: str):
    try:
        return float(text)
    except ValueError:
        return None


def parse_line(line: str, bits: int, interactions, constant=True):
    """One VW text line -> (label, importance, initial, features) with features in VW's order."""
    line = line.rstrip("\n").rstrip("\r")
    bar = line.find("|")
    head = line if bar < 0 else line[:bar]
    if "\t" in head:
        head = head[head.index("\t") + 1:]
    words = head.split()
    if words and (head.endswith(words[-1]) or words[-1].startswith("'")):
        words.pop()  # the tag
    label = f32(float(words[0])) if words else None
    importance = f32(float(words[1])) if len(words) > 1 else 1.0
    initial = f32(float(words[2])) if len(words) > 2 else 0.0
    groups = {}  # namespace index -> [(hash, value)], in order of first appearance like ec.indices
    if bar >= 0:
        for group in line[bar + 1:].split("|"):
            if group[:1] in ("", " ", "\t"):
                index, channel, scale, body = " ", 0, 1.0, group
            else:
                head_token, _, body = group.partition(" ")
                name, _, scale_text = head_token.partition(":")
                index, channel = name[0], hashstring(name, 0)
                scale = f32(float(scale_text)) if scale_text else 1.0
            anonymous = 0
            for token in body.split():
                name, colon, value_text = token.partition(":")
                value, string_value = 1.0, None
                if colon:
                    value = parse_float(value_text)
                    if value is None:
                        string_value, value = value_text, 1.0
                    else:
                        value = f32(value)
                if string_value is not None:
                    h = hashstring(string_value, hashstring(name, channel))
                elif name:
                    h = hashstring(name, channel)
                else:
                    h = channel + anonymous
                    anonymous += 1
                v = f32(scale * value)
                if v != 0:
                    groups.setdefault(index, []).append((h, v))
    if constant:
        groups.setdefault("constant", []).append((naive_vw.CONSTANT_HASH, 1.0))
    mask = (1 << bits) - 1
    features = [(h & mask, v) for group in groups.values() for h, v in group]
    for a, b in interactions:
        first, second = groups.get(a, []), groups.get(b, [])
        for i, (h1, v1) in enumerate(first):
            half = (FNV_PRIME * h1) & 0xFFFFFFFFFFFFFFFF
            for h2, v2 in (second[i:] if a == b else second):
                features.append(((half ^ h2) & mask, f32(v1 * v2)))
    return label, importance, initial, features


def read_examples(path, bits, interactions):
    with open(path) as handle:
        return [parse_line(line, bits, interactions) for line in handle if line.strip()]


# ---------------------------------------------------------------------------
# Flags -> reference learner
# ---------------------------------------------------------------------------

VALUE_FLAGS = {"--power_t": "power_t", "--initial_t": "initial_t", "--l1": "l1", "--l2": "l2", "-l": "learning_rate",
               "--learning_rate": "learning_rate", "--quantile_tau": "quantile_tau",
               "--min_prediction": "min_prediction", "--max_prediction": "max_prediction"}


def parse_flags(flags: str):
    args = shlex.split(flags)
    opts = {"bits": 18, "interactions": [], "loss": "squared", "switches": set(), "values": {}}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-b":
            opts["bits"] = int(args[i + 1])
            i += 2
        elif a == "-q":
            opts["interactions"].append((args[i + 1][0], args[i + 1][1]))
            i += 2
        elif a == "--loss_function":
            opts["loss"] = args[i + 1]
            i += 2
        elif a in ("--adaptive", "--normalized", "--invariant", "--sgd", "--coin"):
            opts["switches"].add(a[2:])
            i += 1
        elif a in VALUE_FLAGS:
            opts["values"][VALUE_FLAGS[a]] = float(args[i + 1])
            i += 2
        else:
            raise ValueError(f"flag not handled: {a}")
    return opts


def make_reference(opts, inv_sqrt=naive_vw.exact_inv_sqrt):
    sw, val = opts["switches"], dict(opts["values"])
    loss_options = {"quantile_tau": val.pop("quantile_tau")} if "quantile_tau" in val else {}
    if "coin" in sw:
        return naive_vw.VWCoin(loss=opts["loss"], min_prediction=val.get("min_prediction"),
                               max_prediction=val.get("max_prediction"), **loss_options)
    chosen = {}
    if sw & {"adaptive", "normalized", "invariant", "sgd"}:
        chosen = {k: k in sw for k in ("adaptive", "normalized", "invariant", "sgd")}
    return naive_vw.VWGradientDescent(loss=opts["loss"], inv_sqrt=inv_sqrt, **chosen, **val, **loss_options)


def run_reference(examples, learner, printed="progressive"):
    """Progressive average loss, and the predictions VW's -p would print: the progressive ones,
    or for --coin (``printed="test-time"``) what ``predict`` gives before the example is learned."""
    total_loss = total_weight = 0.0
    predictions = []
    for label, importance, initial, features in examples:
        before = learner.predict(features, initial) if printed == "test-time" else None
        p = learner.learn(features, label, importance, initial)
        predictions.append(p if before is None else before)
        total_loss += importance * learner.loss(p, label)
        total_weight += importance
    return total_loss / total_weight, predictions


def sensitivity(examples, opts, draws=2, size=1e-7):
    """Largest relative change of the reference's loss under random relative perturbations
    of the feature values of the given size (float32 rounding scale)."""
    base = run_reference(examples, make_reference(opts))[0]
    worst = 0.0
    for seed in range(1, draws + 1):
        rnd = random.Random(seed)
        shaken = [(label, imp, ini, [(j, v * (1.0 + size * (2.0 * rnd.random() - 1.0))) for j, v in feats])
                  for label, imp, ini, feats in examples]
        worst = max(worst, abs(run_reference(shaken, make_reference(opts))[0] - base) / abs(base))
    return worst


# ---------------------------------------------------------------------------
# VW itself
# ---------------------------------------------------------------------------

def run_vw(path, flags, tmp):
    """VW's progressive average loss at full precision (Python API) and its -p predictions."""
    preds = os.path.join(tmp, "vw.pred")
    ws = vw_workspace(f"-d {shlex.quote(path)} {flags} --quiet -p {shlex.quote(preds)}")
    ws.run_parser()
    loss = ws.get_sum_loss() / ws.get_weighted_examples()
    ws.finish()
    with open(preds) as handle:
        predictions = [float(line.split()[0]) for line in handle if line.strip()]
    return loss, predictions


def check_slots(path, opts, examples, tmp, lines=20):
    """Compare our slots with those `vw --audit` prints for the first lines: (agreeing, compared)."""
    head = os.path.join(tmp, "head.vw")
    with open(path) as src, open(head, "w") as dst:
        for _ in range(lines):
            line = src.readline()
            if not line:
                break
            dst.write(line)
    flags = ["-b", str(opts["bits"])] + [f"-q{a}{b}" for a, b in opts["interactions"]]
    done = harness.run_vw(["-d", head, "--audit", "--quiet", *flags], separate_stderr=True)
    audited = [line for line in done.output.splitlines() if line.startswith("\t")]
    good = 0
    for k, line in enumerate(audited):
        # each item: name:slot:value:weight[@G]
        vw_slots = sorted(int(item.split(":")[-3]) for item in line.strip("\t").split("\t"))
        good += vw_slots == sorted(slot for slot, _ in examples[k][3])
    return good, len(audited)


# ---------------------------------------------------------------------------
# rsqrtss through ctypes
# ---------------------------------------------------------------------------

RSQRT_C = """
#include <xmmintrin.h>
float hw_rsqrt(float x) { return _mm_cvtss_f32(_mm_rsqrt_ss(_mm_set_ss(x))); }
"""


def hardware_rsqrt(tmp):
    """The CPU's rsqrtss as a Python callable, or None without a C compiler / on non-x86."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src, lib = os.path.join(tmp, "rsqrt.c"), os.path.join(tmp, "rsqrt.so")
    with open(src, "w") as handle:
        handle.write(RSQRT_C)
    if subprocess.run([cc, "-O2", "-msse", "-shared", "-fPIC", src, "-o", lib], capture_output=True).returncode:
        return None
    fn = ctypes.CDLL(lib).hw_rsqrt
    fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
    return lambda x: fn(x) if x < 3.4e38 else 0.0


# ---------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data_dir", nargs="?", default=DATA)
    parser.add_argument("--only", nargs="*", help="run the cases whose name contains one of these")
    parser.add_argument("--no-extra", action="store_true", help="only the cases of the brief")
    parser.add_argument("--rsqrtss", action="store_true",
                        help="add a column: the default learner with the CPU's rsqrtss for 1/sqrt(G)")
    args = parser.parse_args()
    cases = CASES if args.no_extra else CASES + EXTRA
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        variants = make_variants(args.data_dir, tmp)
        rsqrt = hardware_rsqrt(tmp) if args.rsqrtss else None
        header = (f"{'case':42} {'VW loss':>10} {'reference':>10} {'rel diff':>9} {'max|dp|':>8} {'sens':>8}"
                  + (f" {'rsqrtss':>10} {'rel diff':>9}" if rsqrt else "") + "  slots  secs")
        print(header)
        for k, (name, rel, flags) in enumerate(cases):
            if args.only and not any(o in name for o in args.only):
                continue
            if k == N_BRIEF:
                print("-- importance-weighted copies of 0002.dat (reg) and 0001.dat with -1/+1 labels (bin)")
            path = variants.get(rel) or os.path.join(args.data_dir, rel)
            opts = parse_flags(flags)
            coin = "coin" in opts["switches"]
            start = time.time()
            examples = read_examples(path, opts["bits"], opts["interactions"])
            good, audited = check_slots(path, opts, examples, tmp)
            vw_loss, vw_preds = run_vw(path, flags, tmp)
            ref_loss, ref_preds = run_reference(examples, make_reference(opts),
                                                "test-time" if coin else "progressive")
            sens = sensitivity(examples, opts)
            rel_diff = (ref_loss - vw_loss) / abs(vw_loss)
            line = (f"{name:42} {vw_loss:10.6f} {ref_loss:10.6f} {rel_diff:9.1e} "
                    f"{max(abs(a - b) for a, b in zip(vw_preds, ref_preds)):8.1e} {sens:8.1e}")
            if rsqrt:
                if not coin:
                    hw_loss = run_reference(examples, make_reference(opts, inv_sqrt=rsqrt))[0]
                    line += f" {hw_loss:10.6f} {(hw_loss - vw_loss) / abs(vw_loss):9.1e}"
                else:
                    line += f" {'':10} {'':9}"
            line += f"  {good:2}/{audited:<2} {time.time() - start:5.0f}"
            print(line, flush=True)
            rows.append((k < N_BRIEF, abs(rel_diff), sens))
    brief = [r for r in rows if r[0]]
    if brief:
        print(f"\nlargest |relative difference| on the brief's cases: {max(r[1] for r in brief):.1e}")
    steady = [r for r in rows if r[2] < 1e-5]
    if steady:
        print(f"largest |relative difference| on all cases with sens < 1e-5: {max(r[1] for r in steady):.1e}")


if __name__ == "__main__":
    main()
