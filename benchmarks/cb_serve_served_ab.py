"""The CB server's CPU per event, served, for an A/B of checkouts run one after the other:

    python -m benchmarks.cb_serve_served_ab M0 EVENTS CHECKOUT [CHECKOUT ...] [--rounds N]

For each round and each checkout in turn: ``olcli serve -i M0 --learn -f OUT --cb-seed 1`` started from that
checkout (``PYTHONPATH`` = the checkout, working directory /tmp, so that ``python -m olcli`` does not import
the tree it is started from), one client on 127.0.0.1 playing benchmarks/cb_serve.py's simulated users on
the line protocol (rank, the user's cost, reward), 300 warm-up events then EVENTS timed ones; printed: the
server process's CPU per event (``/proc/PID/stat``, user + system) and the round trip's wall p50 / p90 /
p99 with the 1-minute load. CPU is the number to compare on a loaded machine; the wall percentiles
measure the scheduler as soon as the load is above the 2 cores. M0: a model benchmarks/cb_serve.py
trained (its ``--work``/m0.olm)."""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

from benchmarks.cb_serve import LineClient, Users, play


def served(checkout: str, m0: str, events: int, work: str) -> str:
    port_file = os.path.join(work, "ab.port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    env = dict(os.environ, PYTHONPATH=checkout)
    where = subprocess.run([sys.executable, "-c", "import olcli; print(olcli.__file__)"], cwd="/tmp", env=env,
                           capture_output=True, text=True).stdout.strip()
    server = subprocess.Popen([sys.executable, "-m", "olcli", "serve", "-i", m0, "--learn", "-f",
                               os.path.join(work, "ab.olm"), "--save-every", "0", "--cb-seed", "1", "--port", "0",
                               "--port-file", port_file], cwd="/tmp", env=env, stderr=subprocess.DEVNULL)
    try:
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if server.poll() is not None:
                raise RuntimeError(f"the server from {checkout} exited")
            time.sleep(0.05)
        time.sleep(0.3)
        client = LineClient(int(open(port_file).read().split()[0]))
        play(client, Users(50, 8, 9), 300, os.devnull)

        def cpu():
            fields = open(f"/proc/{server.pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        load = os.getloadavg()[0]
        before = cpu()
        times = play(client, Users(50, 8, 2), events, os.devnull)
        used = cpu() - before
        client.sock.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    p50, p90, p99 = np.percentile(times, [50, 90, 99])
    return (f"{where:40s} server CPU {used / events * 1e6:4.0f} us/event; wall p50 {p50:4.0f} p90 {p90:5.0f} "
            f"p99 {p99:5.0f} us; load {load:.1f}-{os.getloadavg()[0]:.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("m0")
    parser.add_argument("events", type=int)
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="cb_serve_ab_")
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            print(served(os.path.abspath(checkout), os.path.abspath(args.m0), args.events, work), flush=True)


if __name__ == "__main__":
    main()
