"""The graph builder; compiled where the checkpointer is known, never at import time."""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.types import Durability

from . import nodes, routes
from .state import Deps, State

# Every run is saved when it stops: at the reviewer's interrupt, at its end, or at a failure
# (with what the steps that succeeded wrote), in one write instead of one per step. A process
# killed mid-run redoes the run from where the thread was last saved; of its steps only the
# model call costs anything to redo, and the interrupt right after it saves the draft.
DURABILITY: Durability = "exit"


def build_graph() -> StateGraph[State, Deps, State, State]:
    builder: StateGraph[State, Deps, State, State] = StateGraph(State, context_schema=Deps)
    builder.add_node("load", nodes.load)
    builder.add_node("guard", nodes.guard)
    builder.add_node("draft", nodes.draft)
    builder.add_node("notify", nodes.notify)
    builder.add_node("review", nodes.review)
    builder.add_node("finish", nodes.finish)
    builder.add_edge(START, "load")
    builder.add_conditional_edges("load", routes.after_rules)  # draft | notify | end
    builder.add_conditional_edges("guard", routes.after_rules)  # threads saved before: see nodes
    builder.add_edge("draft", "review")
    builder.add_edge("notify", "review")
    builder.add_conditional_edges("review", routes.after_review)  # draft | load | finish
    builder.add_edge("finish", END)
    return builder
