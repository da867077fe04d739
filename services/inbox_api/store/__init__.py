"""The inbox in SQL: items projected from `inbox.item`, and the decisions on them (the trail).

Idempotent projection: an item already stored, or an older version arriving after a newer
one, changes nothing that matters (the older one is kept as history, superseded). One decision
per item version, enforced by a UNIQUE constraint, so a double click decides once.

One module per concept, every name used elsewhere importable from here (`store.decide`):
`tables` (the rows and the statuses), `projection` (what the bus says about items),
`decisions` (the trail and its relay), `analytics` (the review figures: rates, unedited share,
edit distance, time to decision), `documents` (a row as the API gives it out), `listing`
(the paged list), `queries` (one item in full, the counts, the review log), `sessions` (the
rows behind web sessions), `instructions` (the standing instructions learned from feedback),
`autosend` (the evidence-based auto-send policy and its audits), `audits` (those the drafter
is still to be told of), `claims` (who works on what), `targets` (service levels), `notices`
(escalations and digests for the notifier), `archive` (what is deleted once finished and old)
and `errors`.
"""

from . import audits, autosend, claims, notices, targets
from .analytics import MAX_REVIEW_DAYS, REVIEW_DAYS, review, review_days
from .archive import ARCHIVE_SECONDS, archive
from .decisions import Reviewer, decide, mark_published, origin_of, unpublished
from .documents import decision_json, detail_json, item_json
from .errors import Conflict, Invalid, NotFound
from .instructions import (
    approve_instruction,
    change_instruction,
    list_instructions,
    reject_instruction,
    standing_instructions,
    write_instruction,
)
from .listing import Mine, decode_cursor, encode_cursor, list_items, with_claims
from .projection import (
    mark_overdue,
    project,
    record_notification,
    set_result,
    supersede_older,
    withdraw,
)
from .queries import Waiting, drafts_since, get_item, review_log, stats, waiting
from .sessions import (
    StoredSession,
    close_session,
    find_session,
    open_session,
    purge_sessions,
    set_flash,
)
from .tables import (
    OPEN_STATUSES,
    PRIORITIES,
    STATUSES,
    TABLES,
    DecisionRow,
    InstructionRow,
    ItemRow,
    NotificationRow,
    SessionRow,
    Status,
    create_tables,
)

__all__ = [
    "ARCHIVE_SECONDS",
    "MAX_REVIEW_DAYS",
    "OPEN_STATUSES",
    "PRIORITIES",
    "REVIEW_DAYS",
    "STATUSES",
    "TABLES",
    "Conflict",
    "DecisionRow",
    "InstructionRow",
    "Invalid",
    "ItemRow",
    "Mine",
    "NotFound",
    "NotificationRow",
    "Reviewer",
    "SessionRow",
    "Status",
    "StoredSession",
    "Waiting",
    "approve_instruction",
    "archive",
    "audits",
    "autosend",
    "change_instruction",
    "claims",
    "close_session",
    "create_tables",
    "decide",
    "decision_json",
    "decode_cursor",
    "detail_json",
    "drafts_since",
    "encode_cursor",
    "find_session",
    "get_item",
    "item_json",
    "list_instructions",
    "list_items",
    "mark_overdue",
    "mark_published",
    "notices",
    "open_session",
    "origin_of",
    "project",
    "purge_sessions",
    "record_notification",
    "reject_instruction",
    "review",
    "review_days",
    "review_log",
    "set_flash",
    "set_result",
    "standing_instructions",
    "stats",
    "supersede_older",
    "targets",
    "unpublished",
    "waiting",
    "with_claims",
    "withdraw",
    "write_instruction",
]
