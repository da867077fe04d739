"""Development credentials for the embedded stack, created once and reused.

`var/dev-credentials.json` (mode 0600): a Standard Webhooks secret per demo source, a reviewer
token and a viewer token. Production takes these from Secrets, never from this file.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

from shared.permissions import ADMIN, SERVICES

FILENAME = "dev-credentials.json"
DEMO_SOURCES = ("helpdesk", "email")


def _webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def nats_passwords() -> dict[str, str]:
    """One NATS user per service, plus `admin` for provisioning and operator commands."""
    return {user: secrets.token_urlsafe(24) for user in (ADMIN, *SERVICES)}


def generate() -> dict[str, Any]:
    return {
        "webhook_secrets": {source: _webhook_secret() for source in DEMO_SOURCES},
        "reviewer_token": secrets.token_urlsafe(32),
        "viewer_token": secrets.token_urlsafe(32),
        "nats_passwords": nats_passwords(),
    }


def load_or_create(var_dir: Path) -> Path:
    """The credentials file's path; created with fresh secrets on the first run only."""
    path = Path(var_dir) / FILENAME
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)
        existing = json.loads(
            path.read_text()
        )  # a corrupt file is an error to fix, not to overwrite
        if "nats_passwords" not in existing:  # written by an older version: add what is new
            existing["nats_passwords"] = nats_passwords()
            path.write_text(json.dumps(existing, indent=2) + "\n")
        return path
    with os.fdopen(fd, "w") as out:
        json.dump(generate(), out, indent=2)
        out.write("\n")
    return path
