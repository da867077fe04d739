"""What a reviewer's edit may make of an item's action request, for the inbox (which refuses any
other edit, 422) and the sender (which does not carry one out).

An edit changes the text (`EDITABLE_ARGS`: the reply and the subject), never the target: every
other argument comes from the item. The action stays the item's, with one exception: a person
who takes an escalation (`notify_supervisor`) writes the reply on its ticket themselves, so its
only edit is a `send_reply` to the same ticket, in their words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .inbox import EDITABLE_ARGS, NOTIFY_SUPERVISOR, SEND_REPLY, ActionRequest

# the one change of action an edit may make: an escalation taken becomes a reply on its ticket
TAKEN = {NOTIFY_SUPERVISOR: SEND_REPLY}
_KEPT_WHEN_TAKEN = ("ticket_id", "subject")  # what a taken escalation's reply keeps of the item


class RefusedEdit(ValueError):
    """An edit that would change more than the text."""


def edited(current: ActionRequest, action: str | None, changes: Mapping[str, Any]) -> ActionRequest:
    """The action request an edit of `current` makes: `action` as the edit names it (None or
    empty: the one the item's edit makes), `changes` its arguments. Raises `RefusedEdit`."""
    allowed = TAKEN.get(current.action, current.action)
    target = action or allowed
    if target != allowed:
        raise RefusedEdit(
            f"an edit cannot change the action to {target}: an edit of {current.action} is a "
            f"{allowed}"
        )
    for name, value in changes.items():
        if name in EDITABLE_ARGS:
            if not isinstance(value, str):
                raise RefusedEdit(f"{name} must be text")
            continue
        if name not in current.args or current.args[name] != value:
            raise RefusedEdit(
                f"an edit may change only {' and '.join(sorted(EDITABLE_ARGS))}, not {name}"
            )
    kept = {k: v for k, v in changes.items() if k in EDITABLE_ARGS}
    if target == current.action:
        return ActionRequest(action=target, args={**current.args, **kept})
    base = {k: current.args[k] for k in _KEPT_WHEN_TAKEN if k in current.args}
    return ActionRequest(action=target, args={**base, **kept})
