"""The drafter's LangGraph: load (with the business rules) → draft | notify → review
(interrupt) → finish."""

from .graph import DURABILITY, build_graph
from .state import Deps, State

__all__ = ["DURABILITY", "Deps", "State", "build_graph"]
