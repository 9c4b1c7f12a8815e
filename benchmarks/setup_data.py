"""What the speed benchmarks share: their command line and their data files.

bench_vs_vw.py and float32_state.py take ``--runs``, ``--data`` (the folder holding
sst2/ and a9a/, by default ../shared/data next to the repository) and ``--work``
(where the generated files are kept between runs). Generated data comes from
``olcli.datagen`` (see benchmarks/README.md).
"""

import argparse
import os
import sys
import tempfile

from olcli import datagen

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = datagen.DEFAULT_SEED


def parse_arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "olcli-bench"))
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return args


def click_log(args: argparse.Namespace, lines: int) -> str:
    """The generated click log of ``lines`` lines (fixed seed), made on first use."""
    return generated(args, "click", lines, f"clicks_{lines // 1_000_000}m.vw")


def generated(args: argparse.Namespace, kind: str, lines: int | None = None, name: str | None = None) -> str:
    """The ``olcli.datagen`` file of ``kind`` (its full size unless ``lines``, the fixed
    seed), made on first use. The generator writes a temporary file and renames it, so an
    interrupted run leaves nothing that would be taken for the finished file."""
    lines = datagen.FULL_LINES[kind] if lines is None else lines
    path = os.path.join(args.work, name or f"{kind}_{lines}.vw")
    if not os.path.exists(path):
        print(f"generating {path} ...", file=sys.stderr)
        datagen.write(kind, path, lines, seed=SEED)
    return path


def shared_file(args: argparse.Namespace, dataset: str) -> str:
    return os.path.join(args.data, dataset, "train.vw")


def require(files) -> None:
    """Exit with a message naming the missing files of (label, path) pairs."""
    missing = [path for _, path in files if not os.path.exists(path)]
    if missing:
        sys.exit(f"missing data: {', '.join(missing)}; pass --data DIR (the folder holding sst2/ and a9a/)")
