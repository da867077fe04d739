"""What one measure accumulates over the rounds, and its figures for the report."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..loadgen import LoadResult


@dataclass
class Tally:
    """What one measure accumulates over the rounds."""

    results: list[LoadResult] = dataclasses.field(default_factory=list)
    server_cpu: float = 0.0
    nats_cpu: float = 0.0
    published: int = 0  # broker: messages and their time, client CPU
    elapsed: float = 0.0
    client_cpu: float = 0.0
    rounds_rps: list[float] = dataclasses.field(default_factory=list)

    def http(self) -> dict[str, Any]:
        merged = LoadResult.merge(self.results)
        figures = merged.summary()
        per = 1e6 / max(1, merged.completed)
        figures["server_cpu_s"] = round(self.server_cpu, 3)
        figures["server_cpu_us_per_request"] = round(self.server_cpu * per, 1)
        figures["nats_cpu_s"] = round(self.nats_cpu, 3)
        figures["nats_cpu_us_per_request"] = round(self.nats_cpu * per, 1)
        figures["rounds_rps"] = [round(r.rps) for r in self.results]
        return figures

    def broker(self, in_flight: int) -> dict[str, Any]:
        per = 1e6 / max(1, self.published)
        return {
            "messages": self.published,
            "in_flight": in_flight,
            "elapsed_s": round(self.elapsed, 3),
            "rps": round(self.published / self.elapsed, 1) if self.elapsed else 0.0,
            "client_cpu_s": round(self.client_cpu, 3),
            "client_cpu_us_per_message": round(self.client_cpu * per, 1),
            "nats_cpu_s": round(self.nats_cpu, 3),
            "nats_cpu_us_per_message": round(self.nats_cpu * per, 1),
            "rounds_rps": [round(r) for r in self.rounds_rps],
        }
