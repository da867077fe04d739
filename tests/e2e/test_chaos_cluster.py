"""The fault suite at CI size with the broker as a three-node cluster (R3 streams), killing the
node that leads the events stream: every invariant line, and every stream back at R3."""

from __future__ import annotations

import pytest

from .test_chaos import run_small

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)


def test_chaos_small_run_on_a_cluster_keeps_every_invariant() -> None:
    run_small(["--cluster"])
