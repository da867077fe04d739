"""Development credentials for the embedded stack, created once and reused.

`var/dev-credentials.json` (mode 0600): a Standard Webhooks secret per demo source, a reviewer
token, a viewer token and the daily report's token (counts only), a NATS password per service,
the user and password the nodes of an embedded cluster (`DESK_NATS_NODES` > 1) authenticate
their routes with, and the inbox's audit key (`DESK_AUDIT_KEY`: which auto-sent replies are
audited). Production takes these from Secrets, never from this file.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path
from typing import Any

from shared.permissions import ADMIN, USERS

from .natsserver import NatsServerError, RouteAuth

FILENAME = "dev-credentials.json"
DEMO_SOURCES = ("helpdesk", "email")


def _webhook_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def nats_passwords() -> dict[str, str]:
    """One NATS user per service and outside role (`shared.catalog`), plus `admin` for
    provisioning and operator commands."""
    return {user: secrets.token_urlsafe(24) for user in (ADMIN, *USERS)}


def nats_route() -> dict[str, str]:
    """The cluster's route user and password (the nodes' `cluster { authorization }`)."""
    auth = RouteAuth.generate()
    return {"user": auth.user, "password": auth.password}


def generate() -> dict[str, Any]:
    return {
        "webhook_secrets": {source: _webhook_secret() for source in DEMO_SOURCES},
        "reviewer_token": secrets.token_urlsafe(32),
        "viewer_token": secrets.token_urlsafe(32),
        "report_token": report_token(),
        "nats_passwords": nats_passwords(),
        "nats_route": nats_route(),
        "audit_key": audit_key(),
    }


def audit_key() -> str:
    return secrets.token_urlsafe(32)


def report_token() -> str:
    return secrets.token_urlsafe(32)


# Added to a file written by an older version, which lacks them.
_ADDED_LATER = {
    "nats_passwords": nats_passwords,
    "nats_route": nats_route,
    "audit_key": audit_key,
    "report_token": report_token,
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
        missing = [key for key in _ADDED_LATER if key not in existing]
        for key in missing:  # written by an older version: add what is new
            existing[key] = _ADDED_LATER[key]()
        users = existing["nats_passwords"]
        new_users = [u for u in nats_passwords() if u not in users]  # a role added since
        for user in new_users:
            users[user] = secrets.token_urlsafe(24)
        if missing or new_users:
            path.write_text(json.dumps(existing, indent=2) + "\n")
        return path
    with os.fdopen(fd, "w") as out:
        json.dump(generate(), out, indent=2)
        out.write("\n")
    return path


def route_auth(var_dir: Path) -> RouteAuth:
    """The route user and password of the embedded cluster of the stack in `var_dir`."""
    path = load_or_create(var_dir)
    entry = json.loads(path.read_text()).get("nats_route")
    if not isinstance(entry, dict) or not entry.get("user") or not entry.get("password"):
        raise NatsServerError(f'{path}: "nats_route" needs a "user" and a "password"')
    try:
        return RouteAuth(str(entry["user"]), str(entry["password"]))
    except NatsServerError as exc:
        raise NatsServerError(f"{path}: nats_route: {exc}") from None
