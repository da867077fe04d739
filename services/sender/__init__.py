"""The sender service: the only one with a side effect on the customer.

Like every service it runs as `main.run(settings)` (`desk sender`). What code outside services/
may use of it is `__all__` (tests/test_layout.py holds desk/, chaos/ and benchmarks/ to it):

- `read_outbox(database_url, var_dir)`: every outbox row, oldest first, from the sender's own
  database (the demo and the fault suite check one row per approved reply).
- `OutboxRow`: one such row.
"""

from .store import OutboxRow, read_outbox

__all__ = ["OutboxRow", "read_outbox"]
