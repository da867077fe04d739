"""The fault suite at CI size with every service's state in PostgreSQL (a fresh database on the
machine's server), and one more fault: an outage of the database (every connection terminated,
new ones refused for seconds), nothing restarted. Every invariant line must say PASS."""

from __future__ import annotations

import pytest

from chaos import postgres

from .test_chaos import run_small

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def test_chaos_small_run_on_postgresql_keeps_every_invariant() -> None:
    why = postgres.answers()
    if why is not None:
        pytest.skip(f"no PostgreSQL at {postgres.SERVER_URL}: {why}")
    run_small(["--postgres"])
