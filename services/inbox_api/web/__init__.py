"""The reviewer's web page: the inbox list, an item's detail, and the forms that decide it.

Server-rendered (Jinja2, autoescaped), no front-end build. The session cookie (SameSite=strict,
HttpOnly) holds only a random id; the session lives in the inbox's database (see
`inbox_api.sessions`), ends at logout or at its absolute lifetime, and takes the reviewer's role
from the configured tokens on every request. Every form POST must come from this site (Origin,
else Referer, names this host) and, once logged in, carry the session's CSRF token; wrong tokens
at the login are throttled per client address like the API's. Viewers read; only reviewers
decide. Bad form input gets a 4xx page, never a 500.

One module per concept: `cookies` (what a request carries: the inbox, its perimeter, the
session), `responses` (pages, their headers, the error page), `forms` (reading and guarding a
post), `login`, `pages` (the list and an item), `decisions` (the edit preview and the decision),
`instructions` (the standing instructions and their forms), `stats` (the review analytics),
`claims` (who is working on an item: claimed by opening it, renewed while open, taken over),
`bulk` (ignoring the items selected in the list, after one confirmation), `deadletters` (an
admin's view of the dead letters, with replay) and `limits` (the body limit in front of every
route).
"""

from starlette.routing import BaseRoute, Route

from .audits import audit, autosend_page
from .bulk import ignore_selected
from .claims import release, renew, take
from .deadletters import dead_letters_page, replay
from .decisions import decide, edit_preview
from .instructions import instruction_form, instructions_page
from .limits import middleware
from .login import home, login, login_form, logout
from .pages import inbox_page, inbox_version, item_page
from .responses import refused
from .stats import stats_page

__all__ = ["middleware", "refused", "routes"]

routes: list[BaseRoute] = [
    Route("/", home, methods=["GET"]),
    Route("/login", login_form, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/inbox", inbox_page, methods=["GET"]),
    Route("/inbox/version", inbox_version, methods=["GET"]),
    Route("/inbox/ignore", ignore_selected, methods=["POST"]),
    Route("/items/{id}", item_page, methods=["GET"]),
    Route("/items/{id}/edit", edit_preview, methods=["POST"]),
    Route("/items/{id}/decide", decide, methods=["POST"]),
    Route("/items/{id}/claim", renew, methods=["POST"]),
    Route("/items/{id}/release", release, methods=["POST"]),
    Route("/items/{id}/take", take, methods=["POST"]),
    Route("/stats", stats_page, methods=["GET"]),
    Route("/items/{id}/audit", audit, methods=["POST"]),
    Route("/autosend", autosend_page, methods=["GET"]),
    Route("/instructions", instructions_page, methods=["GET"]),
    Route("/instructions", instruction_form, methods=["POST"]),
    Route("/instructions/{id}", instruction_form, methods=["POST"]),
    Route("/deadletters", dead_letters_page, methods=["GET"]),
    Route("/deadletters/replay", replay, methods=["POST"]),
    Route("/deadletters/{id}/replay", replay, methods=["POST"]),
]
