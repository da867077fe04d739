"""Operator commands that need the broker name it or find the running stack: with neither they
say so and exit 2, never falling back to a broker that happens to listen on the default port."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services_running import ROOT


@pytest.mark.parametrize(
    "command",
    [
        ["results", "tail", "--count", "1", "--timeout", "2"],
        ["dlq", "list"],
        ["reconcile", "--stale"],
        ["report"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_without_a_stack_says_so(tmp_path: Path, command: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env["DESK_VAR_DIR"] = str(tmp_path / "var")
    done = subprocess.run(
        [sys.executable, "-m", "desk", *command],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "no running stack found" in done.stderr and "DESK_NATS_URL" in done.stderr
    assert "Traceback" not in done.stderr
