"""The fault suite at CI size with the broker as a three-node cluster (R3 streams), killing the
node that leads the events stream, and every service's state in PostgreSQL (a fresh database on
the machine's server) with one more fault: an outage of the database (every connection
terminated, new ones refused for seconds), nothing restarted. Every invariant line, and every
stream back at R3. The two variants share one run: each changes a different part (the broker,
the database), and a second stack would double the CPU this costs; `python -m chaos --cluster`
and `--postgres` still run them apart at full size. Without a PostgreSQL server the run is the
cluster alone, and the test's id in the report says so."""

from __future__ import annotations

import pytest

from chaos import postgres

from .test_chaos import DEADLINE, run_small

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

NO_POSTGRES = postgres.answers()


@pytest.mark.timeout(DEADLINE + 120)
@pytest.mark.parametrize(
    "variant",
    [["--cluster"] if NO_POSTGRES else ["--cluster", "--postgres"]],
    ids=["cluster, SQLite (no PostgreSQL)" if NO_POSTGRES else "cluster, PostgreSQL"],
)
def test_chaos_small_run_on_a_cluster_and_postgresql_keeps_every_invariant(
    variant: list[str],
) -> None:
    run_small(variant)
