"""Files only their owner may read: what `desk shadow` and `desk eval` write quotes customers'
tickets and the drafts made for them, so it is created 0600 (also over an older file with wider
permissions) in a directory this makes 0700."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable and writable by its owner only."""
    path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), PRIVATE_FILE)  # an older file keeps its mode through O_CREAT
        out.write(text)
