"""SQL engines: SQLite files under var/ by default, PostgreSQL when DESK_DATABASE_URL says so.

Services use sync SQLModel sessions from worker threads (`asyncio.to_thread`); the unique
constraints in their tables, not read-then-write checks, are what stop duplicates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import create_engine


def database_url(configured: str | None, var_dir: Path, name: str) -> str:
    """`configured` with a psycopg driver for PostgreSQL, or `var/<name>.sqlite`."""
    if configured:
        scheme, sep, rest = configured.partition("://")
        if sep and scheme in ("postgresql", "postgres"):
            return f"postgresql+psycopg://{rest}"
        return configured
    path = (Path(var_dir) / f"{name}.sqlite").resolve()
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    connect_args: dict[str, Any] = {}
    if url.startswith("sqlite"):
        connect_args = {"check_same_thread": False, "timeout": 30}
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    elif url.startswith("postgresql"):
        connect_args = {"connect_timeout": 5}
    engine = create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _wal(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    return engine


def add_missing_columns(engine: Engine, tables: list[Any]) -> list[str]:
    """Add the nullable columns a table gained since its database was created (an inbox or an
    outbox from an earlier release); returns `table.column` for each one added.

    Only additions: a column is never dropped or changed here."""
    from sqlalchemy import inspect, text

    inspector = inspect(engine)
    added: list[str] = []
    with engine.begin() as connection:
        for table in tables:
            if not inspector.has_table(table.name):
                continue
            present = {c["name"] for c in inspector.get_columns(table.name)}
            for column in table.columns:
                if column.name in present:
                    continue
                kind = column.type.compile(dialect=engine.dialect)
                default = ""
                if not column.nullable:
                    default = " DEFAULT " + _literal(column)
                connection.execute(
                    text(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}{default}')
                )
                added.append(f"{table.name}.{column.name}")
    return added


def _literal(column: Any) -> str:
    """A constant for a NOT NULL column added to rows that exist: its default, or empty."""
    default = getattr(column.default, "arg", None)
    if isinstance(default, bool):
        return "TRUE" if default else "FALSE"
    if isinstance(default, int | float):
        return str(default)
    if isinstance(default, str):
        return "'" + default.replace("'", "''") + "'"
    try:
        python = column.type.python_type
    except NotImplementedError:
        python = None
    if python in (int, float):
        return "0"
    if python is bool:
        return "FALSE"
    if python in (dict, list):
        return "'[]'" if python is list else "'{}'"
    return "''"
