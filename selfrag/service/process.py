"""``selfrag serve`` as a child process on a free loopback port, for tests and benchmarks: started with
this checkout's code, waited for until ``/readyz`` answers, stopped on exit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CODE_ROOT = Path(__file__).resolve().parents[2]  # the checkout holding selfrag/, programs/, signatures/


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """``with ServeProcess(["--config", path], cwd=tmp) as server: server.url``. The child's output goes
    to ``cwd/serve.log``; ``SELFRAG_*`` variables of this process are not passed on (only ``args`` and
    the config file decide)."""

    def __init__(self, args: list[str], cwd: Path, ready_timeout: float = 300.0):
        self.args = list(args)
        self.cwd = Path(cwd)
        self.ready_timeout = ready_timeout
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.cwd / "serve.log"
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def __enter__(self) -> "ServeProcess":
        env = {k: v for k, v in os.environ.items() if not k.startswith("SELFRAG_")}
        env["PYTHONPATH"] = str(CODE_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "selfrag.cli.app", "serve", "--port", str(self.port),
                                      *self.args], cwd=self.cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.ready_timeout
        while not self._ready():
            if self.proc.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"selfrag serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"selfrag serve was not ready within {self.ready_timeout:g} s:\n{self.log_tail()}")
            time.sleep(0.5)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        self._log.close()
