"""The default responder: deterministic arguments for the tool or schema a request asks for,
and the polite reply that quotes the reviewer's feedback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .request import asked_schema, chosen_tool, feedback_lines, last_user_text

Responder = Callable[[dict[str, Any]], dict[str, Any]]

DRAFT_SUMMARY = "Customer asks about their ticket"


def polite_reply(feedback: list[str]) -> str:
    lines = [
        "Hello,",
        "",
        "Thank you for contacting us. We have looked into your ticket and are on it.",
    ]
    if feedback:
        lines += ["", "Following your notes:", *feedback]
    lines += ["", "Kind regards,", "Support"]
    return "\n".join(lines)


def _schema_value(name: str, schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = [o for o in schema.get(key) or [] if o.get("type") != "null"]
        if options:
            return _schema_value(name, options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "integer":
        return 0
    if kind == "number":
        return 0.0
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return schema_arguments(schema)
    return name


def schema_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Deterministic arguments for a JSON schema: every property, first enum value, etc."""
    properties = schema.get("properties") or {}
    return {name: _schema_value(name, sub or {}) for name, sub in properties.items()}


def default_responder(body: dict[str, Any]) -> dict[str, Any]:
    # the forced tool, else the response format's schema, else (JSON asked in the prompt) Draft
    tool = chosen_tool(body) or asked_schema(body) or {"name": "Draft"}
    parameters = tool.get("parameters") or {}
    arguments = schema_arguments(parameters)
    if tool.get("name") == "Draft":
        enum = ((parameters.get("properties") or {}).get("category") or {}).get("enum") or []
        arguments["category"] = "refund" if "refund" in enum or not enum else enum[0]
        arguments["summary"] = DRAFT_SUMMARY
        arguments["reply"] = polite_reply(feedback_lines(last_user_text(body)))
    return arguments


def default_text(body: dict[str, Any]) -> str:
    return polite_reply(feedback_lines(last_user_text(body)))
