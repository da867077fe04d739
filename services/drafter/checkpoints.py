"""Where threads are checkpointed: SQLite under var/ by default, PostgreSQL when configured."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver

from shared.db import private_dir, private_sqlite_file


def postgres_url(database_url: str | None) -> str | None:
    """A libpq URL if `database_url` names PostgreSQL (SQLAlchemy driver suffixes removed)."""
    if not database_url:
        return None
    scheme, sep, rest = database_url.partition("://")
    if not sep or scheme.split("+", 1)[0] not in ("postgresql", "postgres"):
        return None
    return f"postgresql://{rest}"


@contextlib.asynccontextmanager
async def open_checkpointer(
    database_url: str | None, var_dir: Path
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    url = postgres_url(database_url)
    if url is not None:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(url) as saver:
            await saver.setup()  # idempotent
            yield saver
        return
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    # threads hold the tickets' text: a private directory, a 0600 file before SQLite opens it
    path = private_sqlite_file(private_dir(Path(var_dir)) / "drafter-checkpoints.sqlite")
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        yield saver
