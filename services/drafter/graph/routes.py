"""Where the graph goes next: pure functions of the state."""

from __future__ import annotations

from typing import Literal

from .state import State


def after_guard(state: State) -> Literal["draft", "notify", "__end__"]:
    if state.get("outcome") == "closed":
        return "__end__"
    return "notify" if state.get("escalation") else "draft"


def after_review(state: State) -> Literal["draft", "finish"]:
    decision = state.get("decision") or {}
    return "draft" if decision.get("type") == "response" else "finish"
