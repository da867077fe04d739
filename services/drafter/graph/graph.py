"""The graph builder; compiled where the checkpointer is known, never at import time."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from . import nodes, routes
from .state import Deps, State


def build_graph() -> StateGraph[State, Deps, State, State]:
    builder: StateGraph[State, Deps, State, State] = StateGraph(State, context_schema=Deps)
    builder.add_node("load", nodes.load)
    builder.add_node("guard", nodes.guard)
    builder.add_node("draft", nodes.draft)
    builder.add_node("notify", nodes.notify)
    builder.add_node("review", nodes.review)
    builder.add_node("finish", nodes.finish)
    builder.add_edge(START, "load")
    builder.add_edge("load", "guard")
    builder.add_conditional_edges("guard", routes.after_guard)
    builder.add_edge("draft", "review")
    builder.add_edge("notify", "review")
    builder.add_conditional_edges("review", routes.after_review)  # draft | load | finish
    builder.add_edge("finish", END)
    return builder
