"""The CB server's own work per event, for an A/B of two checkouts run one after the other:

    PYTHONPATH=<checkout> python benchmarks/cb_serve_own_ab.py M0 EVENTS

``CbServing.reply_lines`` of a rank line then a reward line (what ``olcli serve`` runs for them, no
sockets; the client's JSON is outside the timed part), the events of benchmarks/cb_serve.py's simulated
users (the user's preferred item costs -1, others 0), after 500 warm-up events. Prints this process's
CPU per event (``time.process_time_ns`` around the two calls) and the wall p50/p99: CPU is the number
to compare on a loaded machine. M0: a model ``benchmarks/cb_serve.py`` trained (its ``--work``/m0.olm)."""
import json
import os
import sys
import time
import types

import numpy as np

import olcli
from benchmarks.cb_serve import Users
from olcli.engine import jit
from olcli.serve_cb import CbServing

m0, N = sys.argv[1], int(sys.argv[2])
class Log:
    def client_error(self, *a, **k): raise RuntimeError(f"refused {a} {k}")
served = types.SimpleNamespace(options=types.SimpleNamespace(learn=True, cb_pending=10000), generation=0,
                               stats=types.SimpleNamespace(requests=0, examples=0, learned=0), log=Log(), diverged=False)
serving = CbServing(served, 1)
serving.use(olcli.load(m0).learner)
world = Users(50, 8, 4)
reqs = []
for n in range(N + 500):
    user, shared = world.context()
    reqs.append((user, json.dumps({"shared": shared, "actions": world.actions}, separators=(",", ":")).encode() + b"\n"))
costs = [world.cost(u, (7 * u) % 8) for u, _ in reqs]
def run(lo, hi, times):
    cpu = 0
    for n in range(lo, hi):
        user, line = reqs[n]
        c0 = time.process_time_ns(); t0 = time.perf_counter_ns()
        r = serving.reply_lines(line)
        t1 = time.perf_counter_ns(); c1 = time.process_time_ns()
        ranked = json.loads(r)
        rw = b'{"event_id":"%s","cost":%s}\n' % (ranked["event_id"].encode(), repr(costs[n] if ranked["action"] == (7 * user) % 8 else 0.0).encode())
        c2 = time.process_time_ns(); t2 = time.perf_counter_ns()
        serving.reply_lines(rw)
        t3 = time.perf_counter_ns(); c3 = time.process_time_ns()
        cpu += (c1 - c0) + (c3 - c2)
        if times is not None:
            times.append(((t1 - t0) + (t3 - t2)) / 1e3)
    return cpu
run(0, 500, None)
times = []
cpu = run(500, N + 500, times)
print(f"{os.environ['PYTHONPATH'].split(':')[0]:28s} mode {jit.MODE} rank+reward: CPU {cpu / N / 1e3:6.1f} us/event, wall p50 {np.median(times):6.1f} p99 {np.percentile(times, 99):7.1f} us; load {os.getloadavg()[0]:.1f}")
