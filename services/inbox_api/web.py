"""The reviewer's web page: the inbox list, an item's detail, and the forms that decide it.

Server-rendered (Jinja2, autoescaped), no front-end build. The session cookie (SameSite=strict,
HttpOnly) holds only a random id; the session lives in the inbox's database (see `sessions`),
ends at logout or at its absolute lifetime, and takes the reviewer's role from the configured
tokens on every request. Every form POST must come from this site (Origin, else Referer, names
this host) and, once logged in, carry the session's CSRF token; wrong tokens at the login are
throttled per client address like the API's. Viewers read; only reviewers decide. Bad form
input gets a 4xx page, never a 500.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import json
import logging
import math
import re
import secrets
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates
from starlette.types import Scope

from shared import bodies
from shared.inbox import InterruptConfig

from . import store
from .api import Inbox, Perimeter, attempt_refused, client_address, perimeter, publish_decision
from .render import age, changes, diff, fold, utc, when
from .sessions import COOKIE, WebSession

log = logging.getLogger(__name__)

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


def _edge(request: Request) -> Perimeter:
    return perimeter(request.app)


async def _current(request: Request) -> WebSession | None:
    """The request's live session, if its cookie names one (looked up once per request)."""
    try:
        cached: WebSession | None = request.state.session
        return cached
    except AttributeError:
        pass
    found = await asyncio.to_thread(_edge(request).sessions.find, request.cookies.get(COOKIE))
    request.state.session = found
    return found


def _user(request: Request) -> store.Reviewer | None:
    """The user of the session `_current` found (None before it was asked, or without one)."""
    session: WebSession | None = getattr(request.state, "session", None)
    return session.user if session else None


def _set_cookie(response: Response, edge: Perimeter, session_id: str) -> None:
    lifetime = math.ceil(edge.sessions.lifetime.total_seconds())
    response.set_cookie(
        COOKIE,
        session_id,
        max_age=lifetime,
        path="/",
        secure=edge.cookie_secure,
        httponly=True,
        samesite="strict",
    )


def _clear_cookie(request: Request, response: Response) -> None:
    if COOKIE in request.cookies:
        edge = _edge(request)
        response.delete_cookie(
            COOKIE, path="/", secure=edge.cookie_secure, httponly=True, samesite="strict"
        )


def _to_login(request: Request) -> Response:
    """To the login page, dropping a cookie whose session has ended."""
    answer = RedirectResponse("/login", status_code=303)
    _clear_cookie(request, answer)
    return answer


_PORTS = {"http": 80, "https": 443}


def _same_origin(request: Request) -> bool:
    """False when a browser says the form was posted from another site: the Origin header (else
    the Referer) must name this request's Host. Without either it is no browser's form post."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is None:
        return True
    try:
        sent = urlsplit(origin)
        scheme = sent.scheme.lower()
        here = urlsplit("//" + request.headers.get("host", ""))
        default = _PORTS.get(scheme)
        return (
            default is not None
            and sent.hostname is not None
            and (sent.hostname, sent.port or default) == (here.hostname, here.port or default)
        )
    except ValueError:  # a port that is not a number, a malformed IPv6 host
        return False


def _page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(16)
    session: WebSession | None = getattr(request.state, "session", None)
    csrf = session.csrf if session else ""
    full = {"user": _user(request), "csrf": csrf, "nonce": nonce, "flash": None, **context}
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
    if not _same_origin(request):
        log.warning("form post to %s from another site refused", request.url.path)
        return _error(request, 403, "Refused", "This form was sent from another site.")
    length = request.headers.get("content-length", "")
    if re.fullmatch(r"[0-9]+", length) and int(length) > MAX_FORM_BYTES:
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


async def _guard(
    request: Request, form: FormData, role: Literal["viewer", "reviewer"]
) -> store.Reviewer | Response:
    """The session's user, if logged in, the form carries the session's CSRF token, and the
    role suffices; otherwise the refusal page."""
    session = await _current(request)
    if session is None:
        answer = _error(request, 401, "Log in first", "Your session has ended.", back="/login")
        _clear_cookie(request, answer)
        return answer
    who = session.user
    sent = _text(form, "csrf") or ""
    if not hmac.compare_digest(sent.encode(), session.csrf.encode()):
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
    if await _current(request) is None:
        return _to_login(request)
    return RedirectResponse("/inbox", status_code=303)


async def login_form(request: Request) -> Response:
    if await _current(request) is not None:
        return RedirectResponse("/inbox", status_code=303)
    return _page(request, "login.html", {"error": None})


async def login(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    edge, client = _edge(request), client_address(request)
    wait = edge.throttle.retry_after(client)
    if wait:
        message = f"Too many wrong tokens from your address; try again in {wait} s."
        answer = _error(request, 429, "Too many attempts", message, back="/login")
        answer.headers["Retry-After"] = str(wait)
        return answer
    token = (_text(form, "token") or "").strip()
    who = _inbox(request).reviewers.authenticate(token or None)
    if who is None:
        attempt_refused(edge.throttle, client, "web login")
        return _page(request, "login.html", {"error": "That token is not valid."}, 401)
    await asyncio.to_thread(edge.sessions.close, request.cookies.get(COOKIE))  # a new id each time
    session_id = await asyncio.to_thread(edge.sessions.open, token)
    log.info("%s logged in to the web inbox from %s", who.name, client)
    answer = RedirectResponse("/inbox", status_code=303)
    _set_cookie(answer, edge, session_id)
    return answer


async def logout(request: Request) -> Response:
    form = await _form(request)
    if isinstance(form, Response):
        return form
    if await _current(request) is not None:
        who = await _guard(request, form, "viewer")
        if isinstance(who, Response):
            return who
        await asyncio.to_thread(_edge(request).sessions.close, request.cookies.get(COOKIE))
        request.state.session = None
    answer = RedirectResponse("/login", status_code=303)
    _clear_cookie(request, answer)
    return answer


async def inbox_page(request: Request) -> Response:
    session = await _current(request)
    if session is None:
        return _to_login(request)
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
        "flash": session.flash,
    }
    if session.flash is not None:  # shown once
        await asyncio.to_thread(_edge(request).sessions.flash, session, None)
    return _page(request, "list.html", context)


async def inbox_version(request: Request) -> Response:
    if await _current(request) is None:
        return JSONResponse({"error": "log in first"}, status_code=401)
    stats = await asyncio.to_thread(store.stats, _inbox(request).engine)
    return JSONResponse(
        {"version": version_stamp(stats), "waiting": stats["by_status"].get("waiting", 0)},
        headers={"Cache-Control": "no-store"},
    )


async def item_page(request: Request) -> Response:
    session = await _current(request)
    if session is None:
        return _to_login(request)
    who = session.user
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
    who = await _guard(request, form, "reviewer")
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
    who = await _guard(request, form, "reviewer")
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
    session = await _current(request)
    if session is not None:
        flash = f"{DONE[kind]}: {item_id}{note}"
        await asyncio.to_thread(_edge(request).sessions.flash, session, flash)
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


class _BodyLimit(bodies.BodyLimit):
    """Bodies at most DESK_MAX_BODY bytes, arriving within DESK_BODY_TIMEOUT seconds, for every
    route; the API's refusal is JSON, the web's a page."""

    def limits(self, scope: Scope) -> tuple[int, float | None]:
        edge = perimeter(scope["app"])
        return edge.max_body, edge.body_timeout

    def refusal(self, scope: Scope, exc: bodies.BodyRefused) -> Response:
        if scope["path"].startswith("/api/"):
            return super().refusal(scope, exc)
        if exc.status == 413:
            title, message = "Too large", "That form is larger than this page accepts."
        else:
            title, message = "Too slow", "The form did not arrive in time; try again."
        answer = _error(Request(scope), exc.status, title, message)
        answer.headers.update(bodies.closing(exc))
        return answer


def middleware() -> list[Middleware]:
    """The request body limit, in front of every route. (Sessions are server-side, see
    `sessions`: no secret signs a cookie.)"""
    return [Middleware(_BodyLimit)]
