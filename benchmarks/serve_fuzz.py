"""Schemathesis against ``olcli serve``'s HTTP endpoints, from the server's own OpenAPI
document (``GET /openapi.json``, olcli/serve_openapi.py ``OPENAPI``). Issue 31's target: at least
1,000 generated requests, 0 server errors (5xx), 0 schema violations (status codes, content
types and response bodies as the document says).

Two servers are fuzzed: a predicting one (``--http-port``) and a learning one (``--learn -f``),
so that /learn's 200 is exercised too. Every check Schemathesis has runs, except those about
features the API does not have (authentication, resources created and deleted).

Schemathesis is not an olcli dependency (no test uses it): install it in a separate
environment at benchmark time, so that its pinned Hypothesis does not change olcli's:

    python -m venv /tmp/fuzzvenv && /tmp/fuzzvenv/bin/pip install schemathesis
    python -m benchmarks.serve_fuzz [--examples 300] [--schemathesis /tmp/fuzzvenv/bin/schemathesis]

Results: benchmarks/results/serve_fuzz.json (requests by operation and status, every check
failure; Schemathesis' raw event stream is not kept).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from benchmarks import harness  # noqa: E402
from olcli import datagen  # noqa: E402

# Not applicable: no authentication, no resources created by one call and used by another.
EXCLUDED_CHECKS = ["ignored_auth", "use_after_free", "ensure_resource_availability", "object_level_authorization"]


def start(folder: Path, model: Path, name: str, *args):
    port_file, log_path = folder / f"{name}.http", folder / f"{name}.log"
    log = open(log_path, "wb")
    proc = harness.start_olcli(["serve", "-i", model, "--port", "0", "--http-port", "0", "--http-port-file", port_file,
                                *args], stderr=log)
    deadline = time.monotonic() + 300
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"olcli serve did not start:\n{log_path.read_text()}")
        time.sleep(0.05)
    time.sleep(0.1)
    return proc, int(port_file.read_text()), log_path


def fuzz(schemathesis: str, port: int, examples: int, seed: int, report: Path, cwd: Path) -> dict:
    command = [schemathesis, "run", f"http://127.0.0.1:{port}/openapi.json", "--checks", "all",
               "--exclude-checks", ",".join(EXCLUDED_CHECKS), "--max-examples", str(examples), "--seed", str(seed),
               "--workers", "1", "--request-timeout", "30", "--no-color", "--continue-on-failure",
               "--report", "ndjson", "--report-ndjson-path", str(report), "--generation-database", "none"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600, cwd=cwd)
    seconds = time.monotonic() - started
    requests, statuses, failures, operations = 0, {}, [], {}
    for line in report.read_text().splitlines():
        event = json.loads(line)
        for kind, body in event.items():
            if kind == "ScenarioFinished":
                for case in (body.get("recorder") or {}).get("interactions", {}).values():
                    response = case.get("response") or {}
                    request = case.get("request") or {}
                    operation = f"{request.get('method')} /{request.get('uri', '').split('?')[0].split('/', 3)[-1]}"
                    operations[operation] = operations.get(operation, 0) + 1
                    requests += 1
                    status = str(response.get("status_code"))
                    statuses[status] = statuses.get(status, 0) + 1
                for check in (body.get("recorder") or {}).get("checks", {}).values():
                    for outcome in check:
                        if outcome.get("status") == "FAILURE":
                            failures.append({"check": outcome.get("name"),
                                             "failure": str(outcome.get("failure_info"))[:300]})
    return {"exit_code": done.returncode, "seconds": round(seconds, 1), "requests": requests,
            "statuses": statuses, "operations": dict(sorted(operations.items(), key=lambda kv: -kv[1])),
            "failures": failures[:30], "failure_count": len(failures),
            "summary": done.stdout[-3000:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=300, help="Schemathesis --max-examples per operation")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schemathesis", default=shutil.which("schemathesis") or "/tmp/fuzzvenv/bin/schemathesis")
    parser.add_argument("-o", "--output", default=os.path.join(harness.RESULTS, "serve_fuzz.json"))
    args = parser.parse_args()
    if not os.path.exists(args.schemathesis):
        raise SystemExit("Schemathesis not found: python -m venv /tmp/fuzzvenv && "
                         "/tmp/fuzzvenv/bin/pip install schemathesis (see this script's docstring)")
    version = subprocess.run([args.schemathesis, "--version"], capture_output=True, text=True).stdout.strip()
    results = {"schemathesis": version, "examples_per_operation": args.examples, "seed": args.seed, "servers": {}}
    with tempfile.TemporaryDirectory(prefix="serve-fuzz-") as tmp:
        folder = Path(tmp)
        (folder / "d.vw").write_bytes(datagen.generate("click", 500, seed=3))
        harness.run_olcli(["train", folder / "d.vw", "-f", folder / "m.olm", "--loss", "logistic", "--quiet"])
        for name, extra in (("predict", []), ("learn", ["--learn", "-f", folder / "out.olm", "--save-every", 1])):
            proc, port, log = start(folder, folder / "m.olm", name, *extra)
            try:
                report = folder / f"schemathesis_{name}.ndjson"   # raw events (MBs): not kept
                outcome = fuzz(args.schemathesis, port, args.examples, args.seed, report.resolve(), folder)
            finally:
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(60)
            text = log.read_text(errors="replace")
            outcome["server_exit"] = code
            outcome["server_internal_errors_logged"] = text.count("internal_error")
            outcome["server_tracebacks"] = text.count("Traceback")
            results["servers"][name] = outcome
            print(f"{name}: {outcome['requests']} requests, statuses {outcome['statuses']}, "
                  f"{outcome['failure_count']} check failures, exit {outcome['exit_code']}", flush=True)
    servers = results["servers"].values()
    results["requests"] = sum(s["requests"] for s in servers)
    results["server_errors"] = sum(v for s in servers for k, v in s["statuses"].items() if k.startswith("5"))
    results["check_failures"] = sum(s["failure_count"] for s in servers)
    results["date_utc"] = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    results["commit"] = ((ROOT / "COMMIT").read_text().strip() if (ROOT / "COMMIT").exists() else   # a clean export
                         subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip())
    results["load_average_1_5_15min_at_end"] = [round(v, 2) for v in os.getloadavg()]
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n")
    print(f"{results['requests']} requests, {results['server_errors']} server errors, "
          f"{results['check_failures']} check failures")
    return 0 if results["server_errors"] == 0 and results["check_failures"] == 0 and results["requests"] >= 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
