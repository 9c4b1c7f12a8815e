"""The benchmark click log, kept as a command for the README's instructions.

    python benchmarks/make_click_log.py OUT.vw [--lines 1000000] [--seed 7]

The generator lives in ``olcli/datagen.py`` (kind ``click``; same bytes for the same seed
and line count as this script always wrote); this is the same as
``python -m olcli.datagen click --lines N --seed S -o OUT.vw``.
"""

import argparse

from olcli.datagen import DEFAULT_SEED, FULL_LINES, write


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--lines", type=int, default=FULL_LINES["click"])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args()
    write("click", args.out, args.lines, args.seed)


if __name__ == "__main__":
    main()
