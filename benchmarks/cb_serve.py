"""``olcli serve`` of a contextual-bandit model: the round trip rank -> reward on loopback, and what
the server learned against ``olcli train`` on the logged events (issue 30's serving targets).

    python -m benchmarks.cb_serve [--events 10000] [--actions 8] [--http]

A model M0 is trained first (``olcli train --cb-explore-adf --epsilon 0.1`` on 200 simulated events);
then ``olcli serve -i M0 --learn -f SERVED --cb-seed 1`` runs as a subprocess and one client on
127.0.0.1 plays ``--events`` events one after another: ``rank`` (a JSON line with the user's shared
features and ``--actions`` actions), the simulated user's cost of the action the server sampled
(-1 when it is the user's preferred item, with probability 0.9, else 0), ``reward``. The round trip is
the wall time from sending the rank to reading the reward's reply (both on one connection of the line
protocol; ``--http``: also on a second server over HTTP/1.1 keep-alive, ``POST /rank`` then ``POST
/reward``). Every event is logged as VW's ADF text (shared line, action lines, the label
``action:cost:probability`` on the played action with the probability the server returned); after the
stop (SIGTERM: the final save) SERVED is compared byte for byte with ``olcli train -i M0
--cb-explore-adf -d LOG -f REF``.

Side by side, in the same run: the transport's floors, servers that answer each JSON line with a fixed
JSON line (two such round trips per event, the same client): an asyncio ``Protocol`` (asyncio's socket
transport, which reads up to 256 KiB at a time), the loop's reader callback with ``recv`` (64 KiB) and
``send`` on the non-blocking socket (what olcli's line protocol runs on, olcli/serve_lines.py), and one
thread with blocking ``recv`` (64 KiB) and ``sendall``, each with its CPU per event; the client's own
work per event (its JSON encoding and decoding of the same requests and replies, no sockets); the
server's own work per event (the line protocol's rank and reward lines through
``CbServing.reply_lines``, the code the server runs, in one process without sockets), and the Python
API's (``CbLearner.ranking_of`` + ``learn_event``), each with this process's CPU per event.
"""

import argparse
import asyncio  # noqa: F401  (the floor server's code runs in its own interpreter)
import http.client
import json
import os
import random
import socket
import sys
import time

import numpy as np

from benchmarks import harness
from benchmarks.serve_vs_vw import Process, percentiles

FLOOR_SERVER = r"""
import asyncio, sys
class Fixed(asyncio.Protocol):
    def connection_made(self, t):
        self.t = t
        t.get_extra_info("socket").setsockopt(6, 1, 1)
    def data_received(self, data):
        self.t.write(b'{"event_id":"abc-1","action":3,"probability":0.9125,"pmf":[0.0125,0.0125,0.0125,0.9125,0.0125,0.0125,0.0125,0.0125]}\n' * data.count(b"\n"))
async def main():
    server = await asyncio.get_running_loop().create_server(Fixed, "127.0.0.1", 0)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.sockets[0].getsockname()[1]))
    await asyncio.Event().wait()
asyncio.run(main())
"""
REPLY = (b'{"event_id":"abc-1","action":3,"probability":0.9125,"pmf":[0.0125,0.0125,0.0125,0.9125,0.0125,0.0125,'
         b'0.0125,0.0125]}\n')
READER_SERVER = r"""
import asyncio, socket, sys
async def main():
    loop = asyncio.get_running_loop()
    listening = socket.create_server(("127.0.0.1", 0))
    listening.setblocking(False)
    with open(sys.argv[1], "w") as f:
        f.write(str(listening.getsockname()[1]))
    def readable(c):
        data = c.recv(65536)
        if not data:
            loop.remove_reader(c.fileno())
            c.close()
            return
        c.send(%r * data.count(b"\n"))
    def accept():
        c, _ = listening.accept()
        c.setsockopt(6, 1, 1)
        c.setblocking(False)
        loop.add_reader(c.fileno(), readable, c)
    loop.add_reader(listening.fileno(), accept)
    await asyncio.Event().wait()
asyncio.run(main())
""" % REPLY
BLOCKING_SERVER = r"""
import socket, sys
listening = socket.create_server(("127.0.0.1", 0))
with open(sys.argv[1], "w") as f:
    f.write(str(listening.getsockname()[1]))
while True:
    c, _ = listening.accept()
    c.setsockopt(6, 1, 1)
    while True:
        data = c.recv(65536)
        if not data:
            break
        c.sendall(%r * data.count(b"\n"))
    c.close()
""" % REPLY
FLOORS = {"asyncio Protocol (asyncio's socket transport)": FLOOR_SERVER,
          "the loop's reader callback, recv/send (olcli's line protocol)": READER_SERVER,
          "one thread, blocking recv/sendall": BLOCKING_SERVER}


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--actions", type=int, default=8)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--http", action="store_true", help="also the same over HTTP (needs olcli[serve])")
    parser.add_argument("--work", default=os.path.join("/tmp", "olcli-bench-cb-serve"))
    parser.add_argument("--out", default="cb_serve")
    parser.add_argument("--wait-for-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="wait up to this long for the 1-minute load average to fall below 2 before starting")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    return args


class Users:
    """The simulated world: user u prefers item (7u mod K); its features, the items' features."""

    def __init__(self, users, actions, seed):
        self.rnd = random.Random(seed)
        self.users, self.k = users, actions
        self.actions = [f"|a item{j} kind{j % 3} price:{1 + j % 4}" for j in range(actions)]

    def context(self):
        user = self.rnd.randrange(self.users)
        return user, f"|u user{user} region{user % 5} age:{20 + user % 40}"

    def cost(self, user, action):
        liked = action == (7 * user) % self.k
        return -1.0 if liked and self.rnd.random() < 0.9 else 0.0


def adf(shared, actions, chosen, cost, probability) -> str:
    lines = ["shared " + shared]
    lines += [(f"{j}:{cost!r}:{probability!r} " if j == chosen else "") + a for j, a in enumerate(actions)]
    return "\n".join(lines) + "\n\n"


class LineClient:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def ask(self, doc: dict) -> dict:
        self.sock.sendall(json.dumps(doc, separators=(",", ":")).encode() + b"\n")
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        if line.startswith(b"error:"):
            raise RuntimeError(line.decode())
        return json.loads(line)


class HttpClient:
    def __init__(self, port):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Content-Type": "application/json"}

    def ask(self, doc: dict) -> dict:
        path = "/rank" if "actions" in doc else "/reward"
        self.connection.request("POST", path, json.dumps(doc, separators=(",", ":")).encode(), self.headers)
        response = self.connection.getresponse()
        reply = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(reply)
        return reply


def play(client, world, events: int, log_path: str) -> np.ndarray:
    """``events`` round trips rank -> reward; returns their times (µs); the log is written as ADF."""
    times = np.empty(events)
    with open(log_path, "w") as log:
        for n in range(events):
            user, shared = world.context()
            started = time.perf_counter_ns()
            ranked = client.ask({"shared": shared, "actions": world.actions})
            cost = world.cost(user, ranked["action"])
            client.ask({"event_id": ranked["event_id"], "cost": cost})
            times[n] = (time.perf_counter_ns() - started) / 1000.0
            log.write(adf(shared, world.actions, ranked["action"], cost, ranked["probability"]))
    return times


def floor(work, world, events, code=FLOOR_SERVER) -> tuple:
    """(round-trip times in µs, the server's CPU µs per event) of a fixed-reply server."""
    port_file = os.path.join(work, "floor.port")
    server = Process([sys.executable, "-c", code, port_file], port_file)
    try:
        client = LineClient(server.port)
        for _ in range(200):
            client.ask({"event_id": "abc-1", "cost": 0.0})
        times = np.empty(events)
        cpu = server.cpu_seconds()
        for n in range(events):
            user, shared = world.context()
            started = time.perf_counter_ns()
            client.ask({"shared": shared, "actions": world.actions})
            client.ask({"event_id": "abc-1", "cost": 0.0})
            times[n] = (time.perf_counter_ns() - started) / 1000.0
        return times, (server.cpu_seconds() - cpu) / events * 1e6
    finally:
        server.stop()


def client_work(world, events) -> tuple:
    """The client's own work per event without sockets: the two requests encoded and two replies
    decoded as ``LineClient.ask`` does. (µs each, this process's CPU µs per event)."""
    times = np.empty(events)
    cpu = time.process_time()
    for n in range(events):
        user, shared = world.context()
        started = time.perf_counter_ns()
        json.dumps({"shared": shared, "actions": world.actions}, separators=(",", ":")).encode() + b"\n"
        json.loads(REPLY.partition(b"\n")[0])
        json.dumps({"event_id": "abc-1", "cost": 0.0}, separators=(",", ":")).encode() + b"\n"
        json.loads(REPLY.partition(b"\n")[0])
        times[n] = (time.perf_counter_ns() - started) / 1000.0
    return times, (time.process_time() - cpu) / events * 1e6


def serving_work(model, world, events) -> np.ndarray:
    """The server's own work per event, no sockets: the rank line and the reward line through
    ``CbServing.reply_lines`` (JSON in and out, ranking, sampling, learning), µs each."""
    import types

    import olcli
    from olcli.serve_cb import CbServing

    class Log:
        def client_error(self, *args, **kwargs):
            raise RuntimeError(f"refused: {args} {kwargs}")

    served = types.SimpleNamespace(options=types.SimpleNamespace(learn=True, cb_pending=10000), generation=0,
                                   stats=types.SimpleNamespace(requests=0, examples=0, learned=0), log=Log(),
                                   diverged=False)
    serving = CbServing(served, 1)
    serving.use(olcli.load(model).learner)
    times = np.empty(events)
    cpu = time.process_time()
    for n in range(events):
        user, shared = world.context()
        started = time.perf_counter_ns()
        ranked = json.loads(serving.reply_lines(json.dumps({"shared": shared, "actions": world.actions},
                                                           separators=(",", ":")).encode() + b"\n"))
        cost = world.cost(user, ranked["action"])
        serving.reply_lines(json.dumps({"event_id": ranked["event_id"], "cost": cost}).encode() + b"\n")
        times[n] = (time.perf_counter_ns() - started) / 1000.0
    return times, (time.process_time() - cpu) / events * 1e6


def in_process(model, world, events) -> np.ndarray:
    """The Python API's work per event: rank (PMF, sample) and learn, µs each."""
    import olcli
    from olcli import cb
    from olcli.cb_format import CbEvent
    from olcli.cb_learner import make_event, sample

    learner = olcli.load(model)
    times = np.empty(events)
    cpu = time.process_time()
    for n in range(events):
        user, shared = world.context()
        started = time.perf_counter_ns()
        event = make_event(shared, world.actions)
        ranking = learner.ranking_of(event)
        pmf = learner.pmf_of(event, ranking)
        action = sample(ranking, cb.merand48(1 + n)[0])
        learner.learn_event(CbEvent(event.shared, event.actions, action, world.cost(user, action), float(pmf[action])))
        times[n] = (time.perf_counter_ns() - started) / 1000.0
    return times, (time.process_time() - cpu) / events * 1e6


def served_run(args, m0, name, http) -> dict:
    work = args.work
    served = os.path.join(work, f"{name}.olm")
    port_file, http_file = os.path.join(work, f"{name}.port"), os.path.join(work, f"{name}.http")
    command = [*harness.OLCLI, "serve", "-i", m0, "--learn", "-f", served, "--save-every", "0", "--cb-seed", "1",
               "--port", "0", "--port-file", port_file]
    if http:
        command += ["--http-port", "0", "--http-port-file", http_file]
    server = Process(command, port_file, http_file if http else None, timeout=600)
    load = os.getloadavg()[0]
    try:
        client = HttpClient(server.http_port) if http else LineClient(server.port)
        log_path = os.path.join(work, f"{name}.ldf")
        cpu = server.cpu_seconds()
        times = play(client, Users(args.users, args.actions, 2), args.events, log_path)
        cpu = server.cpu_seconds() - cpu
    finally:
        server.stop()
    ref = os.path.join(work, f"{name}-ref.olm")
    harness.run_olcli(["train", "--cb-explore-adf", "-i", m0, "-d", log_path, "-f", ref, "--quiet"], timeout=3600)
    same = open(served, "rb").read() == open(ref, "rb").read()
    return {"times": times, "same": same, "load": load, "load_after": os.getloadavg()[0],
            "cpu_us": cpu / args.events * 1e6}


def main():
    args = arguments()
    deadline = time.monotonic() + args.wait_for_quiet
    while os.getloadavg()[0] >= 2.0 and time.monotonic() < deadline:
        time.sleep(10)
    results = harness.Results(args.out, "olcli serve: contextual-bandit round trip (rank, then reward)")
    world = Users(args.users, args.actions, 1)
    warm = os.path.join(args.work, "warm.ldf")
    with open(warm, "w") as f:
        for _ in range(200):
            user, shared = world.context()
            action = world.rnd.randrange(args.actions)
            f.write(adf(shared, world.actions, action, world.cost(user, action), 1.0 / args.actions))
    m0 = os.path.join(args.work, "m0.olm")
    harness.run_olcli(["train", "--cb-explore-adf", "--epsilon", "0.1", "-d", warm, "-f", m0, "--quiet"],
                      timeout=3600)
    runs = {"line protocol": served_run(args, m0, "line", False)}
    results.note_load()
    if args.http:
        runs["HTTP"] = served_run(args, m0, "http", True)
        results.note_load()
    floors = {name: floor(args.work, Users(args.users, args.actions, 3), args.events, code)
              for name, code in FLOORS.items()}
    results.note_load()
    client = client_work(Users(args.users, args.actions, 3), args.events)
    own = serving_work(m0, Users(args.users, args.actions, 4), args.events)
    api = in_process(m0, Users(args.users, args.actions, 4), args.events)
    results.note_load()

    results.say(f"{args.events:,} events, {args.actions} actions each (ADF, shared + action features), "
                f"{args.users} simulated users; M0: `olcli train --cb-explore-adf --epsilon 0.1` (olcli's default "
                "learner) on 200 events; the server `olcli serve -i M0 --learn -f SERVED --cb-seed 1`, one client, "
                "one event at a time (rank, the user's cost, reward).")
    results.say()
    rows = []
    data = {}
    floor_p = percentiles(floors[next(iter(FLOORS))][0])
    for name, run in runs.items():
        p = percentiles(run["times"])
        ratios = f"{p['p50'] / floor_p['p50']:.2f} / {p['p99'] / floor_p['p99']:.2f}"
        rows.append([f"olcli serve, {name}", f"{p['p50']:.0f}", f"{p['p99']:.0f}", f"{p['p999']:.0f}",
                     f"{p['mean']:.0f}", f"{run['cpu_us']:.0f}", ratios, "**met**" if p["p99"] <= 1000 else "not met",
                     "identical" if run["same"] else "**DIFFERENT**", f"{run['load']:.1f}-{run['load_after']:.1f}"])
        data[name] = {**p, "server_cpu_us_per_event": run["cpu_us"], "model_identical_to_train": run["same"],
                      "vs_floor_p50": p["p50"] / floor_p["p50"], "vs_floor_p99": p["p99"] / floor_p["p99"],
                      "load": [run["load"], run["load_after"]]}
    measured = [(f"floor: fixed-reply server, {name}, 2 JSON round trips", *run) for name, run in floors.items()]
    measured += [("the client's own work (JSON in and out, no sockets)", *client),
                 ("the server's own work in one process (rank + reward lines, no sockets)", *own),
                 ("Python API in one process (ranking_of + learn_event)", *api)]
    for name, times, cpu in measured:
        p = percentiles(times)
        rows.append([name, f"{p['p50']:.0f}", f"{p['p99']:.0f}", f"{p['p999']:.0f}", f"{p['mean']:.0f}", f"{cpu:.0f}",
                     "", ("**met**" if p["p99"] <= 1000 else "not met") if name.startswith("floor") else "", "", ""])
        data[name] = {**p, "cpu_us_per_event": cpu}
    results.table(["per event (µs, wall)", "p50", "p99", "p99.9", "mean", "CPU", "p50 / p99 vs floor",
                   "p99 ≤ 1 ms", "SERVED vs olcli train", "load"], rows, "lrrrrrrrrr")
    results.say()
    results.say("CPU: the server process's CPU time (all threads, the scheduler's count) over the played events, per "
                "event; for the rows run in one process (client, own work, API), this process's. The floors' p50 / "
                "p99 column is against the first floor (asyncio's transport). The wall times include waiting for a "
                "core: on a machine whose load is above its 2 cores, p99 measures the scheduler more than the server.")
    results.say("SERVED vs olcli train: the model the server saved on SIGTERM against `olcli train -i M0 "
                "--cb-explore-adf -d LOG -f REF` on the logged events (ADF text, the probabilities the server "
                "returned), byte for byte.")
    results.data = data
    print(results.write())


if __name__ == "__main__":
    main()
