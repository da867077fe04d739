"""The machine's PostgreSQL (127.0.0.1:5432, trust auth, database `test`) for real-database tests.

Each test gets a fresh schema, dropped afterwards, so runs never collide; where no server
answers, the test is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg
import pytest

POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    try:
        admin = psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {POSTGRES_URL}: {str(exc).strip().splitlines()[0]}")
    schema = f"desk_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            yield schema
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def url_in(schema: str) -> str:
    """A libpq URL whose connections use `schema` first."""
    return f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
