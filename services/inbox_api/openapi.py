"""The OpenAPI 3.1 document of the inbox API, assembled from its routes: each route's handler
declares its operation where it is written (`operation`), its request body from the request
model where it has one (`schemas`), and the document is built from the route table, so a route
cannot go undocumented (nor a documented route missing): `document(routes)` refuses either."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, get_args

from pydantic import BaseModel
from starlette.routing import BaseRoute, Route

from shared.inbox import DecisionType

from .schemas import ClaimRequest, DecisionRequest
from .store import STATUSES

F = TypeVar("F", bound=Callable[..., Any])
# handler → method ("get", "post", …; None: the route's only method) → its operation
OPERATIONS: dict[Callable[..., Any], dict[str | None, dict[str, Any]]] = {}

_ERROR = {"$ref": "#/components/schemas/Error"}


def answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"description": description}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return body


def errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "malformed request",
        401: "no or unknown token",
        403: "the token's role may not do this",
        404: "not found",
        408: "the request body did not arrive in time",
        409: "not waiting, or the version is no longer current",
        413: "the request body is larger than the inbox accepts (DESK_MAX_BODY)",
        422: "not allowed by the item, or incomplete",
        429: "too many wrong tokens from this address; retry after Retry-After seconds",
        503: "temporarily unavailable; retry later",
    }
    # every authenticated operation may be throttled, and every body is limited
    return {str(c): answer(text[c], _ERROR) for c in sorted({*codes, 408, 413, 429})}


def body(schema: dict[str, Any]) -> dict[str, Any]:
    """A required JSON request body of `schema`."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def path_id(description: str, kind: str = "string") -> dict[str, Any]:
    return {
        "name": "id",
        "in": "path",
        "required": True,
        "description": description,
        "schema": {"type": kind},
    }


def _instruction() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "a standing instruction every draft of its category is given",
        "required": ["id", "category", "text", "status", "origin", "evidence", "tickets"],
        "properties": {
            "id": {"type": "integer"},
            "category": {"type": "string"},
            "text": {"type": "string"},
            "status": {
                "enum": ["active", "pending", "removed"],
                "description": "pending: new in a category with auto-send on, it reaches no "
                "draft until an admin approves it",
            },
            "origin": {
                "enum": ["learned", "written"],
                "description": "learned from feedback that recurred across tickets, or "
                "written by a reviewer",
            },
            "evidence": {
                "type": "array",
                "description": "the feedback it was learned from, oldest first",
                "items": {"type": "object"},
            },
            "tickets": {"type": "array", "items": {"type": "string"}},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
            "updated_by": {"type": ["string", "null"]},
            "approved_by": {
                "type": ["string", "null"],
                "description": "the admin who approved the text as it reads now; with auto-send "
                "on for the category, only approved instructions reach its drafts",
            },
            "approved_at": {"type": ["string", "null"], "format": "date-time"},
            "proposed": {
                "type": ["string", "null"],
                "description": "an edit waiting for an admin (the text stays in force until then)",
            },
        },
    }


def _review() -> dict[str, Any]:
    figures = {"$ref": "#/components/schemas/ReviewFigures"}
    return {
        "type": "object",
        "description": "what reviewers did with the drafts in the last `days` x 24 hours",
        "required": ["days", "since", "until", "overall", "by_category", "by_day"],
        "properties": {
            "days": {"type": "integer"},
            "since": {"type": "string", "format": "date-time"},
            "until": {"type": "string", "format": "date-time"},
            "overall": figures,
            "by_category": {"type": "object", "additionalProperties": figures},
            "by_day": {
                "type": "array",
                "description": "every UTC date the window touches, oldest first",
                "items": {
                    "allOf": [
                        figures,
                        {
                            "type": "object",
                            "required": ["date"],
                            "properties": {"date": {"type": "string", "format": "date"}},
                        },
                    ]
                },
            },
        },
    }


def _review_figures() -> dict[str, Any]:
    kinds = get_args(DecisionType)
    share = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
    seconds = {"type": ["number", "null"]}
    return {
        "type": "object",
        "required": [
            "decisions",
            *kinds,
            "rates",
            "unedited_share",
            "edit_ratio",
            "changed_chars",
            "edits_measured",
            "time_to_decision_seconds",
        ],
        "properties": {
            "decisions": {"type": "integer", "minimum": 0},
            **{kind: {"type": "integer", "minimum": 0} for kind in kinds},
            "rates": {
                "type": "object",
                "description": "each kind's share of the decisions",
                "properties": {kind: share for kind in kinds},
            },
            "unedited_share": {
                **share,
                "description": "accepts / (accepts + edits) on reply drafts",
            },
            "edit_ratio": {
                **share,
                "description": "mean 1 - difflib ratio between draft and sent text, by character",
            },
            "changed_chars": {
                "type": ["number", "null"],
                "description": "mean characters removed from the draft plus characters added",
            },
            "edits_measured": {"type": "integer", "minimum": 0},
            "time_to_decision_seconds": {
                "type": "object",
                "description": "from the item version's creation to its decision",
                "properties": {"median": seconds, "p90": seconds},
            },
        },
    }


def operation(
    summary: str,
    *,
    responses: dict[str, Any],
    method: str | None = None,
    operation_id: str | None = None,
    description: str | None = None,
    parameters: Sequence[dict[str, Any]] = (),
    request: dict[str, Any] | None = None,
) -> Callable[[F], F]:
    """Declare the operation a handler answers (for `method` of its route: for a handler of
    several methods, one declaration per method)."""

    def declare(handler: F) -> F:
        found: dict[str, Any] = {
            "operationId": operation_id or handler.__name__,
            "summary": summary,
            "responses": responses,
        }
        if description:
            found["description"] = description
        if parameters:
            found["parameters"] = list(parameters)
        if request is not None:
            found["requestBody"] = request
        OPERATIONS.setdefault(handler, {})[method] = found
        return handler

    return declare


def model_body(model: type[BaseModel], required: bool = True) -> dict[str, Any]:
    """A JSON request body of a request model (its schema among the components)."""
    return {
        "required": required,
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}
        },
    }


def document(routes: Sequence[BaseRoute]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        if not isinstance(route, Route) or not route.path.startswith("/api/"):
            continue
        declared = OPERATIONS.get(route.endpoint, {})
        for method in sorted(route.methods or ()):
            if method == "HEAD":
                continue
            found = declared.get(method.lower()) or declared.get(None)
            if found is None:
                raise LookupError(f"{method} {route.path}: no operation declared")
            paths.setdefault(route.path, {})[method.lower()] = found
    schemas: dict[str, Any] = {}
    for model in (DecisionRequest, ClaimRequest):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Ambient Desk inbox",
            "version": "1.0.0",
            "description": "Review drafts: list, inspect, decide; dead letters; trail.",
        },
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {"error": {"type": "string"}},
                },
                "Item": _item(),
                "Review": _review(),
                "Instruction": _instruction(),
                "ReviewFigures": _review_figures(),
                **schemas,
            },
        },
        "security": [{"token": []}],
        "paths": paths,
    }


def _item() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": True,
        "required": ["id", "thread", "version", "status", "action_request", "config"],
        "properties": {
            "id": {"type": "string"},
            "thread": {"type": "string"},
            "version": {"type": "integer"},
            "status": {"enum": list(STATUSES)},
            "action_request": {"type": "object"},
            "config": {"type": "object"},
            "round": {"type": ["string", "null"]},
            "round_kind": {"type": ["string", "null"], "enum": ["answer", "followup", None]},
            "cause": {"type": ["string", "null"]},
            "priority": {"type": ["string", "null"]},
            "ticket_status": {"type": ["string", "null"]},
            "customer": {
                "type": ["object", "null"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "email": {"type": "string"},
                },
            },
            "round_messages": {"type": "array", "items": {"type": "string"}},
            "overdue_since": {"type": ["string", "null"], "format": "date"},
            "queue": {
                "type": ["string", "null"],
                "description": "the review queue a routing rule put the work in",
            },
            "service_level": {
                "type": ["object", "null"],
                "description": "where the item stands against its target time to a decision "
                "(null: no target applies); `standing` is null once it no longer waits",
                "properties": {
                    "standing": {"enum": ["ok", "near", "past", None]},
                    "waiting_since": {"type": "string", "format": "date-time"},
                    "near_at": {"type": "string", "format": "date-time"},
                    "due_at": {"type": "string", "format": "date-time"},
                },
            },
            "withdrawn_reason": {"type": ["string", "null"]},
            "trace_id": {
                "type": ["string", "null"],
                "description": "the W3C trace the item belongs to: `desk trace <trace_id>` "
                "prints its path from the webhook to the result",
            },
            "auto": {
                "type": "boolean",
                "description": "decided by the category's auto-send policy, not by a person",
            },
            "audit": {
                "type": ["string", "null"],
                "enum": ["waiting", "fine", "edited", None],
                "description": "an auto-sent reply sampled for a person's audit, and its verdict",
            },
            "instructions": {
                "type": "array",
                "description": "the standing instructions of its category the draft was given",
                "items": {"type": "string"},
            },
            "examples": {
                "type": "array",
                "description": "the past rounds (<ticket>/<round>) whose sent replies the draft "
                "was shown as examples",
                "items": {"type": "string"},
            },
            "no_draft": {
                "type": ["string", "null"],
                "description": "why there is no draft (the model failed on this ticket): a "
                "person writes the reply (edit) or asks for another try (response); no accept",
            },
            "citations": {
                "type": "array",
                "description": "the knowledge-base passages the draft relies on",
                "items": {
                    "type": "object",
                    "required": ["article", "title", "passage"],
                    "properties": {
                        "article": {"type": "string", "description": "the article's id"},
                        "title": {"type": "string"},
                        "section": {"type": "string"},
                        "passage": {"type": "string"},
                        "url": {"type": ["string", "null"]},
                    },
                },
            },
            "conversation": {
                "type": "array",
                "description": "the ticket's messages, oldest first (item detail only)",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "author": {"enum": ["customer", "agent", "note"]},
                        "author_name": {"type": "string"},
                        "body": {"type": "string"},
                        "created_at": {"type": "string", "format": "date-time"},
                    },
                },
            },
            "ticket_url": {"type": ["string", "null"]},
        },
    }
