"""Reading a chat-completions request: message text, the reviewer's feedback lines, the tool
or response-format schema it asks for, and its prompt size."""

from __future__ import annotations

from typing import Any

FEEDBACK_PREFIX = "- "


def content_text(content: Any) -> str:
    """The text of a message's `content`: a string, a list of parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def feedback_lines(text: str) -> list[str]:
    """Lines that start with "- " (leading blanks allowed), stripped of surrounding blanks."""
    return [line.strip() for line in text.splitlines() if line.lstrip().startswith(FEEDBACK_PREFIX)]


def chosen_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    """The function the request forces (`tool_choice.function.name`), else its first tool."""
    tools = [
        t["function"]
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("function"), dict)
    ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        for tool in tools:
            if tool.get("name") == name:
                return tool
        if name:
            return {"name": name, "parameters": {}}
    return tools[0] if tools else None


def asked_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` JSON schema as a function-like {"name", "parameters"}, if any."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") or {}
        return {"name": spec.get("name"), "parameters": spec.get("schema") or {}}
    if fmt.get("type") == "json_object":
        return {"name": "Draft", "parameters": fmt.get("schema") or {}}
    return None


def wants_tools(body: dict[str, Any]) -> bool:
    return bool(body.get("tools")) or body.get("tool_choice") is not None


def prompt_tokens(body: dict[str, Any]) -> int:
    chars = sum(
        len(content_text(m.get("content")))
        for m in body.get("messages") or []
        if isinstance(m, dict)
    )
    return chars // 4
