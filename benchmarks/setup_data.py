"""What the speed benchmarks share: their command line and their data files.

bench_vs_vw.py and float32_state.py take ``--runs``, ``--data`` (the folder holding
sst2/ and a9a/, by default ../shared/data next to the repository) and ``--work``
(where the generated click logs are kept between runs).
"""

import argparse
import os
import sys
import tempfile

from make_click_log import generate

HERE = os.path.dirname(os.path.abspath(__file__))
CLICK_LOG_SEED = 7


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
    path = os.path.join(args.work, f"clicks_{lines // 1_000_000}m.vw")
    if not os.path.exists(path):
        print(f"generating {path} ...", file=sys.stderr)
        generate(path, lines, seed=CLICK_LOG_SEED)
    return path


def shared_file(args: argparse.Namespace, dataset: str) -> str:
    return os.path.join(args.data, dataset, "train.vw")


def require(files) -> None:
    """Exit with a message naming the missing files of (label, path) pairs."""
    missing = [path for _, path in files if not os.path.exists(path)]
    if missing:
        sys.exit(f"missing data: {', '.join(missing)}; pass --data DIR (the folder holding sst2/ and a9a/)")
