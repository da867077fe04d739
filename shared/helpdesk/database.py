"""The `sql` source's database: its engine (SQLite or PostgreSQL) and its failures as errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import StaticPool
from sqlmodel import create_engine

from ..db import private_sqlite_file
from ..errors import TransientError


@contextlib.contextmanager
def mapped_errors() -> Iterator[None]:
    """Database failures become `TransientError`, naming the driver's error (not the SQL)."""
    try:
        yield
    except SQLAlchemyError as exc:
        origin = getattr(exc, "orig", None) or exc
        lines = str(origin).strip().splitlines()
        detail = f": {lines[0][:200]}" if lines else ""
        raise TransientError(f"source database error: {type(origin).__name__}{detail}") from exc


def engine(url: str, connect_args: dict[str, Any] | None) -> Engine:
    parsed: URL = make_url(url)
    args = dict(connect_args or {})
    options: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")  # psycopg 3, not psycopg2
    if parsed.get_backend_name() == "sqlite":
        args.setdefault("check_same_thread", False)
        database = parsed.database or ""
        if database in ("", ":memory:") or "mode=memory" in url:
            options["poolclass"] = StaticPool  # one connection, or each thread sees its own db
        elif not database.startswith("file:"):
            private_sqlite_file(Path(database))  # customer data: 0600 before SQLite opens it
    elif parsed.get_backend_name() == "postgresql":
        args.setdefault("connect_timeout", 5)
    return create_engine(parsed, connect_args=args, **options)
