"""The OpenAPI 3.1 document for the inbox API, built once from the request/response shapes."""

from __future__ import annotations

import functools
from typing import Any, get_args

from shared.inbox import CATEGORIES, DecisionType

from .schemas import DecisionRequest
from .store import MAX_REVIEW_DAYS, PRIORITIES, REVIEW_DAYS, STATUSES

_ERROR = {"$ref": "#/components/schemas/Error"}


def _answer(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"description": description}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return body


def _errors(*codes: int) -> dict[str, Any]:
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
    return {str(c): _answer(text[c], _ERROR) for c in sorted({*codes, 408, 413, 429})}


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    """A required JSON request body of `schema`."""
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _path_id(description: str, kind: str = "string") -> dict[str, Any]:
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


@functools.cache
def document() -> dict[str, Any]:
    decision_schema = DecisionRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = decision_schema.pop("$defs", {})
    item = {
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
    query = [
        {"name": "status", "in": "query", "schema": {"enum": list(STATUSES)}},
        {"name": "category", "in": "query", "schema": {"type": "string"}},
        {"name": "source", "in": "query", "schema": {"type": "string"}},
        {"name": "text", "in": "query", "schema": {"type": "string"}},
        {"name": "priority", "in": "query", "schema": {"enum": list(PRIORITIES)}},
        {"name": "queue", "in": "query", "schema": {"type": "string"}},
        {
            "name": "mine",
            "in": "query",
            "description": "only the items of the caller's queues and those they have claimed",
            "schema": {"type": "boolean"},
        },
        {"name": "sort", "in": "query", "schema": {"enum": ["oldest", "newest", "priority"]}},
        {"name": "cursor", "in": "query", "schema": {"type": "string"}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 200},
        },
    ]
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
                "Item": item,
                "Review": _review(),
                "Instruction": _instruction(),
                "ReviewFigures": _review_figures(),
                "DecisionRequest": decision_schema,
                **defs,
            },
        },
        "security": [{"token": []}],
        "paths": {
            "/api/items": {
                "get": {
                    "summary": "Items, oldest waiting first by default",
                    "parameters": query,
                    "responses": {
                        "200": _answer(
                            "a page of items",
                            {
                                "type": "object",
                                "required": ["items"],
                                "properties": {
                                    "items": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Item"},
                                    },
                                    "next_cursor": {"type": ["string", "null"]},
                                    "model": {
                                        "type": "object",
                                        "description": "whether the model drafts: while it is "
                                        "down (`up` false), drafts are delayed; `since` and "
                                        "`reason` say since when and why",
                                        "required": ["up"],
                                        "properties": {
                                            "up": {"type": "boolean"},
                                            "since": {"type": "string", "format": "date-time"},
                                            "reason": {"type": "string"},
                                        },
                                    },
                                },
                            },
                        ),
                        **_errors(401, 422, 503),
                    },
                }
            },
            "/api/items/{id}": {
                "get": {
                    "summary": "One item with its versions, feedback, decisions and result",
                    "parameters": [_path_id("item id, <thread>~v<version>")],
                    "responses": {
                        "200": _answer("the item", {"$ref": "#/components/schemas/Item"}),
                        **_errors(401, 404, 503),
                    },
                }
            },
            "/api/items/{id}/decision": {
                "post": {
                    "summary": "Decide on the version you saw",
                    "description": "`version` is the version the reviewer saw; a named "
                    "version that is no longer current gets 409. Without it (LangChain's "
                    "clients send none) the version the item id names is decided, if it still "
                    "waits. The same decision posted again is answered 202 with the recorded "
                    "one.",
                    "parameters": [_path_id("item id, <thread>~v<version>")],
                    "requestBody": _body({"$ref": "#/components/schemas/DecisionRequest"}),
                    "responses": {
                        "202": _answer(
                            "recorded (or recorded already) and published", {"type": "object"}
                        ),
                        **_errors(400, 401, 403, 404, 409, 422, 503),
                    },
                }
            },
            "/api/stats": {
                "get": {
                    "summary": "Counts, oldest waiting item, decision mix, dead letters, and "
                    "the review analytics and drafts of the last `days` (also for the daily "
                    "report's reporter token, which may read nothing else)",
                    "parameters": [
                        {
                            "name": "days",
                            "in": "query",
                            "description": "the review analytics' window: the last N x 24 h",
                            "schema": {
                                "type": "integer",
                                "minimum": 1,
                                "maximum": MAX_REVIEW_DAYS,
                                "default": REVIEW_DAYS,
                            },
                        }
                    ],
                    "responses": {
                        "200": _answer(
                            "statistics",
                            {
                                "type": "object",
                                "required": ["by_status", "by_category", "review"],
                                "properties": {
                                    "by_status": {"type": "object"},
                                    "by_category": {"type": "object"},
                                    "oldest_waiting": {"type": ["object", "null"]},
                                    "decision_mix": {"type": "object"},
                                    "dead_letters": {"type": ["integer", "null"]},
                                    "review": {"$ref": "#/components/schemas/Review"},
                                    "drafts": {
                                        "type": "object",
                                        "description": "drafts made in the window, and their cost",
                                        "properties": {
                                            "days": {"type": "integer"},
                                            "count": {"type": "integer"},
                                            "cost_usd": {"type": "number"},
                                        },
                                    },
                                },
                            },
                        ),
                        **_errors(401, 422, 503),
                    },
                }
            },
            "/api/deadletters": {
                "get": {
                    "summary": "Dead letters, oldest first",
                    "responses": {
                        "200": _answer("dead letters", {"type": "object"}),
                        **_errors(401, 503),
                    },
                }
            },
            "/api/deadletters/{id}/replay": {
                "post": {
                    "summary": "Republish a dead letter's original message",
                    "parameters": [_path_id("dead letter id", "integer")],
                    "responses": {
                        "202": _answer("replayed", {"type": "object"}),
                        **_errors(401, 403, 404, 503),
                    },
                }
            },
            "/api/instructions": {
                "get": {
                    "summary": "The standing instructions (with removed=1, removed ones too)",
                    "parameters": [
                        {"name": "removed", "in": "query", "schema": {"enum": ["0", "1"]}}
                    ],
                    "responses": {
                        "200": _answer(
                            "the instructions, by category",
                            {
                                "type": "object",
                                "required": ["instructions"],
                                "properties": {
                                    "instructions": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/Instruction"},
                                    }
                                },
                            },
                        ),
                        **_errors(401, 503),
                    },
                },
                "post": {
                    "summary": "Write a standing instruction for a category",
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["category", "text"],
                            "properties": {
                                "category": {"enum": list(CATEGORIES)},
                                "text": {"type": "string", "maxLength": 500},
                            },
                        }
                    ),
                    "responses": {
                        "201": _answer("written", {"$ref": "#/components/schemas/Instruction"}),
                        **_errors(400, 401, 403, 422, 503),
                    },
                },
            },
            "/api/instructions/{id}": {
                "patch": {
                    "summary": "Edit an instruction's text (with auto-send on for its category, "
                    "a non-admin's edit waits for an admin)",
                    "parameters": [_path_id("instruction id", "integer")],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["text"],
                            "properties": {"text": {"type": "string", "maxLength": 500}},
                        }
                    ),
                    "responses": {
                        "200": _answer("edited", {"$ref": "#/components/schemas/Instruction"}),
                        **_errors(400, 401, 403, 404, 422, 503),
                    },
                },
                "delete": {
                    "summary": "Remove an instruction (kept as removed: not learned again)",
                    "parameters": [_path_id("instruction id", "integer")],
                    "responses": {
                        "200": _answer("removed", {"$ref": "#/components/schemas/Instruction"}),
                        **_errors(401, 403, 404, 503),
                    },
                },
            },
            "/api/instructions/{id}/approve": {
                "post": {
                    "summary": "Approve an instruction, or the edit proposed for it; admins only "
                    "(DESK_ADMINS)",
                    "parameters": [_path_id("instruction id", "integer")],
                    "responses": {
                        "200": _answer("approved", {"$ref": "#/components/schemas/Instruction"}),
                        **_errors(401, 403, 404, 503),
                    },
                }
            },
            "/api/instructions/{id}/reject": {
                "post": {
                    "summary": "Turn down a pending instruction (removed) or the edit proposed for "
                    "it; admins only (DESK_ADMINS)",
                    "parameters": [_path_id("instruction id", "integer")],
                    "responses": {
                        "200": _answer("turned down", {"$ref": "#/components/schemas/Instruction"}),
                        **_errors(401, 403, 404, 409, 503),
                    },
                }
            },
            "/api/autosend": {
                "get": {
                    "summary": "Auto-send per category: on or off, the evidence now, the audits "
                    "waiting; and its trail (every enabling, disabling and demotion)",
                    "responses": {
                        "200": _answer("the policy", {"type": "object"}),
                        **_errors(401, 503),
                    },
                }
            },
            "/api/autosend/{category}": {
                "post": {
                    "summary": "Turn auto-send on (with the evidence and a passing eval report) "
                    "or off for a category; admins only (DESK_ADMINS)",
                    "parameters": [
                        {
                            "name": "category",
                            "in": "path",
                            "required": True,
                            "schema": {"enum": list(CATEGORIES)},
                        }
                    ],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["enabled"],
                            "properties": {
                                "enabled": {"type": "boolean"},
                                "eval": {
                                    "type": ["object", "null"],
                                    "description": "the `desk eval --json` report",
                                },
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer("the trail entry", {"type": "object"}),
                        **_errors(400, 401, 403, 404, 409, 422, 503),
                    },
                }
            },
            "/api/items/{id}/audit": {
                "post": {
                    "summary": "Audit an auto-sent reply: fine, or edited (it needed changes)",
                    "description": "Once the reply is sent, the drafter is told: a reply "
                    "found fine becomes an example for later drafts.",
                    "parameters": [_path_id("item id")],
                    "requestBody": _body(
                        {
                            "type": "object",
                            "required": ["verdict"],
                            "properties": {
                                "verdict": {"enum": ["fine", "edited"]},
                                "note": {"type": "string"},
                            },
                        }
                    ),
                    "responses": {
                        "200": _answer("recorded; `demoted` when it demoted the category"),
                        **_errors(400, 401, 403, 404, 409, 422, 503),
                    },
                }
            },
            "/api/review-log": {
                "get": {
                    "summary": "Every decision, as JSON lines",
                    "responses": {
                        "200": {
                            "description": "JSON lines",
                            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                        },
                        **_errors(401, 503),
                    },
                }
            },
        },
    }
