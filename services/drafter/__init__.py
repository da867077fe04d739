"""The drafter service: the one place a model is called; everything around it is deterministic.

Like every service it runs as `main.run(settings)` (`desk drafter`). What code outside services/
may use of it is `__all__` (tests/test_layout.py holds desk/, chaos/ and benchmarks/ to it): the
graph and what it runs with, for the benchmark that times the graph alone.

- `build_graph()`: the graph's builder (compile it with a checkpointer); `DURABILITY`, how
  the drafter runs it (LangGraph's durability mode); `sqlite_checkpoints(path)`, the
  checkpointer it runs with on SQLite.
- `Deps`: what the graph's nodes are given (`context=`): the helpdesk source and the model.
- `OfflineDraftModel`: the built-in model used when no endpoint is configured.
- `Work`: one work item as the graph sees it; `Work(...).start()` is the input of a new round.

And what `desk eval` drafts with, exactly as the graph's `draft` node does: `write(deps, ticket,
round, Asked(...))`, the model `make_model(settings)` answers with (`output_for`; its
connections closed by `close_model`), the
`Knowledge` base and its `query` for a round (`Asked().system` is the built-in prompt), and
the retriever `DESK_KNOWLEDGE_RETRIEVER` names (`retriever_of`) with its relevance floor
(`BM25_FLOOR`, `EMBEDDINGS_FLOOR`: the defaults `benchmarks/retrieval.py` measures).
"""

from .embeddings import FLOOR as EMBEDDINGS_FLOOR
from .graph import DURABILITY, Deps, build_graph
from .knowledge import Knowledge
from .lite import sqlite_checkpoints
from .model import close_model, make_model, output_for
from .offline import OfflineDraftModel
from .prompt import query
from .retrievers import BM25_FLOOR, retriever_of
from .threads import Work
from .writer import Asked, write

__all__ = [  # noqa: RUF022 (sorted as tests/test_layout.py checks: plain sorted())
    "Asked",
    "BM25_FLOOR",
    "DURABILITY",
    "Deps",
    "EMBEDDINGS_FLOOR",
    "Knowledge",
    "OfflineDraftModel",
    "Work",
    "build_graph",
    "close_model",
    "make_model",
    "output_for",
    "query",
    "retriever_of",
    "sqlite_checkpoints",
    "write",
]
