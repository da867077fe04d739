"""The dead letters, for admins (`DESK_ADMINS`): what failed for good, service by service (what
`desk dlq list` shows), with Replay per letter and Replay all (`shared.deadletters`: each
letter's stored original goes back to its subject, and the letter leaves the DLQ). Reviewers
who are not admins get 403, like the other admin-only forms."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from shared import deadletters
from shared.bus import Bus
from shared.errors import TransientError
from shared.logging import redact

from ..core import inbox_of
from .cookies import edge_of, flash_of, session_of
from .forms import reviewer_form
from .responses import error_page, page, to_login

log = logging.getLogger(__name__)

BACK = "/deadletters"
LIMIT = 200  # letters on the page, oldest first
ERROR_WIDTH = 300


def letter_row(d: deadletters.DeadLetter) -> dict[str, Any]:
    error_text = " ".join(redact(d.error).split())
    return {
        "id": d.id,
        "time": d.time.isoformat(),
        "service": d.service,
        "claimed_service": d.claimed_service,
        "subject": d.subject,
        "consumer": d.consumer,
        "attempts": d.attempts,
        "reason": d.reason,
        "error": error_text if len(error_text) <= ERROR_WIDTH else error_text[:ERROR_WIDTH] + "…",
    }


def _bus(request: Request) -> Bus | None:
    bus: Bus | None = request.app.state.service.connection
    return bus if bus is not None and bus.connected else None


def _not_admin(request: Request, name: str) -> Response | None:
    if name in inbox_of(request).admins:
        return None
    return error_page(
        request, 403, "Forbidden", "Only an admin (DESK_ADMINS) sees the dead letters."
    )


async def dead_letters_page(request: Request) -> Response:
    session = await session_of(request)
    if session is None:
        return to_login(request)
    refused = _not_admin(request, session.user.name)
    if refused is not None:
        return refused
    bus = _bus(request)
    if bus is None:
        return error_page(
            request, 503, "Unavailable", "The event store does not answer; try again."
        )
    letters = await deadletters.list_dead_letters(bus.js, limit=LIMIT)
    context = {
        "letters": [letter_row(d) for d in letters],
        "outstanding": await deadletters.count(bus.js),
        "flash": await flash_of(request, session),
    }
    return page(request, "deadletters.html", context)


async def replay(request: Request) -> Response:
    """Replay one letter (`/deadletters/{id}/replay`) or every outstanding one
    (`/deadletters/replay`); back to the page, which says what happened."""
    _, who = await reviewer_form(request)
    refused = _not_admin(request, who.name)
    if refused is not None:
        return refused
    bus = _bus(request)
    if bus is None:
        return error_page(request, 503, "Unavailable", "The event store does not answer.", BACK)
    given = request.path_params.get("id")
    if given is None:
        replayed, failed = await deadletters.replay_all(bus)
        done = f"Replayed {len(replayed)} dead letters"
        if failed:
            done += f"; {len(failed)} not replayed: " + "; ".join(
                f"{id} ({why})" for id, why in failed.items()
            )
        log.info("%s replayed %s dead letters (%s kept)", who.name, len(replayed), len(failed))
    else:
        try:
            letter_id = int(given)
            result = await deadletters.replay(bus, letter_id)
        except (ValueError, LookupError):
            return error_page(
                request, 404, "Not found", "No such dead letter (replayed already?).", BACK
            )
        except deadletters.RefusedReplay as exc:
            return error_page(request, 422, "Not replayed", str(exc), BACK)
        except TransientError as exc:
            return error_page(request, 503, "Not replayed", f"The publish failed: {exc}", BACK)
        done = f"Dead letter {letter_id} replayed to {result.subject}"
        log.info("%s replayed dead letter %s", who.name, letter_id)
    session = await session_of(request)
    if session is not None:
        await asyncio.to_thread(edge_of(request).sessions.flash, session, done)
    return RedirectResponse(BACK, status_code=303)
