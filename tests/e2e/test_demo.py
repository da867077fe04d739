"""`desk demo` end to end: the scenario from the README, on a fresh stack of real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services_running import ROOT

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def test_the_demo_scenario(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    done = subprocess.run(
        [sys.executable, "-m", "desk", "demo", "--var-dir", str(tmp_path / "demo")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert '"duplicate":true' in out  # the second T1012 webhook
    lines = {
        line.split()[0]: line
        for line in out.splitlines()
        if line[:2] == "T1" or line.startswith("T9999")
    }
    assert "T1012~v1" in lines["T1012"] and " sent " in lines["T1012"]
    # round two of the same conversation: its own item, its own reply
    assert "T1012~v2" in lines["T1012/2"] and " sent " in lines["T1012/2"]
    assert "customer, agent, customer" in out
    # answered in the helpdesk while its draft waited: withdrawn, never sent
    assert " withdrawn " in lines["T1005"] and "answered in the helpdesk" in lines["T1005"]
    assert "T1041~v2" in lines["T1041"] and " sent " in lines["T1041"]
    assert "Your invoice, with your VAT number" in lines["T1041"]
    assert " ignored" in lines["T1003"]
    assert "dead letter" in lines["T9999"] and "attempts 1" in lines["T9999"]
    assert "does not exist" in lines["T9999"]
    assert "outbox rows: 3; reply.sent events: 3" in out
    assert out.rstrip().endswith("demo: OK")
