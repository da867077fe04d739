"""`desk db-roles`: the SQL that gives each stateful service its own PostgreSQL role and schema.

    desk db-roles --passwords db-passwords.json > roles.sql    # then, as the database owner:
    psql "$ADMIN_URL" -f roles.sql

The passwords file ({service: password}) is created with random passwords (mode 0600) when it
is missing, like `desk nats-config`'s; the SQL holds SCRAM verifiers, never the passwords.
`--password-files DIR` prints a psql script that reads each password from `DIR/<service>`
instead (the dev overlay's init script). `--move-from public` also moves tables a database set
up before per-service roles holds into the services' schemas. See shared/dbroles.py.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from shared import dbroles


def add_arguments(subparsers: Any) -> None:
    """Register `db-roles` on the `desk` parser's sub-parsers."""
    parser = subparsers.add_parser(
        "db-roles",
        help="print the SQL for one PostgreSQL role and schema per stateful service",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    passwords = parser.add_mutually_exclusive_group(required=True)
    passwords.add_argument(
        "--passwords",
        type=Path,
        help="JSON file {service: password}; created with random passwords (mode 0600) if missing",
    )
    passwords.add_argument(
        "--password-files",
        metavar="DIR",
        help="print a psql script reading each password from DIR/<service> (mounted Secrets)",
    )
    passwords.add_argument(
        "--no-passwords", action="store_true", help="roles without passwords (other auth)"
    )
    parser.add_argument(
        "--demo-helpdesk",
        action="store_true",
        help="add a role for the demo helpdesk kept in the same database (development)",
    )
    parser.add_argument(
        "--move-from",
        metavar="SCHEMA",
        help="also move the services' existing tables from SCHEMA (e.g. public) into theirs",
    )


def main(args: argparse.Namespace) -> int:
    try:
        print(render(args), end="")
    except (ValueError, OSError) as exc:
        print(f"desk db-roles: {exc}", file=sys.stderr)
        return 2
    return 0


def render(args: argparse.Namespace) -> str:
    demo = bool(args.demo_helpdesk)
    if args.password_files:
        text = dbroles.psql_script(args.password_files, demo_helpdesk=demo)
    else:
        passwords = None if args.no_passwords else load_or_create(args.passwords, demo)
        text = dbroles.script(dbroles.role_setup_sql(passwords, demo_helpdesk=demo))
    if args.move_from:
        moves = [
            s
            for r in dbroles.roles(demo_helpdesk=demo)
            for s in dbroles.move_tables_sql(r.service, args.move_from)
        ]
        text += dbroles.script(moves)
    return text


def load_or_create(path: Path, demo_helpdesk: bool) -> dict[str, str]:
    """The passwords file; missing roles get random passwords, written back (mode 0600)."""
    wanted = [r.service for r in dbroles.roles(demo_helpdesk=demo_helpdesk)]
    passwords: dict[str, str] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text())
        except ValueError:
            raise ValueError(f"{path} is not JSON") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} is not a JSON object {{service: password}}")
        passwords = {str(k): str(v) for k, v in loaded.items()}
    missing = [s for s in wanted if not passwords.get(s)]
    if missing:
        passwords.update({s: secrets.token_hex(24) for s in missing})
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(passwords, indent=2) + "\n")
    return passwords


if __name__ == "__main__":  # `python -m desk.dbroles …` before `desk db-roles` is registered
    _parser = argparse.ArgumentParser(prog="desk")
    add_arguments(_parser.add_subparsers(dest="command", required=True))
    sys.exit(main(_parser.parse_args(["db-roles", *sys.argv[1:]])))
