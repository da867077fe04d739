"""Child processes a benchmark starts: wait until they answer, read their CPU time, stop them."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from desk.process import die_with_parent, terminate

ROOT = Path(__file__).resolve().parents[1]
_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessError(RuntimeError):
    pass


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def rss_mib(pid: int) -> float | None:
    """Resident memory of a process, MiB (Linux /proc); None once it has gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class Child:
    """A Python module run as `python -m <module> …` with its output sent to a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args = args
        self.env = env
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, ready_url: str, timeout: float = 30.0) -> Child:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", *self.args],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ProcessError(f"{' '.join(self.args)} exited: {self.tail()}")
            try:
                with urllib.request.urlopen(ready_url, timeout=1) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.stop()
        raise ProcessError(f"{' '.join(self.args)} not ready at {ready_url}: {self.tail()}")

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is not None:
            terminate(self.proc, timeout)
