"""The reviewer's web page: the inbox list, an item's detail, and the forms that decide it.

Server-rendered (Jinja2, autoescaped), no front-end build. A signed session cookie
(SameSite=strict, HttpOnly) holds the reviewer's name and role, taken from the token they
logged in with, and a random CSRF token every POST must carry. Viewers read; only reviewers
decide. Bad form input gets a 4xx page, never a 500.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import json
import logging
import re
import secrets
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlencode

import jinja2
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

from shared.inbox import InterruptConfig

from . import store
from .api import Inbox, publish_decision
from .render import age, changes, diff, fold, utc, when

log = logging.getLogger(__name__)

SESSION_SECONDS = 8 * 3600
MAX_FORM_BYTES = 256 * 1024
MAX_TEXT = 20_000
PAGE_SIZE = 50
SORTS = ("oldest", "newest", "priority")
KINDS = ("accept", "edit", "response", "ignore")
DONE = {
    "accept": "Accepted",
    "edit": "Edited reply approved",
    "response": "Feedback sent; a new draft will follow",
    "ignore": "Ignored",
}
STATE = {  # what each status means, in the reviewer's words
    "waiting": "Waiting for a reviewer.",
    "redrafting": "Feedback given: the next version is being drafted.",
    "sending": "Approved: the sender is delivering it. Not sent yet.",
    "sent": "Sent to the customer.",
    "failed": "Sending failed.",
    "withdrawn": "Withdrawn: nothing will be sent.",
    "ignored": "Ignored: nothing was sent.",
    "superseded": "Replaced by a newer version.",
}

templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
    )
)
templates.env.filters["utc"] = utc


def version_stamp(stats: dict[str, Any]) -> str:
    """Changes whenever any item arrives or changes status (every change moves a count)."""
    counts = json.dumps(stats["by_status"], sort_keys=True).encode()
    return hashlib.sha256(counts).hexdigest()[:16]


def _item_url(item_id: str) -> str:
    return "/items/" + quote(item_id, safe="")


# -- request plumbing ----------------------------------------------------------------------------


def _inbox(request: Request) -> Inbox:
    inbox: Inbox = request.app.state.inbox
    return inbox


def _user(request: Request) -> store.Reviewer | None:
    name, role = request.session.get("name"), request.session.get("role")
    if isinstance(name, str) and role in ("reviewer", "viewer"):
        return store.Reviewer(name, role)
    return None


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(16)
    csrf = request.session.get("csrf")
    full = {"user": _user(request), "csrf": csrf or "", "nonce": nonce, "flash": None, **context}
    headers = {
        "Content-Security-Policy": (
            f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; "
            "connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; "
            "base-uri 'none'"
        ),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": "no-store",
    }
    return templates.TemplateResponse(request, name, full, status_code=status, headers=headers)


def _error(
    request: Request, status: int, title: str, message: str, back: str = "/inbox"
) -> Response:
    context = {"title": title, "message": message, "back": back, "status": status}
    return _page(request, "error.html", context, status)


async def _form(request: Request) -> FormData | Response:
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_FORM_BYTES:
        return _error(request, 413, "Too large", "That form is larger than this page accepts.")
    try:
        return await request.form(max_files=0, max_fields=20)
    except HTTPException as exc:
        return _error(request, 400, "Bad form", str(exc.detail))
    except (UnicodeDecodeError, ValueError):
        return _error(request, 400, "Bad form", "The form could not be read.")


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    if not isinstance(value, str):
        return None
    return value.replace("\r\n", "\n").replace("\r", "\n")


def _version(form: FormData) -> int | None:
    text = _text(form, "version") or ""
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) and int(text) >= 1 else None


def _guard(
    request: Request, form: FormData, role: Literal["viewer", "reviewer"]
) -> store.Reviewer | Response:
    """The session's user, if logged in, the form carries the session's CSRF token, and the
    role suffices; otherwise the refusal page."""
    who = _user(request)
    if who is None:
        return _error(request, 401, "Log in first", "Your session has ended.", back="/login")
    expected = request.session.get("csrf")
    sent = _text(form, "csrf") or ""
    if not isinstance(expected, str) or not hmac.compare_digest(sent.encode(), expected.encode()):
        return _error(
            request, 403, "Form expired", "This form is not from your current session; reload."
        )
    if role == "reviewer" and who.role != "reviewer":
        return _error(request, 403, "Read only", "Your token may read the inbox but not decide.")
    return who


def _allowed(item: dict[str, Any], who: store.Reviewer) -> dict[str, bool]:
    config = InterruptConfig.model_validate(item["config"])
    can = who.role == "reviewer" and item["status"] == "waiting"
    return {kind: can and config.allows(kind) for kind in KINDS}  # type: ignore[arg-type]


def _previous(item: dict[str, Any], versions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The version this one replaces, when comparing their replies says what changed: the
    one before it in the same round, or one it superseded (a reply already sent is history)."""
    before = [v for v in versions if v["version"] < item["version"]]
    if not before or not isinstance(before[-1].get("reply"), str):
        return None
    last = before[-1]
    if last["round"] == item["round"] or last["status"] in ("superseded", "redrafting"):
        return last
    return None


def _draft(item: dict[str, Any]) -> str:
    reply = (item["action_request"].get("args") or {}).get("reply")
    return reply if isinstance(reply, str) else ""


# -- pages ---------------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    return RedirectResponse("/inbox" if _user(request) else "/login", status_code=303)


async def login_form(request: Request) -> Response:
    if _user(request) is not None:
        return RedirectResponse("/inbox", status_code=303)
    return _page(request, "login.html", {"error": None})


async def login(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    token = (_text(form, "token") or "").strip()
    who = _inbox(request).reviewers.authenticate(token or None)
    if who is None:
        log.warning("web login refused")
        return _page(request, "login.html", {"error": "That token is not valid."}, 401)
    request.session.clear()
    request.session.update({"name": who.name, "role": who.role, "csrf": secrets.token_urlsafe(32)})
    log.info("%s logged in to the web inbox", who.name)
    return RedirectResponse("/inbox", status_code=303)


async def logout(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    if _user(request) is not None:
        who = _guard(request, form, "viewer")
        if isinstance(who, Response):
            return who
    request.session.clear()
    return RedirectResponse("/login", status_code=303)


async def inbox_page(request: Request) -> Response:
    if _user(request) is None:
        return RedirectResponse("/login", status_code=303)
    q = request.query_params
    status = q.get("status") or "waiting"
    if status != "all" and status not in store.STATUSES:
        return _error(request, 422, "Unknown status", f"Pick one of {', '.join(store.STATUSES)}.")
    sort = q.get("sort") or "oldest"
    if sort not in SORTS:
        return _error(request, 422, "Unknown order", "Sort by oldest, newest or priority.")
    priority = q.get("priority") or ""
    if priority and priority not in store.PRIORITIES:
        return _error(
            request, 422, "Unknown priority", f"Pick one of {', '.join(store.PRIORITIES)}."
        )
    category = (q.get("category") or "").strip()[:100]
    text = (q.get("text") or "").strip()[:200]
    engine = _inbox(request).engine
    stats = await asyncio.to_thread(store.stats, engine)  # before the list: a change between
    try:  # the two queries costs at most one extra reload, never a missed one
        items, next_cursor = await asyncio.to_thread(
            store.list_items,
            engine,
            status=None if status == "all" else status,
            category=category or None,
            text=text or None,
            priority=priority or None,
            sort=sort,  # type: ignore[arg-type]
            cursor=q.get("cursor") or None,
            limit=PAGE_SIZE,
        )
    except store.Invalid as exc:
        return _error(request, 422, "Bad page link", str(exc))
    now = dt.datetime.now(dt.UTC)
    rows = [
        {**item, "age": age(when(item["created_at"]), now), "url": _item_url(item["id"])}
        for item in items
    ]
    kept = {"priority": priority, "category": category, "text": text, "sort": sort}
    tabs = [
        {
            "name": name,
            "count": None if name == "all" else stats["by_status"].get(name, 0),
            "url": "/inbox?" + urlencode({"status": name, **kept}),
            "current": name == status,
        }
        for name in (*store.STATUSES, "all")
    ]
    more = "/inbox?" + urlencode({"status": status, **kept, "cursor": next_cursor})
    context = {
        "items": rows,
        "tabs": tabs,
        "status": status,
        "sort": sort,
        "priority": priority,
        "priorities": store.PRIORITIES,
        "category": category,
        "text": text,
        "categories": sorted(c for c in stats["by_category"] if c != "none"),
        "next_url": more if next_cursor else None,
        "version": version_stamp(stats),
        "flash": request.session.pop("flash", None),
    }
    return _page(request, "list.html", context)


async def inbox_version(request: Request) -> Response:
    if _user(request) is None:
        return JSONResponse({"error": "log in first"}, status_code=401)
    stats = await asyncio.to_thread(store.stats, _inbox(request).engine)
    return JSONResponse(
        {"version": version_stamp(stats), "waiting": stats["by_status"].get("waiting", 0)},
        headers={"Cache-Control": "no-store"},
    )


async def item_page(request: Request) -> Response:
    who = _user(request)
    if who is None:
        return RedirectResponse("/login", status_code=303)
    item = await asyncio.to_thread(
        store.get_item, _inbox(request).engine, request.path_params["id"]
    )
    if item is None:
        return _error(request, 404, "Not found", "There is no such item in the inbox.")
    args = item["action_request"].get("args") or {}
    versions = [{**v, "url": _item_url(v["id"])} for v in item["versions"]]
    latest = versions[-1] if versions else None
    allowed = _allowed(item, who)
    reply = _draft(item)
    earlier, recent = fold(item.get("conversation") or [], item.get("round_messages") or [])
    previous = _previous(item, versions)
    lines = await asyncio.to_thread(changes, previous["reply"] or "", reply) if previous else []
    rewritten = bool(lines) and all(kind in ("removed", "added") for kind, _ in lines)
    result = item.get("result") or {}
    context = {
        "item": item,
        "url": _item_url(item["id"]),
        "reply": reply,
        "rows": min(30, max(8, reply.count("\n") + 3)),
        "editing": request.query_params.get("edit") == "1" and allowed["edit"],
        "subject": args.get("subject") if isinstance(args.get("subject"), str) else None,
        "other_args": {k: v for k, v in args.items() if k not in ("reply", "subject")},
        "age": age(when(item["created_at"]), dt.datetime.now(dt.UTC)),
        "allowed": allowed,
        "state": STATE.get(item["status"], item["status"]),
        "error": result.get("error") if item["status"] == "failed" else None,
        "customer": item.get("customer") or {},
        "ticket_url": _inbox(request).link(item.get("ticket_id")),
        "notified": [n for n in item.get("notifications") or [] if n["type"] == "notify.sent"],
        "not_notified": [
            n for n in item.get("notifications") or [] if n["type"] == "notify.failed"
        ],
        "messages": len(earlier) + len(recent),
        "earlier_messages": earlier,
        "recent_messages": recent,
        "answered": [m for m in recent if m["answered"]],
        "previous": previous,
        # a rewrite has no line in common: the new text is above, show only what went
        "changes": [line for line in lines if line[0] == "removed"] if rewritten else lines,
        "rewritten": rewritten,
        "earlier": [v for v in versions if v["version"] != item["version"]],
        "latest": latest if latest and latest["version"] > item["version"] else None,
    }
    return _page(request, "item.html", context)


async def edit_preview(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    who = _guard(request, form, "reviewer")
    if isinstance(who, Response):
        return who
    item_id = request.path_params["id"]
    back = _item_url(item_id)
    version = _version(form)
    reply = (_text(form, "reply") or "").strip()
    if version is None:
        return _error(request, 422, "Bad form", "The form lacks the item version.", back)
    if len(reply) > MAX_TEXT:
        return _error(request, 422, "Too long", f"A reply is at most {MAX_TEXT} characters.", back)
    item = await asyncio.to_thread(store.get_item, _inbox(request).engine, item_id)
    if item is None:
        return _error(request, 404, "Not found", "There is no such item in the inbox.")
    if item["version"] != version or item["status"] != "waiting":
        message = f"You saw v{version}; this item is v{item['version']}, {item['status']}."
        return _error(request, 409, "Changed meanwhile", message, back)
    if not _allowed(item, who)["edit"]:
        return _error(request, 422, "Not allowed", "This item cannot be edited.", back)
    if not reply:
        return _error(request, 422, "Empty reply", "An edit needs a non-empty reply.", back)
    draft = _draft(item)
    context = {
        "item": item,
        "url": back,
        "reply": reply,
        "segments": await asyncio.to_thread(diff, draft, reply),
        "unchanged": reply == draft.strip(),
    }
    return _page(request, "preview.html", context)


async def decide(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    who = _guard(request, form, "reviewer")
    if isinstance(who, Response):
        return who
    item_id = request.path_params["id"]
    back = _item_url(item_id)
    kind = _text(form, "type")
    version = _version(form)
    if kind not in KINDS or version is None:
        return _error(request, 422, "Bad form", "The form lacks a decision or a version.", back)
    args: str | None = None
    if kind in ("edit", "response"):
        args = (_text(form, "reply" if kind == "edit" else "feedback") or "").strip()
        if len(args) > MAX_TEXT:
            return _error(request, 422, "Too long", f"At most {MAX_TEXT} characters.", back)
    engine = _inbox(request).engine
    try:
        decision = await asyncio.to_thread(store.decide, engine, item_id, kind, args, version, who)
    except store.NotFound:
        return _error(request, 404, "Not found", "There is no such item in the inbox.")
    except store.Conflict as exc:
        return _error(request, 409, "Changed meanwhile", str(exc), back)
    except store.Invalid as exc:
        return _error(request, 422, "Not accepted", str(exc), back)
    published = await publish_decision(request.app.state.service.bus, engine, decision)
    log.info("%s decided %s on %s", who.name, kind, item_id)
    note = "" if published else " (it goes out as soon as the broker answers)"
    request.session["flash"] = f"{DONE[kind]}: {item_id}{note}"
    return RedirectResponse("/inbox", status_code=303)


routes: list[BaseRoute] = [
    Route("/", home, methods=["GET"]),
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/inbox", inbox_page, methods=["GET"]),
    Route("/inbox/version", inbox_version, methods=["GET"]),
    Route("/items/{id}", item_page, methods=["GET"]),
    Route("/items/{id}/edit", edit_preview, methods=["POST"]),
    Route("/items/{id}/decide", decide, methods=["POST"]),
]


def middleware(session_secret: str | None, cookie_secure: bool) -> list[Middleware]:
    """The signed session cookie; without a configured secret, a random one per process (so a
    restart logs everyone out, and replicas behind one address need the setting)."""
    return [
        Middleware(
            SessionMiddleware,
            secret_key=session_secret or secrets.token_urlsafe(32),
            session_cookie="desk_session",
            max_age=SESSION_SECONDS,
            same_site="strict",
            https_only=cookie_secure,
        )
    ]
