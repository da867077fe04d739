"""The reconciler service: backfills lost events, reminds about stale tickets, reports daily.

Like every service it runs as `main.run(settings)` (`desk reconciler`). What code outside
services/ may use of it is `__all__` (tests/test_layout.py holds desk/, chaos/ and benchmarks/
to it):

- `Jobs`: its jobs (`await Jobs.open(settings, source, bus, now)`, then `backfill()`,
  `stale(now)`, `report(now)`), which `desk reconcile` and `desk report` run once.
"""

from .jobs import Jobs

__all__ = ["Jobs"]
