"""PostgreSQL roles, one per service that keeps state, derived from `shared.catalog`.

Every service whose spec `talks_to` "postgres" gets a login role `desk_<service>` and a schema
of the same name that the role owns. The role's search_path is that schema alone (PostgreSQL's
default, `"$user", public`, would pick it too), so the tables the service creates, its `tables`
in the catalog, land there and are the role's own: the owner holds every privilege on them and
nobody else holds any. Nothing else is granted. The role is no superuser and cannot create
roles or databases; it may connect to this database only; nobody may create objects in
`public` or temporary tables (revoked from PUBLIC); and whatever another service's schema holds
is closed to it (a privilege granted there by hand is revoked). So a compromised sender cannot
insert an unpublished decision into `inbox_decisions` for the inbox relay to publish, nor read
the reviewers' sessions: only the inbox_api's role may touch its tables.

`role_setup_sql(passwords)` is everything an administrator runs once, as the database owner or
a superuser, in the services' database; it is idempotent (run it again after a service is
added). Passwords go in as SCRAM-SHA-256 verifiers (`shared.passwords`), so neither the SQL nor
a statement log holds one. `desk db-roles` prints it (desk/dbroles.py); the dev overlay's
PostgreSQL runs it at its first start, reading the passwords from the mounted Secrets
(deploy/k8s/overlays/dev/postgres-init/roles.sql is `psql_script(...)`: a test keeps it so).

In development the demo helpdesk (`DESK_HELPDESK_KIND=sql`) lives in the same database; it is a
stand-in for an outside system, not a service, and gets a role of its own (`demo_helpdesk=True`)
that the helpdesk's clients (drafter, sender, reconciler) share, as they share the real
helpdesk's API token in production.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .catalog import SERVICES, ServiceSpec
from .passwords import scram_sha256

POSTGRES = "postgres"  # the catalog's `talks_to` entry for the database
PREFIX = "desk_"
DEMO_HELPDESK = "helpdesk"
# shared/helpdesk/tables.py: the demo helpdesk's tables (a test compares)
DEMO_HELPDESK_TABLES = ("customers", "tickets", "ticket_messages")
# Schemas never touched: PostgreSQL's own.
_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class DbRole:
    """A login role and the schema it owns (of the same name), for one service."""

    service: str
    name: str
    tables: tuple[str, ...]

    @property
    def schema(self) -> str:
        return self.name

    @property
    def password_variable(self) -> str:
        """The psql variable `psql_script` reads this role's password into."""
        return f"password_{self.service}"


def database_services() -> tuple[ServiceSpec, ...]:
    """The services that keep their state in PostgreSQL."""
    return tuple(s for s in SERVICES if POSTGRES in s.talks_to)


def roles(*, prefix: str = PREFIX, demo_helpdesk: bool = False) -> tuple[DbRole, ...]:
    found = [
        DbRole(s.name, ident(f"{prefix}{s.name}"), tuple(ident(t) for t in s.tables))
        for s in database_services()
    ]
    for r in found:
        if not r.tables:
            raise ValueError(f"{r.service} talks to postgres but declares no tables")
    if demo_helpdesk:
        found.append(DbRole(DEMO_HELPDESK, ident(f"{prefix}{DEMO_HELPDESK}"), DEMO_HELPDESK_TABLES))
    return tuple(found)


def role(service: str, *, prefix: str = PREFIX) -> DbRole:
    for r in roles(prefix=prefix, demo_helpdesk=True):
        if r.service == service:
            return r
    raise KeyError(f"{service} keeps nothing in PostgreSQL (no 'postgres' in its talks_to)")


def ident(name: str) -> str:
    """`name` if it is a plain lower-case SQL identifier (so it needs no quoting anywhere)."""
    if not _IDENT.fullmatch(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return name


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _array(values: tuple[str, ...]) -> str:
    return "ARRAY[" + ", ".join(_literal(v) for v in values) + "]::text[]"


# --- the statements -----------------------------------------------------------------------


def database_sql() -> list[str]:
    """For the whole database: only the roles granted CONNECT below may connect; nobody but
    the owner creates in `public`; no temporary tables. `pg_trgm` is installed in `public` (the
    inbox's text-search index uses it; a service role may not install an extension)."""
    return [
        "DO $$ BEGIN\n"
        "  EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());\n"
        "END $$",
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC",
        "CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public",
    ]


def grants_sql(service: str, *, prefix: str = PREFIX) -> list[str]:
    """Everything `service`'s role may do, and the revocation of everything else: the role
    (created if missing, never a superuser), its schema, its search_path, CONNECT on this
    database; no membership in other roles and no privilege in any other schema."""
    r = role(service, prefix=prefix)
    name, schema = r.name, r.schema
    return [
        f"DO $$ BEGIN\n"
        f"  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {_literal(name)}) THEN\n"
        f"    CREATE ROLE {name};\n"
        f"  END IF;\n"
        f"END $$",
        f"ALTER ROLE {name} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT"
        f" NOREPLICATION NOBYPASSRLS",
        # a member of another role could SET ROLE to it: no memberships at all
        f"DO $$ DECLARE granted text; BEGIN\n"
        f"  FOR granted IN SELECT roleid::regrole::text FROM pg_auth_members\n"
        f"      WHERE member = {_literal(name)}::regrole LOOP\n"
        f"    EXECUTE format('REVOKE %s FROM {name}', granted);\n"
        f"  END LOOP;\n"
        f"END $$",
        f"CREATE SCHEMA IF NOT EXISTS {schema} AUTHORIZATION {name}",
        f"ALTER SCHEMA {schema} OWNER TO {name}",
        f"REVOKE ALL ON SCHEMA {schema} FROM PUBLIC",
        f"ALTER ROLE {name} SET search_path = {schema}",
        f"DO $$ BEGIN\n"
        f"  EXECUTE format('GRANT CONNECT ON DATABASE %I TO {name}', current_database());\n"
        f"END $$",
        # privileges granted by hand in other schemas (another service's, public) are undone
        f"DO $$ DECLARE other text; BEGIN\n"
        f"  FOR other IN SELECT nspname FROM pg_namespace\n"
        f"      WHERE nspname <> {_literal(schema)}\n"
        f"        AND nspname <> ALL ({_array(_SYSTEM_SCHEMAS)})\n"
        f"        AND nspname NOT LIKE 'pg\\_temp\\_%' AND nspname NOT LIKE 'pg\\_toast\\_temp\\_%'"
        f" LOOP\n"
        f"    EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM {name}', other);\n"
        f"    EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM {name}', other);\n"
        f"    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM {name}', other);\n"
        f"  END LOOP;\n"
        f"END $$",
    ]


def role_setup_sql(
    passwords: Mapping[str, str] | None = None,
    *,
    prefix: str = PREFIX,
    demo_helpdesk: bool = False,
    psql_variables: bool = False,
) -> list[str]:
    """The whole setup: the database's restrictions, then each role's `grants_sql` and password.

    `passwords` ({service: password}) become SCRAM verifiers; every role must have one. With
    `psql_variables`, each password is read from the psql variable `password_<service>`
    instead (`psql_script`). Neither: the roles get no password (certificate or other auth)."""
    chosen = roles(prefix=prefix, demo_helpdesk=demo_helpdesk)
    if passwords is not None and not psql_variables:
        missing = [r.service for r in chosen if not passwords.get(r.service)]
        if missing:
            raise ValueError(f"no database password for {', '.join(missing)}")
    statements = database_sql()
    for r in chosen:
        statements += grants_sql(r.service, prefix=prefix)
        if psql_variables:
            statements.append(f"ALTER ROLE {r.name} PASSWORD :'{r.password_variable}'")
        elif passwords is not None:
            verifier = scram_sha256(passwords[r.service])
            statements.append(f"ALTER ROLE {r.name} PASSWORD {_literal(verifier)}")
    return statements


def move_tables_sql(
    service: str, from_schema: str = "public", *, prefix: str = PREFIX
) -> list[str]:
    """Move the service's tables (those that exist) from `from_schema`, where a database set up
    before per-service roles has them, into its schema, and give them to its role."""
    r = role(service, prefix=prefix)
    source = ident(from_schema)
    return [
        f"DO $$ DECLARE t text; BEGIN\n"
        f"  FOREACH t IN ARRAY {_array(r.tables)} LOOP\n"
        f"    IF EXISTS (SELECT FROM pg_tables WHERE schemaname = {_literal(source)}"
        f" AND tablename = t) THEN\n"
        f"      EXECUTE format('ALTER TABLE %I.%I SET SCHEMA %I', {_literal(source)}, t,"
        f" {_literal(r.schema)});\n"
        f"    END IF;\n"
        f"    IF EXISTS (SELECT FROM pg_tables WHERE schemaname = {_literal(r.schema)}"
        f" AND tablename = t) THEN\n"
        f"      EXECUTE format('ALTER TABLE %I.%I OWNER TO %I', {_literal(r.schema)}, t,"
        f" {_literal(r.name)});\n"
        f"    END IF;\n"
        f"  END LOOP;\n"
        f"END $$",
    ]


# --- scripts ------------------------------------------------------------------------------


def script(statements: list[str]) -> str:
    """Statements as one SQL script (psql -f, or one per `execute`)."""
    return "".join(f"{s};\n" for s in statements)


def psql_script(password_dir: str, *, prefix: str = PREFIX, demo_helpdesk: bool = False) -> str:
    """A psql script that reads each role's password from the file `<password_dir>/<service>`
    (a mounted Secret) and runs `role_setup_sql` with them: the dev PostgreSQL's init script."""
    if not re.fullmatch(r"/[A-Za-z0-9_./-]+", password_dir):
        raise ValueError(f"not a plain absolute path: {password_dir!r}")
    chosen = roles(prefix=prefix, demo_helpdesk=demo_helpdesk)
    lines = [
        "-- One PostgreSQL role and schema per service, from shared/catalog.py: generated by",
        f"-- `desk db-roles{' --demo-helpdesk' if demo_helpdesk else ''}"
        f" --password-files {password_dir}`; do not edit.",
        "-- Each password is read from the file of that name (a mounted Secret).",
        "\\set ON_ERROR_STOP on",
        *(
            f"\\set {r.password_variable} `cat {password_dir.rstrip('/')}/{r.service}`"
            for r in chosen
        ),
        "",
    ]
    statements = role_setup_sql(prefix=prefix, demo_helpdesk=demo_helpdesk, psql_variables=True)
    return "\n".join(lines) + script(statements)
