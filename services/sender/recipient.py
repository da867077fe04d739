"""Who a reply may go to (pure: no I/O)."""

from __future__ import annotations

from shared import mail

from . import store


def not_to_the_author(item: store.ItemRow) -> str | None:
    """Why the reply to a mail conversation must not go out (None: it may). It goes to the
    author of the round it answers and to nobody else: one plain address, the same (case and
    display name aside) as the newest mail of the round. (A helpdesk ticket's reply is
    addressed by the helpdesk itself.)"""
    if item.in_helpdesk is not False:
        return None
    recipient = (item.recipient or {}).get("email")
    if not mail.plain_address(recipient):
        return "refused: the reply names no single plain recipient address"
    if not item.round_author:
        return "refused: the round the reply answers names no author to send it to"
    if mail.normal_address(str(recipient)) != mail.normal_address(item.round_author):
        return "refused: the recipient is not the author of the round the reply answers"
    return None
