"""SQLite files hold customer data: the var directory is 0700 and every database 0600, from the
first byte (whatever the umask), and a wider file or directory of an older install is tightened
when a service opens it."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from services.drafter.checkpoints import open_storage
from shared.db import PrivatePathError, database_url, make_engine, private_dir
from shared.helpdesk.sql import SqlSource


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The common 022: without the fix, new files would be 0644 and directories 0755."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def companions(db: Path) -> list[Path]:
    return [p for p in (db.with_name(db.name + s) for s in ("-wal", "-shm")) if p.exists()]


def write_rows(url: str) -> None:
    """What a service does on start: tables, then writes (which make the -wal and -shm files)."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE IF NOT EXISTS items (body TEXT)"))
            connection.execute(text("INSERT INTO items VALUES ('a customer''s mail')"))
        with engine.connect() as connection:  # still open: the WAL files are there
            assert connection.execute(text("SELECT count(*) FROM items")).scalar()
            db = Path(url.removeprefix("sqlite:///"))
            wal = companions(db)
            assert len(wal) == 2, "WAL mode: -wal and -shm beside the database"
            assert [mode(p) for p in wal] == [0o600, 0o600]
    finally:
        engine.dispose()


def test_a_new_var_dir_and_its_databases_are_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    url = database_url(None, var, "inbox")
    write_rows(url)
    assert mode(var) == 0o700
    assert mode(var / "inbox.sqlite") == 0o600


def test_an_older_install_is_tightened_at_start(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir(mode=0o755)
    os.chmod(var, 0o755)
    db = var / "sender.sqlite"
    old = sqlite3.connect(db)  # an older version, still running: its WAL files are there
    try:
        old.execute("PRAGMA journal_mode=WAL")
        old.execute("CREATE TABLE items (body TEXT)")
        old.commit()
        assert len(companions(db)) == 2
        for each in (db, *companions(db)):
            os.chmod(each, 0o644)

        write_rows(database_url(None, var, "sender"))  # checks the -wal and -shm files

        assert mode(var) == 0o700
        assert mode(db) == 0o600
    finally:
        old.close()


async def test_the_drafters_checkpoints_are_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    var.mkdir()
    old = var / "drafter-checkpoints.sqlite"
    old.touch()
    os.chmod(old, 0o644)  # from an older install
    os.chmod(var, 0o755)

    async with open_storage(None, var) as storage:
        saver = storage.checkpointer
        assert await saver.aget_tuple({"configurable": {"thread_id": "t1"}}) is None  # tables
        assert mode(var) == 0o700
        assert mode(old) == 0o600
        assert [mode(p) for p in companions(old)] == [0o600, 0o600]

    fresh = tmp_path / "fresh"
    async with open_storage(None, fresh) as storage:
        await storage.checkpointer.aget_tuple({"configurable": {"thread_id": "t1"}})
        assert mode(fresh) == 0o700
        assert mode(fresh / "drafter-checkpoints.sqlite") == 0o600
        assert mode(fresh / "drafter-memory.sqlite") == 0o600  # what reviewers sent


def test_the_demo_helpdesk_is_private(tmp_path: Path) -> None:
    db = tmp_path / "var" / "helpdesk.sqlite"
    source = SqlSource(f"sqlite:///{db}")
    try:
        source.create_tables()
        assert source.seed_demo()
    finally:
        source.engine.dispose()
    assert mode(db.parent) == 0o700, "a directory made for it is private"
    assert mode(db) == 0o600


def test_a_database_configured_elsewhere_leaves_its_directory_alone(tmp_path: Path) -> None:
    shared_dir = tmp_path / "srv"
    shared_dir.mkdir()
    os.chmod(shared_dir, 0o755)  # someone else's directory: not ours to close
    write_rows(f"sqlite:///{shared_dir / 'desk.sqlite'}")
    assert mode(shared_dir) == 0o755
    assert mode(shared_dir / "desk.sqlite") == 0o600


def test_a_shared_directory_is_refused_not_closed(tmp_path: Path) -> None:
    like_tmp = tmp_path / "tmp"
    like_tmp.mkdir()
    os.chmod(like_tmp, 0o1777)
    with pytest.raises(PrivatePathError, match="shared directory"):
        private_dir(like_tmp)
    assert stat.S_IMODE(like_tmp.stat().st_mode) == 0o1777
