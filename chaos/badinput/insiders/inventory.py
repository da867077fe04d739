"""What exists, from the catalog: data subjects, buckets and streams made concrete, and what
a declaration lets its user publish and read."""

from __future__ import annotations

from shared import catalog, subjects
from shared.catalog import ROLES, ServiceSpec, matches

from .probe import WORD


def concrete(pattern: str) -> str:
    """A subject the pattern matches: `*` and a final `>` become `insider` tokens."""
    tokens = [WORD if t == "*" else t for t in pattern.split(".")]
    if tokens[-1] == ">":
        tokens[-1:] = [WORD, "x"]
    return ".".join(tokens)


def data_subjects() -> tuple[str, ...]:
    """One concrete subject per data family: each stream's subjects, every subject a role
    publishes or consumes, and each role's dead letters."""
    patterns = [
        *(f for filters in subjects.STREAM_SUBJECTS.values() for f in filters),
        *(p for s in ROLES for p in s.publishes),
        *(f for s in ROLES for c in s.consumers for f in c.subjects),
        *(subjects.dlq(s.name) for s in ROLES),
    ]
    return tuple(dict.fromkeys(concrete(p) for p in patterns))


def buckets() -> tuple[str, ...]:
    return tuple(dict.fromkeys([*catalog.BUCKETS, *(b for s in ROLES for b in s.kv_reads)]))


def kv_stream(bucket: str) -> str:
    return f"KV_{bucket}"


def streams() -> dict[str, str]:
    """Every stream, with a concrete subject in it."""
    found = {name: concrete(filters[0]) for name, filters in subjects.STREAM_SUBJECTS.items()}
    found.update({kv_stream(b): f"$KV.{b}.{WORD}" for b in buckets()})
    return found


def may_publish(spec: ServiceSpec, subject: str) -> bool:
    """The declaration covers publishing `subject`: one of its publishes, or its dead letters."""
    if spec.dead_letters and subject == subjects.dlq(spec.name):
        return True
    return any(matches(p, subject) for p in spec.publishes)


def readable(spec: ServiceSpec) -> set[str]:
    """Streams it may read message by message: its reads, and the buckets it writes or reads."""
    return {
        *spec.reads,
        *(kv_stream(b) for b in spec.buckets_written()),
        *(kv_stream(b) for b in spec.kv_reads),
    }


def publishers() -> dict[str, list[str]]:
    """Data subject -> the users whose declaration lets them publish it."""
    return {s: [r.name for r in ROLES if may_publish(r, s)] for s in data_subjects()}
