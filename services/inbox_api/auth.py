"""Reviewer tokens: stored as sha256 digests, compared in constant time, mapped to a name/role.

A `reporter` token (the reconciler's daily report) is no reviewer's: `authenticate` and
`by_digest` (the API, the web login, sessions) never return it, only `reporter` does, which the
counts endpoint alone asks. So leaking it shows how many items wait, never what a customer wrote.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from shared.settings import ReviewerConfig

from .store import Reviewer


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Reviewers:
    def __init__(self, configured: list[ReviewerConfig]) -> None:
        self._entries = [
            (bytes.fromhex(r.token_sha256), Reviewer(r.name, r.role, tuple(r.queues)))
            for r in configured
        ]
        self._configured = list(configured)

    @property
    def queues(self) -> list[str]:
        """Every queue some reviewer works, each once."""
        return list(dict.fromkeys(q for r in self._configured for q in r.queues))

    def mentions(self) -> dict[str, list[str]]:
        """Per queue, the Slack member ids of its reviewers who asked to hear when an item of
        theirs passes its target."""
        found: dict[str, list[str]] = {}
        for entry in self._configured:
            for queue in entry.queues:
                if entry.notify and entry.notify not in found.setdefault(queue, []):
                    found[queue].append(entry.notify)
        return found

    @classmethod
    def load(cls, configured: list[ReviewerConfig], var_dir: Path) -> Reviewers:
        """The configured reviewers, or the development tokens `desk up` wrote."""
        if configured:
            return cls(configured)
        try:
            creds = json.loads((Path(var_dir) / "dev-credentials.json").read_text())
        except (OSError, ValueError):
            return cls([])
        dev = []
        for key, role in (
            ("reviewer_token", "reviewer"),
            ("viewer_token", "viewer"),
            ("report_token", "reporter"),
        ):
            if creds.get(key):
                dev.append(ReviewerConfig(name=role, role=role, token_sha256=digest(creds[key])))  # type: ignore[arg-type]
        return cls(dev)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def authenticate(self, token: str | None) -> Reviewer | None:
        """The reviewer or viewer `token` belongs to; None for a reporter's or an unknown one."""
        found = self._lookup(token)
        return found if found is not None and found.role != "reporter" else None

    def reporter(self, token: str | None) -> Reviewer | None:
        """The reporter `token` belongs to (it may read counts only), or None."""
        found = self._lookup(token)
        return found if found is not None and found.role == "reporter" else None

    def _lookup(self, token: str | None) -> Reviewer | None:
        if not token:
            return None
        return self._find(hashlib.sha256(token.encode()).digest())

    def by_digest(self, token_sha256: str) -> Reviewer | None:
        """The reviewer a token digest (hex) belongs to now, or None if it is not configured."""
        try:
            presented = bytes.fromhex(token_sha256)
        except ValueError:
            return None
        found = self._find(presented)
        return found if found is not None and found.role != "reporter" else None

    def _find(self, presented: bytes) -> Reviewer | None:
        found = None
        for stored, reviewer in self._entries:  # every entry compared, in constant time
            if hmac.compare_digest(presented, stored):
                found = reviewer
        return found


def bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
