"""The fault suite at CI size: the real stack under kills, a broker restart, LLM and channel
outages, with a seeded workload of conversations (second messages, answers in the helpdesk,
closes, stale scans); every invariant line must say PASS. test_chaos_cluster.py runs the broker
as three nodes and the state in PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 150  # seconds; a run here settles in 30-80

INVARIANTS = (
    "terminal",
    "no open item",
    "outbox",
    "one reply per round",
    "approved rounds",
    "nothing sent once withdrawn",
    "conversations",
    "stale scans",
    "dead letters",
    "consumers drained",
    "duplicates",
    "faults",
)


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def run_small(variant: list[str]) -> None:
    """One CI-size run; each run has its own test file, so parallel workers split them."""
    # chaos's own deadline comes first, so that a run that never settles still prints its
    # PASS/FAIL lines (which invariant, which thread still running) instead of being cut off by
    # the subprocess's or pytest's timeout (the test's timeout, below, is longer than both)
    size = ["--events", "40", "--seed", "7", "--deadline", str(DEADLINE)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "chaos", *size, *variant],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=DEADLINE + 90,  # the report and the teardown after the deadline
        )
    except subprocess.TimeoutExpired as hung:  # what it printed, with its threads' stacks
        pytest.fail(f"chaos overstayed its deadline:\n{_text(hung.stdout)}\n{_text(hung.stderr)}")
    out = done.stdout
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert done.returncode == 0, f"{out}\n--- stderr ---\n{done.stderr[-4000:]}"
    names = [line.split(" ", 1)[1].split(":", 1)[0] for line in verdicts]
    assert names == [*INVARIANTS, *(["replicas"] if "--cluster" in variant else [])], out
    assert all(line.startswith("PASS ") for line in verdicts), out
    assert "chaos: OK" in out


@pytest.mark.timeout(DEADLINE + 120)
def test_chaos_small_run_keeps_every_invariant() -> None:
    run_small([])
