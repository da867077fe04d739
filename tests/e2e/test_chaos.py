"""The fault suite at CI size: the real stack under kills, a broker restart, LLM and channel
outages, with a seeded workload; every invariant line must say PASS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_chaos_small_run_keeps_every_invariant() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chaos", "--events", "40", "--seed", "7", "--deadline", "240"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=330,
    )
    out = done.stdout
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert done.returncode == 0, f"{out}\n--- stderr ---\n{done.stderr[-4000:]}"
    assert len(verdicts) >= 6, out
    assert all(line.startswith("PASS ") for line in verdicts), out
    assert "chaos: OK" in out
