"""The bad-input campaign at CI size: hostile, forged and malformed requests against the real
stack's ingress and inbox API; every invariant line must say PASS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def test_bad_input_gets_no_5xx_no_crash_no_forgery_and_publishes_nothing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "chaos.badinput", "--examples", "60", "--seed", "11"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
    )
    out = done.stdout
    verdicts = [line for line in out.splitlines() if line.startswith(("PASS ", "FAIL "))]
    assert done.returncode == 0, f"{out}\n--- stderr ---\n{done.stderr[-4000:]}"
    assert len(verdicts) >= 6, out
    assert all(line.startswith("PASS ") for line in verdicts), out
    assert "INFO counts: inputs tried" in out
    assert "PASS no accepted insider operation: 0 accepted" in out  # the insider group ran
    assert "badinput: OK" in out
