"""The review inbox as a JSON API (described at /openapi.json), one module per resource:
`items`, `deadletters`, `instructions`, `autosend`; who may call which (`access`). Bodies are
limited before any route reads them (see `web.middleware`)."""

from __future__ import annotations

import functools
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..openapi import document
from . import autosend, deadletters, instructions, items
from .access import middleware

__all__ = ["middleware", "routes"]


async def openapi(request: Request) -> Response:
    return JSONResponse(_document())


@functools.cache
def _document() -> dict[str, Any]:
    return document(routes)


routes = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/api/items", items.list_items, methods=["GET"]),
    Route("/api/items/{id}", items.get_item, methods=["GET"]),
    Route("/api/items/{id}/decision", items.post_decision, methods=["POST"]),
    Route("/api/items/{id}/claim", items.post_claim, methods=["POST"]),
    Route("/api/items/{id}/claim", items.delete_claim, methods=["DELETE"]),
    Route("/api/stats", items.get_stats, methods=["GET"]),
    Route("/api/deadletters", deadletters.list_dead_letters, methods=["GET"]),
    Route("/api/deadletters/{id}/replay", deadletters.replay_dead_letter, methods=["POST"]),
    Route("/api/review-log", items.get_review_log, methods=["GET"]),
    Route("/api/instructions", instructions.list_instructions, methods=["GET"]),
    Route("/api/instructions", instructions.post_instruction, methods=["POST"]),
    Route("/api/instructions/{id}", instructions.change_instruction, methods=["PATCH", "DELETE"]),
    Route("/api/instructions/{id}/approve", instructions.approve_instruction, methods=["POST"]),
    Route("/api/instructions/{id}/reject", instructions.reject_instruction, methods=["POST"]),
    Route("/api/autosend", autosend.get_autosend, methods=["GET"]),
    Route("/api/autosend/{category}", autosend.post_autosend, methods=["POST"]),
    Route("/api/items/{id}/audit", autosend.post_audit, methods=["POST"]),
]
