"""A PostgreSQL database of its own for a run, and outages of it: what a restart or a failover
does to the stack (every connection terminated, new ones refused for a while).

The database is created for the run and dropped after it, so terminating "every connection"
touches only the stack's own, never another user of the same server.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator

import psycopg

SERVER_URL = "postgresql://postgres@127.0.0.1:5432/test"  # the maintenance connection


def _admin(server_url: str) -> psycopg.Connection:
    return psycopg.connect(server_url, autocommit=True, connect_timeout=3)


def answers(server_url: str = SERVER_URL) -> str | None:
    """None if the server answers, else why not (one line)."""
    try:
        _admin(server_url).close()
    except psycopg.OperationalError as exc:
        return str(exc).strip().splitlines()[0]
    return None


def url_of(server_url: str, database: str) -> str:
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{database}"


@contextlib.contextmanager
def fresh_database(server_url: str = SERVER_URL, prefix: str = "desk_run") -> Iterator[str]:
    """A new empty database on the server; yields its URL; dropped afterwards (connections
    still open are closed by the drop)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url_of(server_url, name)
    finally:
        with _admin(server_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def terminate(database_url: str, server_url: str = SERVER_URL) -> int:
    """Terminate every connection to the database `database_url` names; how many there were."""
    name = database_url.rsplit("/", 1)[-1].split("?", 1)[0]
    with _admin(server_url) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    return int(row[0]) if row else 0


@contextlib.contextmanager
def outage(database_url: str, server_url: str = SERVER_URL) -> Iterator[list[int]]:
    """While inside: the database refuses new connections and every open one is terminated
    (again every 0.2 s, for one that slipped in); afterwards it accepts them again. Yields a
    list that receives the count terminated at each sweep."""
    name = database_url.rsplit("/", 1)[-1].split("?", 1)[0]
    with _admin(server_url) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
    # every connection open now is gone before the block runs: nothing done inside it can
    # still reach the database through a connection opened before
    swept: list[int] = [terminate(database_url, server_url)]
    stop = threading.Event()

    def sweep() -> None:
        while not stop.is_set():
            swept.append(terminate(database_url, server_url))
            stop.wait(0.2)

    sweeper = threading.Thread(target=sweep, daemon=True)
    sweeper.start()
    try:
        yield swept
    finally:
        stop.set()
        sweeper.join(5)
        with _admin(server_url) as admin:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')


def wait_for_connections(database_url: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(database_url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
