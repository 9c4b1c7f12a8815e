"""Parse-only and learn-only time per token on the text and click generators, in one process.

    python -m benchmarks.text_speed [--rounds 3] [--data DIR] [--text-lines N] [--click-lines N]

Parse-only: ``parsing.parse_chunk`` (the ``parse_chunk`` kernel) over the file's chunks
(``inputs.read_chunks``, 2 MiB, read once beforehand), the learner's own feature spec
(``--hash strings``, logistic labels, -b 18). Learn-only: ``Learner.process`` on the
already-parsed batches (the pool's row lookup and the algorithm's ``run_chunk``), a fresh
learner per round. Times are CPU seconds of the calling thread (time.thread_time: the kernels run on it; steadier than wall on a shared machine), the minimum over ``--rounds`` after a warm-up call; tokens
are VW's feature count (the constant included), as olcli's report counts them.
"""

import argparse
import os
import tempfile
import time

from benchmarks.harness import generated, load_average


def chunks_of(path):
    from olcli.inputs import read_chunks

    return list(read_chunks([path]))


def parse_all(chunks, learner):
    from olcli.parsing import parse_chunk

    spec, kind = learner.feature_spec, learner.label_kind
    m = learner.model
    return [parse_chunk(c, "vw", m.bits, m.constant, kind, spec) for c in chunks]


def time_parse(chunks, learner, rounds):
    parse_all(chunks[:1], learner)  # warm-up
    best = float("inf")
    for _ in range(rounds):
        t = time.thread_time()
        parsed = parse_all(chunks, learner)
        best = min(best, time.thread_time() - t)
    tokens = sum(int(p.feature_count[:p.n_examples].sum()) for p in parsed)
    return best, tokens, parsed


def time_learn(make, parsed, rounds):
    from olcli.parsing import batch_of

    make().process(batch_of(parsed[0]), True)  # warm-up
    best = float("inf")
    for _ in range(rounds):
        learner = make()
        batches = [batch_of(p) for p in parsed]
        t = time.thread_time()
        for b in batches:
            learner.process(b, True)
        best = min(best, time.thread_time() - t)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "olcli-throughput"))
    parser.add_argument("--text-lines", type=int, default=200_000)
    parser.add_argument("--click-lines", type=int, default=1_000_000)
    parser.add_argument("--algorithms", default="mix,gd,ftrl,coin,scinol2")
    args = parser.parse_args()
    from olcli import Learner
    import olcli

    print(f"olcli from {os.path.dirname(olcli.__file__)}; load {load_average()}")
    for kind, lines in (("text", args.text_lines), ("click", args.click_lines)):
        path = generated(args.data, kind, lines)
        chunks = chunks_of(path)
        size = sum(len(c.data) for c in chunks)
        base = Learner(loss="logistic", bits=18)
        parse_s, tokens, parsed = time_parse(chunks, base, args.rounds)
        print(f"{kind} {lines} lines, {size / 1e6:.1f} MB, {tokens} tokens: parse {parse_s:.3f} s = "
              f"{tokens / parse_s / 1e6:.1f} M tokens/s, {parse_s / tokens * 1e9:.1f} ns/token, "
              f"{size / parse_s / 1e6:.0f} MB/s")
        for name in filter(None, args.algorithms.split(",")):
            learn_s = time_learn(lambda: Learner(name, loss="logistic", bits=18), parsed, args.rounds)
            print(f"  learn --{name}: {learn_s:.3f} s = {tokens / learn_s / 1e6:.1f} M tokens/s, "
                  f"{learn_s / tokens * 1e9:.1f} ns/token")
    print(f"load {load_average()}")


if __name__ == "__main__":
    main()
