"""The drafter service: the one place a model is called; everything around it is deterministic.

Like every service it runs as `main.run(settings)` (`desk drafter`). What code outside services/
may use of it is `__all__` (tests/test_layout.py holds desk/, chaos/ and benchmarks/ to it): the
graph and what it runs with, for the benchmark that times the graph alone.

- `build_graph()`: the graph's builder (compile it with a checkpointer).
- `Deps`: what the graph's nodes are given (`context=`): the helpdesk source and the model.
- `OfflineDraftModel`: the built-in model used when no endpoint is configured.
- `Work`: one work item as the graph sees it; `Work(...).start()` is the input of a new round.
"""

from .graph import Deps, build_graph
from .offline import OfflineDraftModel
from .threads import Work

__all__ = ["Deps", "OfflineDraftModel", "Work", "build_graph"]
