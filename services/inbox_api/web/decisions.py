"""Deciding from the page: which decisions an item allows its viewer, an edit's preview (the
diff against the draft), and the decision itself, recorded, published and flashed."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from shared.inbox import InterruptConfig

from .. import store
from ..core import inbox_of
from ..outboxes import publish_decision
from ..render import diff
from . import forms
from .cookies import edge_of, session_of
from .responses import error_page, item_url, page

log = logging.getLogger(__name__)

KINDS = ("accept", "edit", "response", "ignore")
DONE = {
    "accept": "Accepted",
    "edit": "Edited reply approved",
    "response": "Feedback sent; a new draft will follow",
    "ignore": "Ignored",
}


def allowed_kinds(item: dict[str, Any], who: store.Reviewer) -> dict[str, bool]:
    config = InterruptConfig.model_validate(item["config"])
    can = who.role == "reviewer" and item["status"] == "waiting"
    return {kind: can and config.allows(kind) for kind in KINDS}  # type: ignore[arg-type]


def draft_of(item: dict[str, Any]) -> str:
    reply = (item["action_request"].get("args") or {}).get("reply")
    return reply if isinstance(reply, str) else ""


async def edit_preview(request: Request) -> Response:
    form, who = await forms.reviewer_form(request)
    item_id = request.path_params["id"]
    back = item_url(item_id)
    version = forms.version(form)
    reply = (forms.text(form, "reply") or "").strip()
    if version is None:
        return error_page(request, 422, "Bad form", "The form lacks the item version.", back)
    if len(reply) > forms.MAX_TEXT:
        return error_page(
            request, 422, "Too long", f"A reply is at most {forms.MAX_TEXT} characters.", back
        )
    item = await asyncio.to_thread(store.get_item, inbox_of(request).engine, item_id)
    if item is None:
        return error_page(request, 404, "Not found", "There is no such item in the inbox.")
    if item["version"] != version or item["status"] != "waiting":
        message = f"You saw v{version}; this item is v{item['version']}, {item['status']}."
        return error_page(request, 409, "Changed meanwhile", message, back)
    if not allowed_kinds(item, who)["edit"]:
        return error_page(request, 422, "Not allowed", "This item cannot be edited.", back)
    if not reply:
        return error_page(request, 422, "Empty reply", "An edit needs a non-empty reply.", back)
    draft = draft_of(item)
    if not draft:  # an escalation taken, or no draft: the reply is written on the item's page
        return error_page(request, 422, "No draft", "There is no draft to compare with.", back)
    context = {
        "item": item,
        "url": back,
        "reply": reply,
        "segments": await asyncio.to_thread(diff, draft, reply),
        "unchanged": reply == draft.strip(),
    }
    return page(request, "preview.html", context)


async def decide(request: Request) -> Response:
    form, who = await forms.reviewer_form(request)
    item_id = request.path_params["id"]
    back = item_url(item_id)
    kind = forms.text(form, "type")
    version = forms.version(form)
    if kind not in KINDS or version is None:
        return error_page(request, 422, "Bad form", "The form lacks a decision or a version.", back)
    args: str | None = None
    if kind in ("edit", "response"):
        args = (forms.text(form, "reply" if kind == "edit" else "feedback") or "").strip()
        if len(args) > forms.MAX_TEXT:
            return error_page(
                request, 422, "Too long", f"At most {forms.MAX_TEXT} characters.", back
            )
    engine = inbox_of(request).engine
    if kind == "accept" and forms.text(form, "confirm") != "1":
        item = await asyncio.to_thread(store.get_item, engine, item_id)
        if item is not None and item["version"] == version and item.get("warnings"):
            return error_page(
                request,
                422,
                "Confirm the warnings",
                "The draft's checks found problems: read them on its page, then tick "
                "“I have read the warnings” to send it as it is (or edit it).",
                back,
            )
    try:
        decision = await asyncio.to_thread(store.decide, engine, item_id, kind, args, version, who)
    except store.NotFound:
        return error_page(request, 404, "Not found", "There is no such item in the inbox.")
    except store.claims.Claimed as exc:
        return error_page(request, 409, f"Claimed by {exc.reviewer}", f"{exc}.", back)
    except store.Conflict as exc:
        return error_page(request, 409, "Changed meanwhile", str(exc), back)
    except store.Invalid as exc:
        return error_page(request, 422, "Not accepted", str(exc), back)
    published = await publish_decision(request.app.state.service.connection, engine, decision)
    log.info("%s decided %s on %s", who.name, kind, item_id)
    note = "" if published else " (it goes out as soon as the broker answers)"
    session = await session_of(request)
    if session is not None:
        flash = f"{DONE[kind]}: {item_id}{note}"
        await asyncio.to_thread(edge_of(request).sessions.flash, session, flash)
    return RedirectResponse(await _next_for(engine, who, decision.thread), status_code=303)


async def _next_for(engine: Any, who: store.Reviewer, decided: str) -> str:
    """Where a reviewer goes after a decision: the next waiting item (as the list orders them,
    of another conversation, not claimed by someone else), or the inbox when none is left."""
    items, _ = await asyncio.to_thread(store.list_items, engine, status="waiting", limit=20)
    items = await asyncio.to_thread(store.with_claims, engine, items)
    for item in items:
        if item["thread"] != decided and item["claimed_by"] in (None, who.name):
            return item_url(item["id"]) + "?after=decision"
    return "/inbox"
