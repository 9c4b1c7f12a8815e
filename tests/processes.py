"""Stopping the server processes a test started (shared by the serve tests' fixtures)."""

import signal
import subprocess


def stop_all(processes) -> None:
    """SIGTERM each process still running, wait up to 15 s, then SIGKILL: no server outlives its test."""
    for proc in processes:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(15)
