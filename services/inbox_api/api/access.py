"""Who may call the inbox API, and the refusals every route shares: the bearer token is read
once, before routing, by a Starlette authentication backend (`TokenBackend`: 401 for an
unknown token, 429 for too many from one address); a route declares the role it needs
(`requires`), which answers 401 or 403 for a caller that may not, and hands the handler the
token's reviewer; the store's refusals and a body that is not the route's model are
raised as their answers (`HTTPError`).

Reading needs any reviewer token (`viewer` or `reviewer`); deciding and replaying dead letters
need the `reviewer` role; the counts (`/api/stats`) also take the daily report's `reporter`
token, which reads nothing else. The reviewer's name comes from the token, never from the client.
A client address that keeps presenting wrong tokens gets 429 (see `throttle`).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.authentication import (
    AuthCredentials,
    AuthenticationBackend,
    AuthenticationError,
    BaseUser,
)
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from shared.errors import first_error
from shared.http import HTTPError

from .. import store
from ..auth import bearer
from ..core import attempt_refused, client_address, inbox_of, perimeter

Role = Literal["reporter", "viewer", "reviewer"]
Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, store.Reviewer], Awaitable[Response]]  # given the reviewer


class Token(BaseUser):
    """Who a bearer token is: a reviewer (or the daily report's reporter)."""

    def __init__(self, reviewer: store.Reviewer) -> None:
        self.reviewer = reviewer

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.reviewer.name


class Refused(AuthenticationError):
    """A token presented and refused: an unknown one (401), or too many from one address
    (429)."""

    def __init__(self, error: HTTPError) -> None:
        super().__init__(error.message)
        self.error = error


class TokenBackend(AuthenticationBackend):
    """The API's bearer tokens (`Authorization: Bearer …`), for the API's routes only (the pages
    use their sessions): a reviewer's token grants `reporter` and `viewer`, and `reviewer` for
    the reviewer role; the daily report's token `reporter` alone. No token: not authenticated
    (the route's `requires` says 401)."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if not conn.url.path.startswith("/api/"):
            return None
        token = bearer(conn.headers.get("authorization"))
        if token is None:
            return None
        edge, client = perimeter(conn.app), client_address(conn)
        wait = edge.throttle.retry_after(client)
        if wait:
            message = f"too many wrong tokens from your address; retry in {wait} s"
            raise Refused(HTTPError(429, message, headers={"Retry-After": str(wait)}))
        reviewers = inbox_of(conn).reviewers
        reviewer = reviewers.authenticate(token)
        if reviewer is None and (reporter := reviewers.reporter(token)) is not None:
            return AuthCredentials(["reporter"]), Token(reporter)
        if reviewer is None:
            attempt_refused(edge.throttle, client, "API token")
            raise Refused(
                HTTPError(
                    401,
                    "this token is not a reviewer's (unknown, or removed from DESK_REVIEWERS)",
                    headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )
            )
        decides = ["reviewer"] if reviewer.role == "reviewer" else []
        return AuthCredentials(["reporter", "viewer", *decides]), Token(reviewer)


def refused(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    error = exc.error if isinstance(exc, Refused) else HTTPError(401, str(exc))
    body = {"error": error.message}
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def middleware() -> list[Middleware]:
    """Who calls the API, from the bearer token, before any route runs."""
    return [Middleware(AuthenticationMiddleware, backend=TokenBackend(), on_error=refused)]


def requires(role: Role) -> Callable[[Handler], Endpoint]:
    """The route answers only a token that may act as `role` (401 without one, 403 for one
    that may not); its handler is given the token's reviewer."""

    def decorate(handler: Handler) -> Endpoint:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            if role not in request.auth.scopes:
                raise _refusal(request)
            token: Token = request.user
            return await handler(request, token.reviewer)

        return endpoint

    return decorate


def _refusal(request: Request) -> HTTPError:
    if not request.user.is_authenticated:
        return HTTPError(
            401, "a reviewer token is required", headers={"WWW-Authenticate": "Bearer"}
        )
    if request.auth.scopes == ["reporter"]:
        return HTTPError(403, "this token reads the counts (/api/stats) only")
    return HTTPError(403, "this token may read the inbox but not decide")


async def in_store(call: Any, *args: Any, missing: str | None = None, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)` off the event loop; the store's refusals raised as their
    answers (404 with `missing`, or the store's words; 409; 422)."""
    try:
        return await asyncio.to_thread(functools.partial(call, *args, **kwargs))
    except store.NotFound as exc:
        raise HTTPError(404, missing or str(exc)) from None
    except store.claims.Claimed as exc:  # who holds it, for a client to show or to take over
        until = exc.until.isoformat()
        raise HTTPError(409, str(exc), claimed_by=exc.reviewer, until=until) from None
    except store.Conflict as exc:
        raise HTTPError(409, str(exc)) from None
    except store.Invalid as exc:
        raise HTTPError(422, str(exc)) from None


Parsed = TypeVar("Parsed", bound=BaseModel)


def parsed(model: type[Parsed], raw: bytes) -> Parsed:
    """A JSON request body as `model`, or the 400 (not JSON) / 422 (not that shape) answer."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        status = 400 if exc.errors()[0]["type"] == "json_invalid" else 422
        raise HTTPError(status, first_error(exc, "body")) from None


async def json_object(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise HTTPError(400, "the body is not JSON") from None
    if not isinstance(body, dict):
        raise HTTPError(422, "body: an object is expected")
    return body
