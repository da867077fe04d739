"""Where the inbox API is and who is asking: the URL and token `desk inbox` uses."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..statefile import STATE_FILE
from .errors import InboxError

CREDENTIALS_FILE = "dev-credentials.json"


def defaults(var_dir: Path) -> tuple[str | None, str | None]:
    """(inbox API URL, dev reviewer token) of the stack running from `var_dir`, where known."""
    url = token = None
    var_dir = Path(var_dir)
    creds_path = var_dir / CREDENTIALS_FILE
    try:
        state = json.loads((var_dir / STATE_FILE).read_text())
        url = state["services"]["inbox_api"]["url"]
        creds_path = Path(state.get("credentials") or creds_path)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        token = json.loads(creds_path.read_text()).get("reviewer_token") or None
    except (OSError, ValueError, AttributeError):
        pass
    return url, token


def connection(args: argparse.Namespace, var_dir: Path) -> tuple[str, str]:
    """The URL and token to use: the options, then the environment, then the running stack."""
    url = getattr(args, "url", None) or os.environ.get("DESK_INBOX_URL")
    token = getattr(args, "token", None) or os.environ.get("DESK_TOKEN")
    if not url or not token:
        stack_url, stack_token = defaults(var_dir)
        url, token = url or stack_url, token or stack_token
    if not url:
        raise InboxError("no running stack found; pass --url or set DESK_INBOX_URL", 2)
    if not token:
        raise InboxError("no reviewer token found; pass --token or set DESK_TOKEN", 2)
    return url.rstrip("/"), token
