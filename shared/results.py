"""Result events: what the system did, as CloudEvents 1.0 on `results.<type>`.

Any system can subscribe to `results.>` without our code. Ids are deterministic, so a
republish after a crash is dropped by the broker and recognisable by subscribers.
"""

from __future__ import annotations

REPLY_SENT = "reply.sent"
REPLY_FAILED = "reply.failed"
ITEM_IGNORED = "item.ignored"
REPLY_WITHDRAWN = "reply.withdrawn"  # approved, but the ticket changed before delivery
ITEM_WITHDRAWN = "item.withdrawn"  # a waiting draft taken back before any decision
NOTIFY_SENT = "notify.sent"
NOTIFY_FAILED = "notify.failed"
REPORT_DAILY = "report.daily"

SOURCE_SENDER = "/desk/sender"


def event_id(result_type: str, key: str) -> str:
    """One result of a type per outbox key (or per item, for item.ignored)."""
    return f"{result_type}:{key}"
