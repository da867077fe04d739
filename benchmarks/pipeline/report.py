"""The table a run prints."""

from __future__ import annotations

from typing import Any

from chaos.harness.stack import SERVICES


def table(report: dict[str, Any]) -> str:
    t, lat, d, g = (
        report["throughput"],
        report["latency"],
        report["decisions"],
        report["graph_alone"],
    )
    rows = [
        f"pipeline on {report['machine']['cores']} cores (offline draft model, SQLite, "
        f"sync_interval: always, {report['settings'].get('drafters', 1)} drafter process(es))",
        f"  {'graph alone':<28} {g['events_per_s']:>8} events/s  ({g['ms_per_event']} ms/event)",
        f"  {'events → visible':<28} {t['events_per_s']:>8} events/s  "
        f"p50 {t['p50_ms']} p95 {t['p95_ms']} p99 {t['p99_ms']} ms  "
        f"= {report['pipeline_vs_graph']:.0%} of the graph alone",
        f"  {'at ' + str(int(lat['offered_per_s'])) + '/s offered':<28} {'':>8}           "
        f"p50 {lat['p50_ms']} p95 {lat['p95_ms']} p99 {lat['p99_ms']} ms",
        f"  {'decisions → reply.sent':<28} {d['decisions_per_s']:>8} decisions/s  "
        f"p50 {d['p50_ms']} p95 {d['p95_ms']} p99 {d['p99_ms']} ms",
        "  stages (outputs per second):",
    ]
    for name, stage in report["stages"].items():
        mark = "  ← slowest" if name == report["slowest_stage"] else ""
        rows.append(f"    {name:<26} {stage['per_s']!s:>8}/s{mark}")
    events, decisions = t["cpu_ms_per_event"], d["cpu_ms_per_decision"]
    rows.append("  CPU ms per event (webhook → visible) / per decision (accept → reply.sent):")
    for name in events:
        rows.append(f"    {name:<26} {events[name]:>8.2f} / {decisions[name]:.2f}")
    rows.append(
        f"    {'all':<26} {sum(events.values()):>8.2f} / {sum(decisions.values()):.2f}"
        f"  (of {report['machine']['cores']} cores: "
        f"{report['machine']['cores'] * 1000 / sum(events.values()):.0f} events/s at most)"
    )
    rows.append("  memory (MiB RSS) start → after events → end:")
    for name in SERVICES:
        rows.append(
            f"    {name:<26} {report['memory_mib_start'][name]} → "
            f"{report['memory_mib_after_events'][name]} → {report['memory_mib_end'][name]}"
        )
    return "\n".join(rows)
