"""The request body limit, in front of every route of the app (the API's and the page's)."""

from __future__ import annotations

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from shared import bodies

from ..core import perimeter
from .responses import error_page


class BodyLimit(bodies.BodyLimit):
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
        answer = error_page(Request(scope), exc.status, title, message)
        answer.headers.update(bodies.closing(exc))
        return answer


def middleware() -> list[Middleware]:
    """The request body limit, in front of every route. (Sessions are server-side, see
    `inbox_api.sessions`: no secret signs a cookie.)"""
    return [Middleware(BodyLimit)]
