from __future__ import annotations

import json
import stat
from pathlib import Path

from desk import credentials


def test_created_once_private_and_reused(tmp_path: Path) -> None:
    path = credentials.load_or_create(tmp_path / "var")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = json.loads(path.read_text())
    assert first["webhook_secrets"]["helpdesk"].startswith("whsec_")
    assert len(first["reviewer_token"]) >= 32 and first["viewer_token"] != first["reviewer_token"]

    again = credentials.load_or_create(tmp_path / "var")
    assert again == path
    assert json.loads(path.read_text()) == first
