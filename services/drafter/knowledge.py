"""The team's knowledge base: Markdown articles in a directory, searched with BM25 (or, opted
into, sentence embeddings: `embeddings.Embeddings`).

    knowledge = Knowledge(Path("knowledge"))
    knowledge.search("I was charged twice for my order")   # the best passages, best first

Each `*.md` file is one article; its front matter names it (`title`, `category`, `tags`, and
an optional `url` the reviewer can open), and its body is split into passages at its headings
and paragraphs. The index follows the directory: before a search, at most every
`recheck` seconds, files added, edited or removed are picked up (only changed files are read
again) and the BM25 index (`bm25s`, English stemming) is rebuilt from the passages, which for a
help centre takes milliseconds. A file that cannot be read is skipped and logged once per
version, never fatal: the drafts go on with the rest.

A passage is offered to a draft only when it is relevant enough: at or above a floor
(`DESK_KNOWLEDGE_FLOOR`), so that a ticket the knowledge base says nothing about gets no passage
at all rather than the least unrelated one (a photo-upload crash once got the refund policy for
sharing the word "photo"). A raw BM25 score cannot carry that floor: it grows with the length of
the query and the rarity of its words, so 5 is a strong match for a terse ticket and a weak one
for a chatty one. The BM25 retriever's floor is on a share instead: the part of the query's own
term weight that the passage matches, 0 to 1, which is comparable across queries. Each distinct
term of the query weighs 1 plus its BM25 idf over the passages (the 1 so that, in a help centre
of one article, a term every passage has still counts); a term no passage contains weighs as one
only one passage contains (evidence that the ticket is about something else, as much as the
rarest word the articles use, no more); numbers (order numbers, amounts, versions) and words
that say nothing of a topic (pronouns, question words, auxiliaries, greetings, dates: `_IDLE`)
weigh nothing. So "Refund not received yet / You confirmed my refund on Monday but the money
still hasn't reached my account. How long does it take?" matches 0.66 of its weight in the
refund article, while "Please delete my account / Yes, I confirm. Please delete everything."
matches 0.39 in a refund passage (on "account" and "confirm"). The passages are still ranked by
BM25 score; the share only decides which may be offered. `BM25_FLOOR` (0.40) is calibrated on
the demo's eval set: `python -m benchmarks.retrieval` prints the precision and recall of "an
article applies" around it (0.40 is the lowest round floor that no case expecting no article
reaches: the best unrelated passage there scores 0.385, the one above). The embeddings
retriever's floor is a cosine similarity (`embeddings.FLOOR`).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared import similarity
from shared.errors import first_error
from shared.helpdesk.base import Article

log = logging.getLogger(__name__)

PASSAGE_CHARS = 700  # a passage is at most about this long (paragraphs are not cut)
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.S)
_HEADING = re.compile(r"^#{1,6}\s+(.*)$")


class ArticleMeta(BaseModel):
    """An article's front matter."""

    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1)
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    url: str | None = None


@dataclass(frozen=True)
class Passage:
    article: str  # the file's stem: the id a draft cites
    title: str
    section: str  # the heading it falls under ("" before the first)
    text: str
    category: str | None = None
    url: str | None = None
    tags: tuple[str, ...] = ()

    def searchable(self) -> str:
        return "\n".join([self.title, self.section, self.text, " ".join(self.tags)])


@dataclass
class _File:
    stamp: tuple[int, int]  # (mtime_ns, size): read again only when it changes
    passages: list[Passage]


class Retriever(Protocol):
    """How passages are found: an index built from their texts, searched with a query."""

    name: str
    # a query is a few hundred µs of CPU, cheaper than a hop to a worker thread and back
    quick: bool
    floor: float  # the relevance (0 to 1) below which a text is not found at all

    def index(self, texts: list[str]) -> Any: ...

    def retrieve(self, index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
        """Positions in the index (and relevance, 0 to 1) of the `k` best texts, best first,
        none below `floor`."""
        ...


# The share of a query's term weight a passage must match to be offered (module docstring).
BM25_FLOOR = 0.40


class Bm25:
    """BM25 (`bm25s`, English stemming): the default retriever."""

    name = "bm25"
    quick = True

    def __init__(self, floor: float = BM25_FLOOR) -> None:
        self.floor = floor

    def index(self, texts: list[str]) -> Any:
        return similarity.index(texts)

    def retrieve(self, index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
        """The `k` best passages by BM25 score, each with the share of the query's term weight
        it matches; none below `floor`, none that share no term."""
        return [
            (i, share)
            for i, share in relevance(index, count, query, k)
            if share >= self.floor and share > 0
        ]


def relevance(index: Any, count: int, query: str, k: int) -> list[tuple[int, float]]:
    """The `k` best of `count` indexed passages for `query` by BM25 score, best first, each
    with the share (0 to 1) of the query's term weight it matches (module docstring); those
    that share no term are left out."""
    if count == 0 or k <= 0 or not query.strip():
        return []
    tokens = similarity.tokenize([query])
    words = {i: w for w, i in tokens.vocab.items()}
    idle = _idle_words()
    said = [
        words[i] for i in tokens.ids[0] if words[i] not in idle and not _NUMBER.fullmatch(words[i])
    ]
    if not said:
        return []
    known = index.vocab_dict
    rarest = _weight(count, 1)
    scores: dict[str, Any] = {}  # a term the passages contain: its BM25 score in each
    weight: dict[str, float] = {}
    for word in dict.fromkeys(said):
        if word in known:
            scores[word] = index.get_scores([known[word]])
            weight[word] = _weight(count, int((scores[word] > 0).sum()))
        else:
            weight[word] = rarest
    if not scores:
        return []
    total = sum(scores[w] for w in said if w in scores)
    whole = sum(weight.values())
    return [
        (int(i), sum(weight[w] for w, s in scores.items() if s[i] > 0) / whole)
        for i in (-total).argsort(kind="stable")[:k]
        if total[i] > 0
    ]


# Words that say nothing of what a ticket is about (pronouns, question words, auxiliaries,
# greetings), which BM25's short English stop list keeps: they weigh nothing in the share.
_IDLE = """i me my mine myself we our ours us you your yours he him his she her they them it its
what when where which who whom why how can could would should shall may might must do does did
done doing have has had having am been being get gets got getting so also still just any all
some here from up out about after before again now yet please thank thanks hi hello dear yes
ok okay very much more most too only even ever since over under off same other another new
usually usual really already don doesn didn isn wasn aren weren hasn haven hadn won wouldn
couldn shouldn january february march april may june july august september october november
december monday tuesday wednesday thursday friday saturday sunday one two three four five six
seven eight nine ten""".split()
_NUMBER = re.compile(r"\d+(?:st|nd|rd|th)?")  # an order number, an amount, a date's day


@functools.cache
def _idle_words() -> frozenset[str]:
    return frozenset(similarity.stemmer().stemWords(_IDLE)) | frozenset(_IDLE)


def _weight(count: int, containing: int) -> float:
    """A query term's weight: 1, plus its BM25 idf over `count` passages, `containing` of which
    contain it (bm25s's default, Lucene's). The 1 keeps a term every passage has from weighing
    nothing, which in a help centre of one or two articles would be every term."""
    return 1 + math.log(1 + (count - containing + 0.5) / (containing + 0.5))


def retriever_of(name: str, model: Path | None = None, floor: float | None = None) -> Retriever:
    """The retriever `DESK_KNOWLEDGE_RETRIEVER` names, with its relevance floor
    (`DESK_KNOWLEDGE_FLOOR`; None: the retriever's own calibrated one); embeddings load their
    model now (a `ConfigError` when they cannot)."""
    if name == "embeddings":
        from .embeddings import FLOOR, Embeddings

        return Embeddings(model, FLOOR if floor is None else floor)
    return Bm25(BM25_FLOOR if floor is None else floor)


class KnowledgeError(ValueError):
    """An article that cannot be used (no front matter, no title, bad YAML)."""


def parse(article: str, text: str) -> list[Passage]:
    """The passages of one article's Markdown (`article` is its id, the file's stem)."""
    found = _FRONT.match(text)
    if found is None:
        raise KnowledgeError("no front matter (a --- block with at least a title)")
    try:
        raw = yaml.safe_load(found.group(1)) or {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise KnowledgeError(f"front matter is not YAML{line}: {exc}".splitlines()[0]) from None
    try:
        meta = ArticleMeta.model_validate(raw)
    except ValidationError as exc:
        raise KnowledgeError(f"front matter {first_error(exc, 'front matter')}") from None
    return passages_of(article, meta, text[found.end() :])


def passages_of(article: str, meta: ArticleMeta, body: str) -> list[Passage]:
    """The passages of an article's Markdown body: one per heading, long sections cut."""
    passages: list[Passage] = []
    section = ""
    chunk: list[str] = []

    def flush() -> None:
        joined = "\n\n".join(p for p in chunk if p).strip()
        if joined:
            passages.append(
                Passage(
                    article, meta.title, section, joined, meta.category, meta.url, tuple(meta.tags)
                )
            )
        chunk.clear()

    for block in re.split(r"\n\s*\n", body):
        block = block.strip()
        heading = _HEADING.match(block.splitlines()[0]) if block else None
        if heading:
            flush()
            section = heading.group(1).strip()
            block = "\n".join(block.splitlines()[1:]).strip()
        block = _unwrapped(block)
        if chunk and sum(len(p) for p in chunk) + len(block) > PASSAGE_CHARS:
            flush()
        chunk.append(block)
    flush()
    return passages


_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


def _unwrapped(block: str) -> str:
    """A paragraph's lines joined (Markdown's soft line breaks); a list keeps one item a line."""
    lines: list[str] = []
    for line in block.splitlines():
        if lines and not _LIST_ITEM.match(line):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    return "\n".join(lines)


class Knowledge:
    """The articles under `root`, indexed; thread-safe (the drafter searches from its loop)."""

    def __init__(
        self, root: Path | None, *, recheck: float = 2.0, retriever: Retriever | None = None
    ) -> None:
        self.root = root  # None: only the helpdesk's articles (`set_remote`)
        self.recheck = recheck
        self.retriever = retriever or Bm25()
        self._files: dict[Path, _File] = {}
        self._passages: list[Passage] = []
        self._index: Any = None
        self._checked = float("-inf")
        self._refused: dict[Path, tuple[int, int]] = {}
        self._remote: list[Passage] = []  # the helpdesk's articles, as last read
        self._lock = threading.Lock()

    @property
    def passages(self) -> list[Passage]:
        self.refresh()
        return list(self._passages)

    def articles(self) -> set[str]:
        return {p.article for p in self.passages}

    def refresh(self) -> None:
        """Pick up what changed on disk (at most every `recheck` seconds)."""
        with self._lock:
            now = time.monotonic()
            if now - self._checked < self.recheck:
                return
            self._checked = now
            if self._scan():
                self._rebuild()

    def search_now(self, query: str, k: int = 3) -> list[Passage] | None:
        """`search`, if it can answer without waiting: a quick retriever, the directory not
        due a look, the index not being rebuilt. None otherwise (then search in a thread)."""
        if not self.retriever.quick or time.monotonic() - self._checked >= self.recheck:
            return None
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._found(query, k)
        finally:
            self._lock.release()

    def search(self, query: str, k: int = 3) -> list[Passage]:
        """The `k` passages that best match `query`, best first; none below the retriever's
        relevance floor (a ticket the articles say nothing about gets none)."""
        self.refresh()
        with self._lock:
            return self._found(query, k)

    def scored(self, query: str, k: int = 3) -> list[tuple[Passage, float]]:
        """`search`, each passage with its relevance (0 to 1, at least the retriever's floor)."""
        self.refresh()
        with self._lock:
            if self._index is None:
                return []
            found = self.retriever.retrieve(self._index, len(self._passages), query, k)
            return [(self._passages[i], score) for i, score in found]

    def _found(self, query: str, k: int) -> list[Passage]:
        if self._index is None:
            return []
        found = self.retriever.retrieve(self._index, len(self._passages), query, k)
        return [self._passages[i] for i, _ in found]

    def set_remote(self, articles: list[Article]) -> None:
        """The helpdesk's articles as just read (`DESK_HELPDESK_ARTICLES_PATH`): indexed with
        the files; an article whose text makes no passage is skipped."""
        passages = [
            p
            for a in articles
            for p in passages_of(
                a.id,
                ArticleMeta(title=a.title, category=a.category, tags=a.tags, url=a.url),
                a.body,
            )
        ]
        with self._lock:
            if passages == self._remote:
                return
            self._remote = passages
            self._rebuild()

    def _scan(self) -> bool:
        if self.root is None:
            return False
        try:
            paths = sorted(p for p in self.root.rglob("*.md") if p.is_file())
        except OSError as exc:
            log.warning("knowledge directory %s cannot be read: %s", self.root, exc)
            paths = []
        changed = set(self._files) - set(paths)
        for path in changed:
            del self._files[path]
        for path in paths:
            try:
                info = path.stat()
            except OSError:
                continue
            stamp = (info.st_mtime_ns, info.st_size)
            known = self._files.get(path)
            if (known is not None and known.stamp == stamp) or self._refused.get(path) == stamp:
                continue
            try:
                passages = parse(path.stem, path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, KnowledgeError) as exc:
                log.warning("knowledge article %s skipped: %s", path.name, exc)
                self._refused[path] = stamp
                if self._files.pop(path, None) is not None:
                    changed.add(path)
                continue
            self._refused.pop(path, None)
            self._files[path] = _File(stamp, passages)
            changed.add(path)
        return bool(changed)

    def _rebuild(self) -> None:
        self._passages = [
            *(p for path in sorted(self._files) for p in self._files[path].passages),
            *self._remote,
        ]
        if not self._passages:
            self._index = None
            return
        self._index = self.retriever.index([p.searchable() for p in self._passages])
        log.info(
            "knowledge base: %d passages from %d articles in %s and %d from the helpdesk (%s)",
            len(self._passages),
            len(self._files),
            self.root or "no directory",
            len(self._remote),
            self.retriever.name,
        )
