"""The ingress service: the front door. Verifies, records to EVENTS, answers fast.

Like every service it runs as `main.run(settings)` (`desk ingress`; the IMAP poller is
`imap.run`, `desk ingress imap`). What code outside services/ may use of it is `__all__`
(tests/test_layout.py holds desk/, chaos/ and benchmarks/ to it):

- `nats_headers(...)`: the headers ingress stores with an event (the benchmarks publish the
  same messages straight to the broker, to compare).
- `settle_gc()`: the garbage-collector tuning ingress applies once started (the benchmarks'
  bare endpoint applies the same).
"""

from .app import settle_gc
from .intake import nats_headers

__all__ = ["nats_headers", "settle_gc"]
