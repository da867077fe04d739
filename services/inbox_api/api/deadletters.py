"""Dead letters over the API: listed, and one replayed to the subject it was stored on."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared import deadletters
from shared.http import HTTPError

from .. import store
from ..core import bus_of
from ..openapi import answer, errors, operation, path_id
from .access import requires

log = logging.getLogger(__name__)


@operation(
    "Dead letters, oldest first",
    responses={"200": answer("dead letters", {"type": "object"}), **errors(401, 503)},
)
@requires("viewer")
async def list_dead_letters(request: Request, who: store.Reviewer) -> Response:
    bus = bus_of(request)
    if bus is None or not bus.connected:
        raise HTTPError(503, "the event store is unavailable", headers={"Retry-After": "5"})
    letters = await deadletters.list_dead_letters(bus.js, limit=200)
    return JSONResponse({"dead_letters": [d.model_dump(mode="json") for d in letters]})


@operation(
    "Republish a dead letter's original message",
    parameters=[path_id("dead letter id", "integer")],
    responses={"202": answer("replayed", {"type": "object"}), **errors(401, 403, 404, 503)},
)
@requires("reviewer")
async def replay_dead_letter(request: Request, who: store.Reviewer) -> Response:
    try:
        letter_id = int(request.path_params["id"])
    except ValueError:
        raise HTTPError(404, "no such dead letter") from None
    bus = bus_of(request)
    if bus is None or not bus.connected:
        raise HTTPError(503, "the event store is unavailable", headers={"Retry-After": "5"})
    try:
        result = await deadletters.replay(bus, letter_id)
    except LookupError:
        raise HTTPError(404, "no such dead letter") from None
    except deadletters.RefusedReplay as exc:
        log.warning("dead letter %s refused for replay: %s", letter_id, exc.why)
        raise HTTPError(422, str(exc)) from None
    log.info("dead letter %s replayed by %s", letter_id, who.name)
    return JSONResponse({"replayed": letter_id, **result.model_dump(mode="json")}, status_code=202)
