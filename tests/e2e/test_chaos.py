"""The fault suite at CI size: the real stack under kills, a broker restart, LLM and channel
outages, with a seeded workload; every invariant line must say PASS. The cluster variant runs
the broker as three nodes with R3 streams and kills the node leading the events stream."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("broker", [[], ["--cluster"]], ids=["one-node", "cluster"])
def test_chaos_small_run_keeps_every_invariant(broker: list[str]) -> None:
    size = ["--events", "40", "--seed", "7", "--deadline", "240"]
    done = subprocess.run(
        [sys.executable, "-m", "chaos", *size, *broker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=330,
    )
    out = done.stdout
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert done.returncode == 0, f"{out}\n--- stderr ---\n{done.stderr[-4000:]}"
    assert len(verdicts) >= (7 if broker else 6), out
    assert all(line.startswith("PASS ") for line in verdicts), out
    assert "chaos: OK" in out
