"""Web sessions kept server-side, in the inbox's database.

The cookie holds a random id; the database holds only its sha256, so a copy of the database
opens no session. A session lasts `lifetime` seconds from its login however often it is used
(nothing renews it); logging out deletes it, so a copied cookie stops working there and then.
Every request looks the reviewer up again, by the digest of the token the session was opened
with, in the tokens configured now: a token removed from the configuration ends its sessions,
and a changed role (reviewer → viewer) holds from the next request. The CSRF token every form
carries is derived from the id, so it needs no storage and dies with the session.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from . import store
from .auth import Reviewers, digest

COOKIE = "desk_session"
MAX_ID = 128  # ids are 43 characters; a longer cookie is not one of ours


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def key(session_id: str) -> str:
    """What the database stores for a session id."""
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf(session_id: str) -> str:
    return hmac.new(session_id.encode(), b"desk web form", hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class WebSession:
    key: str
    user: store.Reviewer
    csrf: str
    flash: str | None


class Sessions:
    def __init__(
        self,
        engine: Engine,
        reviewers: Reviewers,
        lifetime: float,
        clock: Callable[[], dt.datetime] = _now,
    ) -> None:
        self.engine = engine
        self.reviewers = reviewers
        self.lifetime = dt.timedelta(seconds=lifetime)
        self.clock = clock

    def open(self, token: str) -> str:
        """A new session for a token that authenticated; its id, for the cookie only."""
        now = self.clock()
        store.purge_sessions(self.engine, now - self.lifetime)
        session_id = secrets.token_urlsafe(32)
        store.open_session(self.engine, key(session_id), digest(token), now)
        return session_id

    def find(self, session_id: str | None) -> WebSession | None:
        """The live session with this id and the reviewer it belongs to now, or None (and an
        expired or revoked one is deleted)."""
        if not session_id or len(session_id) > MAX_ID:
            return None
        hashed = key(session_id)
        stored = store.find_session(self.engine, hashed)
        if stored is None:
            return None
        age = self.clock() - stored.created_at
        who = self.reviewers.by_digest(stored.token_sha256)
        if who is None or age >= self.lifetime:
            store.close_session(self.engine, hashed)
            return None
        return WebSession(hashed, who, csrf(session_id), stored.flash)

    def close(self, session_id: str | None) -> None:
        if session_id and len(session_id) <= MAX_ID:
            store.close_session(self.engine, key(session_id))

    def flash(self, session: WebSession, text: str | None) -> None:
        store.set_flash(self.engine, session.key, text)
