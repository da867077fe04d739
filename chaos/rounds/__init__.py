"""The invariants about items, rounds and replies, from what the run left behind (pure).

Inputs: every inbox item (the list API), the result events stored in the RESULTS stream, the
sender's outbox rows, the keys the channel took, the decisions on the tickets a step closed or
answered, and the harness's own record of what it did. Each function returns one line:
(holds, name, text).
"""

from .evidence import Line, Result, results_of
from .items import open_items, terminal
from .replies import approved_rounds, nothing_sent_withdrawn, one_reply_per_round, outbox
from .scans import stale_scans
from .steps import conversations

__all__ = [
    "Line",
    "Result",
    "approved_rounds",
    "conversations",
    "nothing_sent_withdrawn",
    "one_reply_per_round",
    "open_items",
    "outbox",
    "results_of",
    "stale_scans",
    "terminal",
]
