"""Sample a running service with py-spy while it is under load, and name its top frames.

Optional: used when py-spy is installed (`pip install py-spy`); nothing else depends on it.

    with Sampler(pid, out_path): ...drive load...
    top_frames(out_path, 15)   # [{frame, self_pct, total_pct}]
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import sysconfig
from collections import Counter
from pathlib import Path
from types import TracebackType


def py_spy() -> str | None:
    return shutil.which("py-spy", path=sysconfig.get_path("scripts")) or shutil.which("py-spy")


class Sampler:
    """`py-spy record --format raw` on `pid` for the duration of the block (GIL-holding samples)."""

    def __init__(self, pid: int, output: Path, rate: int = 250) -> None:
        self.pid = pid
        self.output = output
        self.rate = rate
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Sampler:
        exe = py_spy()
        if exe is None:
            raise RuntimeError("py-spy is not installed (pip install py-spy)")
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(self.pid),
                "--format",
                "raw",
                "--output",
                str(self.output),
                "--rate",
                str(self.rate),
                "--gil",
                "--nonblocking",
                "--function",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        if not self.output.exists():
            print(f"py-spy wrote nothing: {err.decode()[-500:]}", file=sys.stderr)


def top_frames(raw: Path, count: int = 15, by: str = "self") -> list[dict[str, object]]:
    """From py-spy's collapsed stacks: the frames with the most samples (`self` or `total`)."""
    if not raw.exists():
        return []
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, weight = line.rpartition(" ")
        if not stack or not weight.isdigit():
            continue
        n = int(weight)
        samples += n
        frames = [_short(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    if not samples:
        return []
    ranked = own if by == "self" else total
    return [
        {
            "frame": frame,
            "self_pct": round(100 * own[frame] / samples, 1),
            "total_pct": round(100 * total[frame] / samples, 1),
        }
        for frame, _ in ranked.most_common(count)
    ]


def _short(frame: str) -> str:
    """`function (path/to/module.py:12)` → `function (module.py:12)`."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit('/', 1)[-1]}" if where else name
