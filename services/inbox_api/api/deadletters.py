"""Dead letters over the API: listed, and one replayed to the subject it was stored on."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from shared import deadletters
from shared.http import HTTPError

from .. import store
from ..core import bus_of
from .access import requires

log = logging.getLogger(__name__)


@requires("viewer")
async def list_dead_letters(request: Request, who: store.Reviewer) -> Response:
    bus = bus_of(request)
    if bus is None or not bus.connected:
        raise HTTPError(503, "the event store is unavailable", headers={"Retry-After": "5"})
    letters = await deadletters.list_dead_letters(bus.js, limit=200)
    return JSONResponse({"dead_letters": [d.model_dump(mode="json") for d in letters]})


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
