"""A probe: one operation a user tries, declared (a control) or not (must be refused)."""

from __future__ import annotations

from dataclasses import dataclass

PUBLISH, SUBSCRIBE, REQUEST = "publish", "subscribe", "request"
WORD = "insider"  # the token that stands for a wildcard, a new name or a key
KNOWN_GAPS = {  # what the config probes try (all refused now that only the admin creates)
    "filter": "its own durable re-created with a filter outside its declared filters",
    "push": "its own durable re-created as a push consumer delivering to a subject it may "
    "not publish",
}


@dataclass(frozen=True)
class Probe:
    user: str
    kind: str  # PUBLISH, SUBSCRIBE or REQUEST
    subject: str
    what: str
    declared: bool  # a control (must be granted) or a probe (must be refused)
    queue: str = ""
    payload: bytes = b""
    gap: str = ""  # the KNOWN_GAPS entry a REQUEST probe tests

    def __str__(self) -> str:
        queue = f" (queue {self.queue})" if self.queue else ""
        return f"{self.user} {self.kind} {self.subject}{queue}: {self.what}"
