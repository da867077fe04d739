"""One PostgreSQL role per stateful service (shared/dbroles.py), on the machine's PostgreSQL.

Each test makes its own database and role names with a random prefix (roles are cluster-wide)
and drops them afterwards. The services create their tables with their own code, connected as
their own role; then each role is shown to be shut out of the others' tables. The attack the
roles exist for: a compromised sender (or drafter) inserting an unpublished decision into the
inbox's `inbox_decisions`, which the inbox relay would publish as a reviewer's approval.

Trust authentication (127.0.0.1:5432) checks no password: the roles connect by name, and the
passwords are checked where PostgreSQL stores them (`pg_authid`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import hmac
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import errors

from desk import dbroles as cli
from shared import catalog, dbroles
from shared.db import database_url, make_engine
from shared.passwords import scram_sha256

ROOT = Path(__file__).resolve().parents[2]
DEV_INIT = ROOT / "deploy" / "k8s" / "overlays" / "dev" / "postgres-init" / "roles.sql"
DEV_PASSWORD_DIR = "/etc/desk/db-passwords"  # where overlays/dev/postgres.yaml mounts them
SERVER = "postgresql://{user}@127.0.0.1:5432/{db}"


@dataclass(frozen=True)
class Database:
    name: str
    prefix: str

    def url(self, user: str = "postgres") -> str:
        return SERVER.format(user=user, db=self.name)

    def role(self, service: str) -> dbroles.DbRole:
        return dbroles.role(service, prefix=self.prefix)

    def admin(self) -> psycopg.Connection:
        return psycopg.connect(self.url(), autocommit=True, connect_timeout=3)

    def connect(self, service: str) -> psycopg.Connection:
        return psycopg.connect(self.url(self.role(service).name), autocommit=True)

    def apply(self, statements: list[str]) -> None:
        with self.admin() as admin:
            for statement in statements:
                admin.execute(statement.encode())


@pytest.fixture
def database() -> Iterator[Database]:
    try:
        admin = psycopg.connect(SERVER.format(user="postgres", db="test"), autocommit=True)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at 127.0.0.1:5432: {str(exc).strip().splitlines()[0]}")
    suffix = uuid.uuid4().hex[:10]
    db = Database(name=f"desk_roles_{suffix}", prefix=f"desk_{suffix}_")
    with admin:
        admin.execute(f"CREATE DATABASE {db.name}".encode())
        try:
            yield db
        finally:
            admin.execute(f"DROP DATABASE IF EXISTS {db.name} WITH (FORCE)".encode())
            for r in dbroles.roles(prefix=db.prefix, demo_helpdesk=True):
                admin.execute(f"DROP ROLE IF EXISTS {r.name}".encode())


def passwords() -> dict[str, str]:
    return {
        r.service: f"pw-{r.service}-{uuid.uuid4().hex}" for r in dbroles.roles(demo_helpdesk=True)
    }


def create_service_tables(
    db: Database, tmp_path: Path, services: tuple[str, ...] = ("inbox_api", "sender", "drafter")
) -> None:
    """Each service creates its tables with its own code, connected as its own role."""
    from services.drafter.checkpoints import open_storage
    from services.inbox_api import store as inbox_store
    from services.sender import notifications as sender_notifications
    from services.sender import store as sender_store

    for service, creators in (
        ("inbox_api", [inbox_store.create_tables]),
        ("sender", [sender_store.create_tables, sender_notifications.create_tables]),
    ):
        if service not in services:
            continue
        engine = make_engine(database_url(db.url(db.role(service).name), tmp_path, service))
        try:
            for create in creators:
                create(engine)
        finally:
            engine.dispose()

    async def drafter() -> None:
        async with open_storage(db.url(db.role("drafter").name), tmp_path):
            pass

    if "drafter" in services:
        asyncio.run(drafter())


def tables_by_schema(db: Database) -> dict[str, dict[str, str]]:
    """{schema: {table: owner}} outside PostgreSQL's own schemas."""
    with db.admin() as admin:
        rows = admin.execute(
            "SELECT schemaname, tablename, tableowner FROM pg_tables"
            " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    found: dict[str, dict[str, str]] = {}
    for schema, table, owner in rows:
        found.setdefault(schema, {})[table] = owner
    return found


@contextlib.contextmanager
def refused() -> Iterator[None]:
    with pytest.raises(errors.InsufficientPrivilege):
        yield


UNPUBLISHED_DECISION = (
    "INSERT INTO {schema}.inbox_decisions"
    " (item_id, thread, version, type, reviewer, decided_at, published)"
    " VALUES ('it-1', 'th-1', 1, 'accept', 'mallory', now(), false)"
)

UNPUBLISHED_RESULT = (
    "INSERT INTO {schema}.sender_results (id, type, data, created_at, published)"
    " VALUES ('r-1', 'reply.sent', '{{}}', now(), false)"
)


# --- on the real PostgreSQL ---------------------------------------------------------------


def test_each_service_owns_its_tables_and_no_other_service_may_touch_them(
    database: Database, tmp_path: Path
) -> None:
    db = database
    database_services = {s.name for s in dbroles.database_services()}
    assert (
        database_services == {s.name for s in catalog.SERVICES if "postgres" in s.talks_to}
        and {"drafter", "inbox_api", "sender"} <= database_services
    )
    db.apply(dbroles.role_setup_sql(passwords(), prefix=db.prefix))
    create_service_tables(db, tmp_path)

    # every service's tables are in its own schema, owned by its role, and are its catalog
    # `tables`; nothing landed in public
    found = tables_by_schema(db)
    for spec in dbroles.database_services():
        r = db.role(spec.name)
        assert found.get(r.schema, {}) == dict.fromkeys(spec.tables, r.name), spec.name
    assert not found.get("public"), found.get("public")

    inbox = db.role("inbox_api").schema
    sender = db.role("sender").schema
    # the attack: an unpublished decision written by a service that is not the inbox
    for attacker in ("sender", "drafter"):
        with db.connect(attacker) as conn:
            with refused():
                conn.execute(UNPUBLISHED_DECISION.format(schema=inbox))
            with refused():
                conn.execute(f"SELECT * FROM {inbox}.inbox_decisions")
            with refused():
                conn.execute(f"UPDATE {inbox}.inbox_decisions SET published = false")
            with refused():
                conn.execute(f"SELECT * FROM {inbox}.inbox_sessions")
            with pytest.raises(errors.UndefinedTable):  # not on its search_path either
                conn.execute("SELECT * FROM inbox_decisions")
    with db.admin() as admin:
        assert admin.execute(f"SELECT count(*) FROM {inbox}.inbox_decisions").fetchone() == (0,)

    # the sender uses its own tables; the inbox may not touch them, nor plant a result for
    # the sender's relay to publish
    with db.connect("sender") as conn:
        conn.execute(UNPUBLISHED_RESULT.format(schema=sender))
        assert conn.execute("SELECT count(*) FROM sender_results").fetchone() == (1,)
        assert conn.execute("SELECT count(*) FROM sender_outbox").fetchone() == (0,)
    with db.connect("inbox_api") as conn:
        for statement in (
            f"SELECT * FROM {sender}.sender_outbox",
            f"INSERT INTO {sender}.sender_outbox SELECT * FROM {sender}.sender_outbox",
            f"UPDATE {sender}.sender_outbox SET args = '{{}}'",
            f"DELETE FROM {sender}.sender_outbox",
            UNPUBLISHED_RESULT.replace("'r-1'", "'r-2'").format(schema=sender),
        ):
            with refused():
                conn.execute(statement)
        with refused():
            conn.execute(f"SELECT * FROM {db.role('drafter').schema}.checkpoints")
        # the refusal is the role's, not a broken table: the inbox itself may write there
        conn.execute(UNPUBLISHED_DECISION.format(schema=inbox))

    # no role creates outside its schema: not in public, not a schema, not a temporary table
    for service in database_services:
        neighbour = db.role("sender" if service == "inbox_api" else "inbox_api").schema
        with db.connect(service) as conn:
            for statement in (
                "CREATE TABLE public.planted (id int)",
                "CREATE SCHEMA planted",
                "CREATE TEMPORARY TABLE planted (id int)",
                f"CREATE TABLE {neighbour}.planted (id int)",
            ):
                with refused():
                    conn.execute(statement)
            super_, createrole, createdb = conn.execute(
                "SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles"
                " WHERE rolname = current_user"
            ).fetchone() or (True, True, True)
            assert not (super_ or createrole or createdb), service


def test_running_the_setup_again_undoes_grants_made_by_hand(
    database: Database, tmp_path: Path
) -> None:
    db = database
    statements = dbroles.role_setup_sql(passwords(), prefix=db.prefix)
    db.apply(statements)
    create_service_tables(db, tmp_path, ("inbox_api",))
    inbox, sender = db.role("inbox_api"), db.role("sender")
    db.apply(
        [
            f"GRANT USAGE ON SCHEMA {inbox.schema} TO {sender.name}",
            f"GRANT SELECT, INSERT ON {inbox.schema}.inbox_decisions TO {sender.name}",
            f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {inbox.schema} TO {sender.name}",
            f"GRANT {inbox.name} TO {sender.name}",  # membership: SET ROLE to the inbox
        ]
    )
    with db.connect("sender") as conn:
        conn.execute(UNPUBLISHED_DECISION.format(schema=inbox.schema))  # the hole is real
    db.apply(statements)  # idempotent: every statement runs again without error
    with db.connect("sender") as conn:
        with refused():
            conn.execute(UNPUBLISHED_DECISION.format(schema=inbox.schema))
        with refused():
            conn.execute(f"SET ROLE {inbox.name}")


def test_move_tables_takes_an_old_shared_schema_apart(database: Database, tmp_path: Path) -> None:
    """A database from before per-service roles: every table in public, owned by one user."""
    from services.inbox_api import store as inbox_store
    from services.sender import store as sender_store

    db = database
    engine = make_engine(database_url(db.url(), tmp_path, "old"))
    try:
        inbox_store.create_tables(engine)
        sender_store.create_tables(engine)
    finally:
        engine.dispose()
    db.apply([UNPUBLISHED_DECISION.format(schema="public")])
    setup = dbroles.role_setup_sql(passwords(), prefix=db.prefix)
    moves = [
        s
        for r in dbroles.roles(prefix=db.prefix)
        for s in dbroles.move_tables_sql(r.service, "public", prefix=db.prefix)
    ]
    db.apply(setup + moves)
    found = tables_by_schema(db)
    inbox, sender = db.role("inbox_api"), db.role("sender")
    assert not found.get("public"), found.get("public")
    assert set(found[inbox.schema]) == set(catalog.spec("inbox_api").tables)
    assert set(found[inbox.schema].values()) == {inbox.name}
    with db.connect("inbox_api") as conn:  # the rows came along, and its id sequence works
        assert conn.execute("SELECT count(*) FROM inbox_decisions").fetchone() == (1,)
        conn.execute(
            UNPUBLISHED_DECISION.replace("'th-1', 1", "'th-2', 1").format(schema=inbox.schema)
        )
    with db.connect("sender") as conn:
        with refused():
            conn.execute(f"SELECT * FROM {inbox.schema}.inbox_decisions")
        conn.execute("SELECT count(*) FROM sender_outbox")
    assert set(found[sender.schema].values()) == {sender.name}


def test_the_dev_init_script_sets_the_passwords_of_the_mounted_secrets(
    database: Database, tmp_path: Path
) -> None:
    """What the dev PostgreSQL runs at its first start (`psql -f`), with its password files."""
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql not found (Debian's postgresql-client)")
    db = database
    secrets = passwords()
    for service, password in secrets.items():
        (tmp_path / service).write_text(password)  # as a Secret key is mounted: no newline
    script = tmp_path / "roles.sql"
    script.write_text(dbroles.psql_script(str(tmp_path), prefix=db.prefix, demo_helpdesk=True))
    for _ in range(2):  # and again: the script is idempotent
        proc = subprocess.run(
            [psql, "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "-q", "-d", db.url(), "-f", str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    with db.admin() as admin:
        stored: dict[str, str] = dict(
            admin.execute(
                "SELECT rolname, rolpassword FROM pg_authid WHERE rolname LIKE %s",
                (db.prefix.replace("_", "\\_") + "%",),
            ).fetchall()
        )
    for r in dbroles.roles(prefix=db.prefix, demo_helpdesk=True):
        verifier = stored[r.name]
        assert verifier.startswith("SCRAM-SHA-256$"), r.name  # the server hashed it
        assert verifier == recompute(verifier, secrets[r.service]), r.name
    with db.connect("helpdesk") as conn:  # the demo helpdesk's role is like the others
        with refused():
            conn.execute(f"SELECT * FROM {db.role('inbox_api').schema}.inbox_decisions")


def test_literal_passwords_are_stored_as_the_scram_verifiers_printed(database: Database) -> None:
    """PostgreSQL takes the verifier as it is (were it not recognised, it would hash the text
    of it as a password, and the stored value would differ)."""
    db = database
    secrets = passwords()
    statements = dbroles.role_setup_sql(secrets, prefix=db.prefix)
    assert not [s for s in statements for p in secrets.values() if p in s], "a plain password"
    db.apply(statements)
    with db.admin() as admin:
        for r in dbroles.roles(prefix=db.prefix):
            (stored,) = admin.execute(
                "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (r.name,)
            ).fetchone() or (None,)
            assert stored is not None and stored in " ".join(statements), r.name
            assert stored == recompute(stored, secrets[r.service]), r.name


def recompute(verifier: str, password: str) -> str:
    """`scram_sha256(password)` with the salt and iteration count of `verifier`."""
    iterations, salt = verifier.split("$")[1].split(":")
    return scram_sha256(password, salt=base64.b64decode(salt), iterations=int(iterations))


# --- offline ------------------------------------------------------------------------------


def test_the_dev_overlays_init_script_is_the_derived_one() -> None:
    expected = dbroles.psql_script(DEV_PASSWORD_DIR, demo_helpdesk=True)
    assert DEV_INIT.read_text() == expected, (
        f"{DEV_INIT.relative_to(ROOT)} is generated from shared/catalog.py: run\n"
        f"  python -m desk.dbroles --demo-helpdesk --password-files {DEV_PASSWORD_DIR}"
        f" > {DEV_INIT.relative_to(ROOT)}"
    )
    body = dbroles.script(dbroles.role_setup_sql(demo_helpdesk=True, psql_variables=True))
    assert DEV_INIT.read_text().endswith(body)


def test_the_demo_helpdesk_role_covers_the_demo_helpdesks_tables() -> None:
    from shared.helpdesk import tables

    assert {t.name for t in tables.TABLES} == set(dbroles.DEMO_HELPDESK_TABLES)


def test_scram_verifier_matches_rfc_7677() -> None:
    """RFC 7677's example exchange (user "user", password "pencil"): the client proof and the
    server signature computed from the verifier's keys are the ones the RFC gives."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = scram_sha256("pencil", salt=salt, iterations=4096)
    keys = verifier.split("$")[2]
    stored_key, server_key = (base64.b64decode(k) for k in keys.split(":"))
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", salt, 4096)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    assert hashlib.sha256(client_key).digest() == stored_key
    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    assert base64.b64encode(proof).decode() == "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    server_signature = hmac.new(server_key, auth_message, hashlib.sha256).digest()
    assert base64.b64encode(server_signature).decode() == (
        "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    )
    with pytest.raises(ValueError):
        scram_sha256("pâté")


def test_cli_keeps_passwords_in_a_private_file_and_prints_only_verifiers(tmp_path: Path) -> None:
    path = tmp_path / "db-passwords.json"
    args = argparse.Namespace(
        passwords=path, password_files=None, no_passwords=False, demo_helpdesk=False, move_from=None
    )
    first = cli.render(args)
    saved = json.loads(path.read_text())
    assert set(saved) == {r.service for r in dbroles.roles()}
    assert path.stat().st_mode & 0o777 == 0o600
    assert not [p for p in saved.values() if p in first]
    assert first.count("SCRAM-SHA-256$") == len(saved)
    cli.render(args)
    assert json.loads(path.read_text()) == saved, "the second run reuses the passwords"
    args.move_from = "public"
    assert "SET SCHEMA" in cli.render(args)
    with pytest.raises(ValueError):
        dbroles.role_setup_sql({"drafter": "x"})  # every role needs one
    with pytest.raises(ValueError):
        dbroles.ident("desk; DROP TABLE x")
