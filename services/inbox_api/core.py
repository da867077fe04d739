"""The inbox's core, which the JSON API, the web pages and the bus projection share: the
`Inbox` (its database, reviewers and policy) and its `Perimeter` (sessions, the failed-attempt
throttle, the body limits), both built once when the service starts (`main.run`) and found in
the app's state by every request."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from urllib.parse import quote

from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from shared.bus import Bus
from shared.settings import InboxApiSettings

from . import store
from .auth import Reviewers
from .sessions import Sessions
from .throttle import Throttle

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Inbox:
    engine: Engine
    reviewers: Reviewers
    ticket_url: str | None = None  # DESK_HELPDESK_TICKET_URL, a template with {ticket}
    policy: store.autosend.Policy = field(default_factory=store.autosend.Policy)
    admins: frozenset[str] = frozenset()  # DESK_ADMINS: who may turn auto-send on or off
    claim_seconds: float = 300.0  # DESK_CLAIM_SECONDS: how long opening an item claims it

    @classmethod
    def configured(
        cls,
        settings: InboxApiSettings,
        engine: Engine,
        reviewers: Reviewers,
        policy: store.autosend.Policy,
    ) -> Inbox:
        admins = frozenset(settings.admins)
        ticket_url, claim_seconds = settings.helpdesk_ticket_url, settings.claim_seconds
        return cls(engine, reviewers, ticket_url, policy, admins, claim_seconds)

    def link(self, ticket_id: str | None) -> str | None:
        """The ticket in the helpdesk, when a link template is configured."""
        if not self.ticket_url or not ticket_id:
            return None
        return self.ticket_url.replace("{ticket}", quote(ticket_id, safe=""))


@dataclass(frozen=True)
class Perimeter:
    """What the inbox holds at its edge: the web sessions, the failed-attempt throttle, the
    request body limits and whether cookies need HTTPS."""

    sessions: Sessions
    throttle: Throttle
    max_body: int
    body_timeout: float
    cookie_secure: bool

    @classmethod
    def build(cls, inbox: Inbox, settings: InboxApiSettings) -> Perimeter:
        return cls(
            sessions=Sessions(inbox.engine, inbox.reviewers, settings.session_lifetime),
            throttle=Throttle(settings.auth_rate, settings.auth_burst),
            max_body=settings.max_body,
            body_timeout=settings.body_timeout,
            cookie_secure=settings.cookie_secure,
        )


def inbox_of(request: HTTPConnection) -> Inbox:
    inbox: Inbox = request.app.state.inbox
    return inbox


def perimeter(app: Starlette) -> Perimeter:
    found: Perimeter = app.state.perimeter
    return found


def bus_of(request: HTTPConnection) -> Bus | None:
    """The service's bus, None until NATS first answered."""
    bus: Bus | None = request.app.state.service.connection
    return bus


def client_address(request: HTTPConnection) -> str:
    """The client's address (the proxy's X-Forwarded-For when uvicorn trusts the proxy)."""
    return request.client.host if request.client else "unknown"


def attempt_refused(throttle: Throttle, client: str, what: str) -> None:
    """Count a failed credential attempt against the client's address (never the credential)."""
    if throttle.failed(client):
        log.warning("%s refused from %s; its next attempts get 429 for a while", what, client)
    else:
        log.warning("%s refused from %s", what, client)
