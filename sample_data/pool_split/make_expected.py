"""Writes the model files of tests/test_pool_split.py: ``olcli train`` of letter_train.vw with
the multiclass default (mixing 2 members: the pool splits a group in 2), --mix-members 3
(split 3) and 4 (split 1), as a commit whose pool had no split wrote them. Run once from the
root of a checkout of that commit (a ``git worktree``, so that nothing else is in it):

    python sample_data/pool_split/make_expected.py DEST

and copy DEST's files here. expected.json records the commit, and each case's arguments
(the test runs the same ones and compares the file it writes, byte for byte)."""
import json
import os
import subprocess
import sys

DATA = "sample_data/letter_train.vw"
CASES = {
    "letter_oaa26_default": ["--oaa", "26"],
    "letter_softmax26_default": ["--softmax", "26"],
    "letter_oaa26_members3": ["--oaa", "26", "--mix-members", "3"],
    "letter_oaa26_members4": ["--oaa", "26", "--mix-members", "4"],
}
COMMON = ["-b", "10", "--quiet"]

dest = sys.argv[1]
os.makedirs(dest, exist_ok=True)
commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                       check=True).stdout.strip()
if dirty:
    sys.exit(f"the checkout has changes: run this from a clean checkout of the commit\n{dirty}")
for name, arguments in CASES.items():
    subprocess.run([sys.executable, "-m", "olcli", "train", DATA, *arguments, *COMMON, "-f",
                    os.path.join(dest, f"{name}.olm")], check=True)
expected = {"commit": commit, "data": DATA, "common": COMMON, "cases": CASES}
with open(os.path.join(dest, "expected.json"), "w") as out:
    json.dump(expected, out, indent=1)
    out.write("\n")
print(json.dumps(expected, indent=1))
