"""The rows behind web sessions (`inbox_api.sessions` decides what they mean)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from .tables import SessionRow, as_utc


@dataclass(frozen=True)
class StoredSession:
    token_sha256: str
    created_at: dt.datetime
    flash: str | None


def open_session(engine: Engine, key: str, token_sha256: str, now: dt.datetime) -> None:
    with Session(engine) as session:
        session.add(SessionRow(key=key, token_sha256=token_sha256, created_at=now))
        session.commit()


def find_session(engine: Engine, key: str) -> StoredSession | None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is None:
            return None
        created = as_utc(row.created_at)
        assert created is not None
        return StoredSession(row.token_sha256, created, row.flash)


def close_session(engine: Engine, key: str) -> None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is not None:
            session.delete(row)
            session.commit()


def set_flash(engine: Engine, key: str, text: str | None) -> None:
    with Session(engine) as session:
        row = session.get(SessionRow, key)
        if row is not None and row.flash != text:
            row.flash = text
            session.add(row)
            session.commit()


def purge_sessions(engine: Engine, begun_before: dt.datetime) -> int:
    """Delete the sessions that began before `begun_before` (expired); how many."""
    with Session(engine) as session:
        rows = session.exec(
            select(SessionRow).where(col(SessionRow.created_at) < begun_before)
        ).all()
        for row in rows:
            session.delete(row)
        session.commit()
        return len(rows)
