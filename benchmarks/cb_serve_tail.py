"""Where the CB serve round trip's p99 tail sits in time: per-event times of served runs, each
followed by the line protocol's transport floor (a fixed-reply server on the loop's reader
callback), with the events over 1 ms counted by tenth of the run.

    python -m benchmarks.cb_serve_tail      (after python -m benchmarks.cb_serve, whose M0 it serves)

Slow events spread evenly would be the server's own work; slow events in bursts that the floor's
runs show too are the machine's (another process, the kernel's own threads)."""
import os
import sys

import numpy as np

from benchmarks import cb_serve as cs
args = cs.arguments()
os.makedirs(args.work, exist_ok=True)
m0 = os.path.join(args.work, "m0.olm")
if not os.path.exists(m0):
    sys.exit(f"no {m0}: run python -m benchmarks.cb_serve first")
for k in range(int(os.environ.get("RUNS", "3"))):
    r = cs.served_run(args, m0, f"probe{k}", False)
    t = r["times"]
    f, _ = cs.floor(args.work, cs.Users(args.users, args.actions, 3), args.events, cs.FLOORS[list(cs.FLOORS)[1]])
    for name, x in (("served", t), ("floor", f)):
        slow = np.nonzero(x > 1000)[0]
        deciles = np.bincount(slow * 10 // len(x), minlength=10)
        print(f"run {k} {name}: p50 {np.percentile(x,50):.0f} p99 {np.percentile(x,99):.0f} max {x.max():.0f} "
              f">1ms {len(slow)} by decile {deciles.tolist()} first-100 p99 {np.percentile(x[:100],99):.0f} "
              f"without first 500: p99 {np.percentile(x[500:],99):.0f}; load {os.getloadavg()[0]:.2f}", flush=True)
    print(f"  served identical: {r['same']}", flush=True)
