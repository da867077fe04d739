"""The bad-input campaign at CI size: hostile, forged and malformed requests against the real
stack's ingress and inbox API, hostile ticket text drafted by a model that obeys it, the inbox's
web forms, and claims made with the drafter's credentials; every invariant line must say PASS."""

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
    # the prompt-level, web forms and claims groups ran, and held
    for verdict in (
        "PASS every prompt-level input drafted",
        "PASS no other customer's data in a prompt or draft",
        "PASS no hostile draft auto-sent",
        "PASS no claimed identity believed",
    ):
        assert verdict in out, out
    assert "auto-send on for 6/6 categories" in out, out
    assert " web/decide " in out and " ingress/prompt " in out, out
    assert "badinput: OK" in out
