"""Password hashes for the servers' configuration: what a server stores instead of the password.

- `nats_bcrypt`: nats-server accepts a bcrypt hash (`$2a$…`) wherever its configuration takes a
  user's password, and compares the password a client sends with it. The `authorization` block
  (`shared.permissions.authorization_block`) then holds no password a reader could log in with;
  the services keep the plain password in their own Secrets.
- `scram_sha256`: PostgreSQL stores a SCRAM-SHA-256 verifier for a role; `CREATE ROLE … PASSWORD
  'SCRAM-SHA-256$…'` takes one as it is, so the SQL `shared.dbroles` prints (and whatever logs
  the statement) holds no password either.

`desk nats-config` prints hashed blocks. The embedded broker of `desk up` keeps plain
passwords in its configuration: that file (mode 0600) sits next to var/dev-credentials.json,
which holds the same passwords in the clear, so hashing would hide nothing there and would cost
every connect a bcrypt verification (about 100 ms of CPU at cost 11).

bcrypt comes from the `bcrypt` package; SCRAM needs only the standard library.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

import bcrypt

BCRYPT_ROUNDS = 11  # nats-server's own `nats server passwd` default
SCRAM_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)


def nats_bcrypt(password: str, *, rounds: int = BCRYPT_ROUNDS) -> str:
    """A bcrypt hash of `password` in the `$2a$` form nats-server recognises as a hash."""
    raw = password.encode()
    if len(raw) > 72:  # bcrypt reads no further; a longer password would be silently cut
        raise ValueError("a NATS password to hash with bcrypt must be at most 72 bytes")
    return bcrypt.hashpw(raw, bcrypt.gensalt(rounds, prefix=b"2a")).decode()


def nats_hashed(passwords: dict[str, str], *, rounds: int = BCRYPT_ROUNDS) -> dict[str, str]:
    """{user: bcrypt hash} for `authorization_block`, from {user: password}."""
    hashed = {}
    for user, password in passwords.items():
        try:
            hashed[user] = nats_bcrypt(password, rounds=rounds)
        except ValueError as exc:
            raise ValueError(f"{user}: {exc}") from None
    return hashed


def scram_sha256(
    password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL would store for `password` (RFC 5802/7677).

    Only printable ASCII: PostgreSQL normalises other passwords with SASLprep first, which this
    does not do (the passwords `desk db-roles` generates are hex)."""
    if not password or not all(" " <= c <= "~" for c in password):
        raise ValueError("a database password must be printable ASCII (and not empty)")
    salt = os.urandom(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    return f"SCRAM-SHA-256${iterations}:{_b64(salt)}${_b64(stored_key)}:{_b64(server_key)}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
