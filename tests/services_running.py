"""Run a real service process (`python -m desk <service>`) for a test, on free ports: `url` is
its public routes' (ingress, inbox_api), `ops_url` its health and metrics'."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from desk.process import free_port
from tests.forkserver import Forked, spawn

ROOT = Path(__file__).resolve().parents[1]
PORT_ATTEMPTS = 3
STARTED: list[ServiceProcess] = []  # killed after each test (tests/conftest.py) if still running


class ServiceProcess:
    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args = args
        self.port = free_port()
        self.ops_port = free_port()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        self.env.update(env)
        self.env.update(
            {
                "DESK_HTTP_PORT": str(self.port),
                "DESK_OPS_PORT": str(self.ops_port),
                "DESK_LOG_LEVEL": "INFO",
            }
        )
        self.log = log
        self.proc: Forked | subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"

    def start(self, ready: bool = True, timeout: float = 60.0) -> ServiceProcess:
        """Start it and wait until it answers. A port chosen free may be taken by another
        process (a parallel test's) before the service binds it: it then exits saying so, and
        is started again on other ports."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            logged = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as out:
                self.proc = spawn(self.args, env=self.env, stdout=out, stderr=subprocess.STDOUT)
            if self not in STARTED:
                STARTED.append(self)
            try:
                self.wait("/readyz" if ready else "/healthz", timeout)
                return self
            except AssertionError:
                exited = self.proc.poll() is not None
                if not exited or attempt == PORT_ATTEMPTS or not self._port_taken(logged):
                    raise
            self.port, self.ops_port = free_port(), free_port()
            self.env.update({"DESK_HTTP_PORT": str(self.port), "DESK_OPS_PORT": str(self.ops_port)})
        raise AssertionError("unreachable")

    def _port_taken(self, since: int) -> bool:
        with open(self.log, "rb") as log:
            log.seek(since)
            return b"address already in use" in log.read().lower()

    def wait(self, path: str, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        # one client for every poll: each new one builds its TLS context (milliseconds of CPU)
        with httpx.Client(timeout=1) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(
                        f"{self.args} exited {self.proc.returncode}: {self.tail()}"
                    )
                try:
                    if client.get(self.ops_url + path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.05)
        raise AssertionError(f"{self.args} not answering {path}: {self.tail()}")

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()
