"""What every page answer is: a template rendered with the user, the CSRF token and a fresh CSP
nonce, under the security headers; the error page; the way to the login."""

from __future__ import annotations

import secrets
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from shared.http import HTTPError, http_error

from ..render import utc
from ..sessions import WebSession
from ..watch import Watch
from .cookies import clear_cookie, user_of

templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parents[1] / "templates"),
        autoescape=True,
    )
)
templates.env.filters["utc"] = utc


def item_url(item_id: str) -> str:
    return "/items/" + quote(item_id, safe="")


def page(request: Request, name: str, context: dict[str, Any], status: int = 200) -> Response:
    nonce = secrets.token_urlsafe(16)
    session: WebSession | None = getattr(request.state, "session", None)
    csrf = session.csrf if session else ""
    user = user_of(request)
    watch: Watch | None = getattr(request.app.state, "watch", None)
    admin = user is not None and user.name in request.app.state.inbox.admins
    full = {
        "user": user,
        "csrf": csrf,
        "nonce": nonce,
        "flash": None,
        "admin": admin,
        "banner": watch.banner() if watch and user else None,  # the model is down
        "dead_letters": watch.dead_letters if watch and admin else None,
        **context,
    }
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


def error_page(
    request: Request, status: int, title: str, message: str, back: str = "/inbox"
) -> Response:
    context = {"title": title, "message": message, "back": back, "status": status}
    return page(request, "error.html", context, status)


async def refused(request: Request, exc: Exception) -> Response:
    """An `HTTPError` raised while answering: JSON for the API (`/api/…`, `/openapi.json`), a
    page for a browser; or the answer it carries."""
    assert isinstance(exc, HTTPError)
    if exc.answer is not None or not is_page(request):
        return await http_error(request, exc)
    title = exc.title or HTTPStatus(exc.status).phrase
    answer = error_page(request, exc.status, title, exc.message, exc.back or "/inbox")
    answer.headers.update(exc.headers)
    return answer


def is_page(request: Request) -> bool:
    path = request.url.path
    return not (path.startswith("/api/") or path == "/openapi.json")


def to_login(request: Request) -> Response:
    """To the login page, dropping a cookie whose session has ended."""
    answer = RedirectResponse("/login", status_code=303)
    clear_cookie(request, answer)
    return answer
