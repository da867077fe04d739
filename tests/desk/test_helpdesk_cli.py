from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.source.sql import SqlSource
from tests.services_running import ROOT


def test_desk_helpdesk_create_adds_a_ticket_to_the_demo_helpdesk(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env["DESK_VAR_DIR"] = str(tmp_path)
    args = [
        "--customer",
        "new.customer@example.com",
        "--subject",
        "Where is my parcel?",
        "--body",
        "Ordered last week, nothing yet.",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "desk", "helpdesk", "create", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("T1042 created")  # after the 41 demo tickets
    source = SqlSource(f"sqlite:///{tmp_path / 'helpdesk.sqlite'}")
    try:
        import asyncio

        ticket = asyncio.run(source.get_ticket("T1042"))
    finally:
        source.engine.dispose()
    assert ticket.subject == "Where is my parcel?" and ticket.status == "open"
