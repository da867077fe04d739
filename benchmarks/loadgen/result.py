"""What a run measured: counts, statuses, latencies and the generator's own CPU time."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoadResult:
    requests: int
    connections: int
    completed: int = 0
    errors: int = 0
    elapsed: float = 0.0  # seconds from the first request sent to the last response read
    cpu_seconds: float = 0.0  # the generator's own CPU time over `elapsed`
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds, completed requests
    bodies: list[bytes] | None = None  # response bodies in request order, when asked for

    @classmethod
    def merge(cls, results: list[LoadResult]) -> LoadResult:
        """Several runs as one: counts, times and latencies added up."""
        statuses: Counter[int] = Counter()
        for r in results:
            statuses.update(r.statuses)
        return cls(
            requests=sum(r.requests for r in results),
            connections=max((r.connections for r in results), default=0),
            completed=sum(r.completed for r in results),
            errors=sum(r.errors for r in results),
            elapsed=sum(r.elapsed for r in results),
            cpu_seconds=sum(r.cpu_seconds for r in results),
            statuses=dict(statuses),
            latencies=[x for r in results for x in r.latencies],
            bodies=None
            if any(r.bodies is None for r in results)
            else [b for r in results for b in r.bodies or []],
        )

    @property
    def rps(self) -> float:
        return self.completed / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def at(q: float) -> float:
            return percentile(ordered, q)

        return {
            "requests": self.requests,
            "connections": self.connections,
            "completed": self.completed,
            "errors": self.errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "elapsed_s": round(self.elapsed, 3),
            "rps": round(self.rps, 1),
            "p50_ms": round(at(50) * 1000, 2),
            "p95_ms": round(at(95) * 1000, 2),
            "p99_ms": round(at(99) * 1000, 2),
            "max_ms": round((ordered[-1] if ordered else 0.0) * 1000, 2),
            "loadgen_cpu_s": round(self.cpu_seconds, 3),
        }


def percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted values (0.0 for none)."""
    if not ordered:
        return 0.0
    rank = math.ceil(q / 100 * len(ordered))
    return ordered[min(len(ordered), max(1, rank)) - 1]
