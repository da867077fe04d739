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

A passage is offered to a draft only when it is relevant enough (`retrievers`: the floor).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.errors import first_error
from shared.helpdesk.base import Article

from .retrievers import Bm25, Retriever
from .retrievers import retriever_of as retriever_of  # re-exported: where tests import it from

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
