"""The drafter's LangGraph: load → guard → draft | notify → review (interrupt) → finish."""

from .graph import build_graph
from .state import Deps, State

__all__ = ["Deps", "State", "build_graph"]
