"""SQL engines: SQLite files under var/ by default, PostgreSQL when DESK_DATABASE_URL says so.

Services use sync SQLModel sessions from worker threads (`asyncio.to_thread`); the unique
constraints in their tables, not read-then-write checks, are what stop duplicates.

The SQLite files hold customer data (tickets, drafts, replies): every opener goes through
`private_sqlite_file`, which creates the file 0600 before SQLite opens it (SQLite gives its
-wal and -shm files the database's mode) and tightens one an older install left wider; the var
directory itself is made 0700 by `private_dir`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import create_engine

from .settings import ConfigError

log = logging.getLogger("desk.db")

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# What SQLite keeps beside a database file (WAL mode, or a rollback journal).
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


class PrivatePathError(ConfigError):
    """A directory that must not be made private (shared by others): the setting is wrong."""


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner may list or enter (0700).

    Created (with any missing parents) if it is missing; tightened if it exists wider (the var
    directory of an older install). A shared directory such as /tmp (sticky bit) is refused
    rather than closed to everyone else.
    """
    path = Path(path)
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    mode = path.stat().st_mode
    if mode & stat.S_ISVTX:
        raise PrivatePathError(
            f"{path} is a shared directory (sticky bit, like /tmp): give the desk a directory "
            "of its own (DESK_VAR_DIR), e.g. a subdirectory of it"
        )
    if stat.S_IMODE(mode) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    return path


def private_sqlite_file(path: Path) -> Path:
    """Make the SQLite database `path` readable and writable by its owner only (0600).

    A missing file is created empty with 0600 (SQLite takes an empty file as an empty database,
    and creates its -wal and -shm files with the database's mode); an existing one, and the
    companions an older install left beside it, are tightened. A missing directory is created
    0700; an existing one is left as it is (a database may be configured anywhere; the var
    directory is made private by `private_dir`).
    """
    path = Path(path).expanduser()
    if not path.parent.is_dir():
        private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    except FileExistsError:
        pass
    else:
        os.fchmod(fd, PRIVATE_FILE)  # whatever the umask
        os.close(fd)
    for each in (path, *(path.with_name(path.name + s) for s in SQLITE_COMPANIONS)):
        _tighten(each)
    return path


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if not mode & 0o077:
        return
    try:
        os.chmod(path, mode & 0o700)
    except PermissionError:  # not ours: say so, don't stop a read-only use of it
        log.warning("cannot make %s private: it is mode %o and owned by another user", path, mode)


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names; None for another database, an in-memory one or a `file:`
    URI (whose options SQLite interprets)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    if parsed.query.get("mode") == "memory":
        return None
    return Path(database)


def database_url(configured: str | None, var_dir: Path, name: str) -> str:
    """`configured` with a psycopg driver for PostgreSQL, or `var/<name>.sqlite` (and then the
    var directory is made private: 0700)."""
    if configured:
        scheme, sep, rest = configured.partition("://")
        if sep and scheme in ("postgresql", "postgres"):
            return f"postgresql+psycopg://{rest}"
        return configured
    path = (private_dir(Path(var_dir)) / f"{name}.sqlite").resolve()
    return f"sqlite:///{path}"


def make_engine(url: str) -> Engine:
    connect_args: dict[str, Any] = {}
    if url.startswith("sqlite"):
        connect_args = {"check_same_thread": False, "timeout": 30}
        path = sqlite_path(url)
        if path is not None:
            private_sqlite_file(path)
    elif url.startswith("postgresql"):
        connect_args = {"connect_timeout": 5}
    # A server restart drops pooled connections: each checkout pings first. A SQLite file has
    # no connection to lose, and the ping would be one more statement per transaction.
    sqlite = url.startswith("sqlite")
    engine = create_engine(url, connect_args=connect_args, pool_pre_ping=not sqlite)
    if sqlite:

        @event.listens_for(engine, "connect")
        def _wal(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    return engine


async def reachable(engine: Engine, timeout: float = 2.0) -> bool:
    """Whether the database answers now (for /readyz): a pooled connection runs `SELECT 1`
    within `timeout` seconds (the pool's pre-ping replaces a connection a restart dropped)."""
    import asyncio

    from sqlalchemy import text

    def ping() -> bool:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return True

    return await asyncio.wait_for(asyncio.to_thread(ping), timeout)


# SQLite's OperationalError also means "no such table" or a syntax error; only these say the
# file is busy or out of reach for now.
_SQLITE_OUTAGE = ("database is locked", "database is busy", "unable to open", "disk i/o error")


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) says the database cannot be reached or used right now:
    a refused or dropped connection, a server shutting down or restarting, a pool with no
    connection to lend, a locked SQLite file. Such a failure is a reason to wait, never to give
    up on the work (see shared.consumer)."""
    import sqlite3

    import sqlalchemy.exc as sa_exc

    try:
        import psycopg
        import psycopg_pool
    except ImportError:  # pragma: no cover - psycopg is a dependency
        psycopg = psycopg_pool = None  # type: ignore[assignment]
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, sa_exc.TimeoutError):  # no pooled connection in time
            return True
        if isinstance(current, sqlite3.OperationalError):
            return any(part in str(current).lower() for part in _SQLITE_OUTAGE)
        if psycopg is not None and isinstance(
            current, psycopg.OperationalError | psycopg.InterfaceError | psycopg_pool.PoolTimeout
        ):
            return True
        if isinstance(current, sa_exc.DBAPIError):
            current = current.orig  # the driver's own error decides
            continue
        current = current.__cause__ or current.__context__
    return False


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


def add_missing_indexes(engine: Engine, tables: list[Any]) -> list[str]:
    """Create the indexes a table gained since its database was created (`create_all` makes
    them only with a new table); returns the name of each one created."""
    from sqlalchemy import inspect

    inspector = inspect(engine)
    created: list[str] = []
    for table in tables:
        if not inspector.has_table(table.name):
            continue
        present = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in present:
                index.create(bind=engine, checkfirst=True)
                created.append(str(index.name))
    return created


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


def delete_before(
    engine: Engine, table: Any, when: Any, before: Any, *where: Any, batch: int = 500
) -> int:
    """Delete the rows of `table` whose `when` is earlier than `before` (and that meet `where`),
    `batch` rows per short transaction so that no writer waits long; how many."""
    from sqlalchemy import delete, select

    key = next(iter(table.primary_key.columns))
    deleted = 0
    while True:
        chosen = select(key).where(when < before, *where).limit(batch).scalar_subquery()
        with engine.begin() as connection:
            n = connection.execute(delete(table).where(key.in_(chosen))).rowcount
        deleted += n
        if n < batch:
            return deleted


def archiving(
    archive: Callable[[Engine, dt.datetime], Any], engine: Engine, days: float
) -> Callable[[], Awaitable[None]]:
    """A periodic pass: `archive` deletes what finished more than `days` ago."""

    async def archive_pass() -> None:
        before = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
        await asyncio.to_thread(archive, engine, before)

    return archive_pass


def log_deleted(log: logging.Logger, before: Any, counts: dict[str, int]) -> None:
    """One line for an archive pass that deleted anything: how many of each kind."""
    if any(counts.values()):
        log.info(
            "archive: deleted what finished before %s: %s",
            before.date().isoformat(),
            ", ".join(f"{n} {k}" for k, n in counts.items() if n),
        )


def insert_once(engine: Engine, *rows: Any) -> bool:
    """Insert `rows` (SQLModel rows) in one transaction; False, and nothing written, if a
    UNIQUE key says one of them exists already: the idempotency of a handler that may run
    twice, or on two replicas at once.

    As Core INSERTs of the rows' column values (`insert_row`): the ORM's unit of work cost
    several times the CPU for rows nothing else is done with."""
    from sqlalchemy.exc import IntegrityError

    try:
        with engine.begin() as connection:
            for row in rows:
                if row is not None:
                    insert_row(connection, row)
    except IntegrityError:
        return False
    return True


def insert_row(connection: Connection, row: Any) -> None:
    """One Core INSERT of a SQLModel row's column values (a value left None takes the
    column's default); an IntegrityError if a UNIQUE key has it already."""
    from sqlalchemy import insert

    table = row.__table__
    values = {c.name: value for c in table.columns if (value := getattr(row, c.name)) is not None}
    connection.execute(insert(table), values)
