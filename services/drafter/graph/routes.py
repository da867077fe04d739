"""Where the graph goes next: pure functions of the state."""

from __future__ import annotations

from typing import Literal

from .state import State


def after_rules(state: State) -> Literal["draft", "notify", "__end__"]:
    if state.get("outcome") in ("closed", "quiet"):
        return "__end__"
    return "notify" if state.get("escalation") else "draft"


def after_review(state: State) -> Literal["draft", "load", "finish"]:
    decision = state.get("decision") or {}
    kind = decision.get("type")
    if kind == "response":
        return "draft"
    if kind == "refresh":  # the conversation moved on while the draft waited: draft it anew
        return "load"
    return "finish"
