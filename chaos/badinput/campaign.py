"""The stack under test, as the campaign sees it."""

from __future__ import annotations

import itertools
from typing import Any

from .tally import Tally

SOURCES = ("helpdesk", "email")
DEMO_TICKETS = ("T1012", "T1041", "T1003")  # waiting items for the decision fuzz


class Campaign:
    """The stack under test: its URLs and secrets, and what the strategies draw from."""

    def __init__(self, ingress: str, inbox: str, creds: dict[str, Any], seed_: int) -> None:
        self.ingress = ingress
        self.inbox = inbox
        self.secrets: dict[str, str] = creds["webhook_secrets"]
        self.reviewer: str = creds["reviewer_token"]
        self.viewer: str = creds["viewer_token"]
        self.seed = seed_
        self.sequence = itertools.count(1)
        self.tally = Tally()

    def redact(self, text: str) -> str:
        """`text` without any of the stack's secrets (an echoed header must not print one)."""
        for secret in (self.reviewer, self.viewer, *self.secrets.values()):
            text = text.replace(secret, "[secret]")
        return text
