"""``olcli serve``'s options and their checks (``ServeOptions``): every value is checked before
anything is loaded or bound, and a wrong one is a usage error naming its flag."""

from dataclasses import dataclass

from olcli.errors import UsageError
from olcli.paths import check_output

DEFAULT_PORT = 26542
ALL_INTERFACES = ("0.0.0.0", "::", "")   # --host values that listen on every interface (a warning says so)


@dataclass
class ServeOptions:
    model_path: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    port_file: str | None = None
    pid_file: str | None = None
    http_port: int | None = None
    http_port_file: str | None = None
    learn: bool = False
    final_model: str | None = None
    save_every: float = 60.0
    link: str | None = None
    probabilities: bool = False
    max_line_bytes: int = 1 << 20
    max_request_bytes: int = 16 << 20
    max_connections: int = 1000
    idle_timeout: float = 300.0
    workers: int = 1
    log_format: str = "text"
    shutdown_timeout: float = 5.0
    cb_pending: int = 10000          # contextual bandits: events kept waiting for a reward (olcli/serve_cb.py)
    cb_seed: int | None = None       # contextual bandits: the seed of the sampled actions (None: drawn, logged)

    def check(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be 0 to 65535 (got {self.port})")
        if self.http_port is not None and not 0 <= self.http_port <= 65535:
            raise UsageError(f"--http-port must be 0 to 65535 (got {self.http_port})")
        if self.learn and not self.final_model:
            raise UsageError("--learn needs -f/--final-model: where the learned model is saved")
        if self.final_model and not self.learn:
            raise UsageError("-f/--final-model is only for --learn (a prediction server never changes its model)")
        if self.learn and self.workers > 1:
            raise UsageError("--workers is for prediction-only serving: --learn needs one process (one writer)")
        if self.workers < 1:
            raise UsageError(f"--workers must be at least 1 (got {self.workers})")
        if self.save_every < 0:
            raise UsageError(f"--save-every must be >= 0 seconds (0: only on stop; got {self.save_every:g})")
        for flag, value in (("--max-line-bytes", self.max_line_bytes), ("--max-request-bytes", self.max_request_bytes),
                            ("--max-connections", self.max_connections), ("--cb-pending", self.cb_pending)):
            if value < 1:
                raise UsageError(f"{flag} must be at least 1 (got {value})")
        if self.idle_timeout < 0:
            raise UsageError(f"--idle-timeout must be >= 0 seconds (0: none; got {self.idle_timeout:g})")
        if self.cb_seed is not None and not 0 <= self.cb_seed < 1 << 64:
            raise UsageError(f"--cb-seed must be 0 to 2^64 - 1 (got {self.cb_seed})")
        if self.log_format not in ("text", "json"):
            raise UsageError(f"--log-format must be text or json (got {self.log_format!r})")
        for what, path in (("-f/--final-model", self.final_model), ("--port-file", self.port_file),
                           ("--pid-file", self.pid_file), ("--http-port-file", self.http_port_file)):
            if path:
                check_output(path, what)   # a device, FIFO or socket is written in place, never replaced
        if self.http_port_file and self.http_port is None:
            raise UsageError("--http-port-file needs --http-port")
