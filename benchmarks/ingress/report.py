"""The report: every mode measured, its headline and targets, the table, the JSON."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ..processes import ROOT
from .broker import BROKER_IN_FLIGHT
from .measure import HTTP_MEASURES, RESEND, ROUNDS, measure_mode
from .mode import MODES

DEFAULT_JSON = ROOT / "var" / "bench" / "ingress.json"
WORKERS = 1  # ingress runs one process (one uvicorn server); bare runs the same

# issue "Performance at the limits", target 3
TARGETS = {"ingress/publish": 0.80, "ingress_p99_ms": 25.0, "synced/broker": 0.90}


def headline(modes: dict[str, Any]) -> dict[str, Any]:
    """`ingress/publish`, `ingress/bare`, `ingress_rps`, `ingress_p99_ms` (relaxed),
    `synced/broker` and `synced/same_in_flight` (always)."""
    line: dict[str, Any] = {}
    if "relaxed" in modes:
        relaxed = modes["relaxed"]
        line["ingress/publish"] = round(relaxed["ratios"]["ingress/publish"], 2)
        line["ingress/bare"] = round(relaxed["ratios"]["ingress/bare"], 2)
        line["ingress_rps"] = round(relaxed["ingress"]["rps"])
        line["ingress_p99_ms"] = round(relaxed["ingress"]["p99_ms"], 1)
    if "always" in modes:
        ratios = modes["always"]["ratios"]
        line["synced/broker"] = round(ratios["ingress/broker"], 2)
        line["synced/same_in_flight"] = round(ratios["ingress/broker_same_in_flight"], 2)
    return line


def headline_text(line: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in line.items())


def targets(modes: dict[str, Any]) -> dict[str, bool]:
    met: dict[str, bool] = {}
    if "relaxed" in modes:
        relaxed = modes["relaxed"]
        met[f"relaxed ingress/publish >= {TARGETS['ingress/publish']:.2f}"] = (
            relaxed["ratios"]["ingress/publish"] >= TARGETS["ingress/publish"]
        )
        met[f"relaxed ingress p99 <= {TARGETS['ingress_p99_ms']:.0f} ms"] = (
            relaxed["ingress"]["p99_ms"] <= TARGETS["ingress_p99_ms"]
        )
    if "always" in modes:
        met[f"sync-always ingress/broker >= {TARGETS['synced/broker']:.2f}"] = (
            modes["always"]["ratios"]["ingress/broker"] >= TARGETS["synced/broker"]
        )
    for mode, figures in modes.items():
        met[f"{mode} exactly once"] = bool(figures["exactly_once"]["ok"])
    return met


def table(report: dict[str, Any]) -> str:
    cfg, machine = report["config"], report["machine"]
    rows = [
        f"Ingress: {cfg['requests']:,} signed webhooks over {cfg['connections']} keep-alive "
        f"connections, {cfg['workers']} worker, {cfg['rounds']} interleaved rounds; "
        f"{machine['cores']} cores, load {machine['loadavg_start']} → {machine['loadavg_end']}",
        f"{'mode':<8} {'measure':<8} {'req/s':>8} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} "
        f"{'server µs/req':>13} {'nats µs/req':>11}",
    ]
    for mode, m in report["modes"].items():
        for name in HTTP_MEASURES:
            f = m[name]
            nats_us = f"{f['nats_cpu_us_per_request']:>11.0f}" if name != "bare" else f"{'':>11}"
            rows.append(
                f"{mode:<8} {name:<8} {f['rps']:>8,.0f} {f['p50_ms']:>7.2f} {f['p95_ms']:>7.2f} "
                f"{f['p99_ms']:>7.2f} {f['server_cpu_us_per_request']:>13.0f} {nats_us}"
            )
        for b in (m["broker"], m["broker_same_in_flight"]):
            rows.append(
                f"{mode:<8} {'broker':<8} {b['rps']:>8,.0f} {'':>7} {'':>7} {'':>7} "
                f"{b['client_cpu_us_per_message']:>13.0f} {b['nats_cpu_us_per_message']:>11.0f}"
                f"  (one nats-py client, {b['in_flight']} in flight)"
            )
        o = m["offered"]
        rows.append(
            f"{mode:<8} at {o['rate']:,}/s offered (open loop, half of ingress's rate): "
            + "; ".join(
                f"{name} p50/p95/p99 {o[name]['p50_ms']:.1f}/{o[name]['p95_ms']:.1f}/"
                f"{o[name]['p99_ms']:.1f} ms"
                for name in ("bare", "ingress")
            )
        )
        e = m["exactly_once"]
        rows.append(
            f"{mode:<8} ingress/publish={m['ratios']['ingress/publish']:.2f} "
            f"ingress/bare={m['ratios']['ingress/bare']:.2f} "
            f"ingress/broker={m['ratios']['ingress/broker']:.2f} (same in flight: "
            f"{m['ratios']['ingress/broker_same_in_flight']:.2f}); exactly once: "
            f"{e['stream_after_run']:,}/{e['expected']:,} stored, {e['resent']:,} resent → "
            f"{e['resent_duplicate']:,} duplicate, {e['stream_after_resend']:,} stored "
            f"{'ok' if e['ok'] else 'FAILED'}; ingress memory "
            f"{' → '.join(str(v) for v in m['ingress'].get('rss_mib', []))} MiB"
        )
    rows.append(
        "targets: "
        + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in report["targets"].items())
    )
    rows.append(headline_text(report["headline"]))
    return "\n".join(rows)


def run(
    requests: int = 20_000,
    connections: int = 64,
    json_path: Path | None = DEFAULT_JSON,
    modes: tuple[str, ...] = MODES,
    rounds: int = ROUNDS,
    broker_in_flight: int = BROKER_IN_FLIGHT,
    profile: bool = False,
    echo: bool = True,
) -> dict[str, Any]:
    """Measure every mode, print the table (when `echo`), write JSON; return the report."""
    started = time.monotonic()
    report: dict[str, Any] = {
        "benchmark": "ingress",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_start": round(os.getloadavg()[0], 2),
        },
        "config": {
            "requests": requests,
            "connections": connections,
            "workers": WORKERS,
            "rounds": rounds,
            "broker_in_flight": broker_in_flight,
            "resend": RESEND,
        },
        "modes": {},
    }
    for mode in modes:
        report["modes"][mode] = measure_mode(
            mode, requests, connections, rounds, broker_in_flight, profile, echo
        )
    report["headline"] = headline(report["modes"])
    report["targets"] = targets(report["modes"])
    report["machine"]["loadavg_end"] = round(os.getloadavg()[0], 2)
    report["wall_s"] = round(time.monotonic() - started, 1)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")
    if echo:
        print(table(report))
        if json_path is not None:
            print(f"written {json_path} ({report['wall_s']} s)")
    return report
