"""The dashboard and the alert rules against a real Prometheus (Debian package `prometheus`).

A fresh stack (the six services on their own nats-server) is scraped every second by
/usr/bin/prometheus, which loads the PrometheusRule's groups as a plain rules file. After a
little traffic (a webhook for a demo ticket, two for tickets the demo helpdesk does not have:
the drafter dead-letters those, and one with a bad signature), every dashboard query, recording
rule and annotation query is evaluated through the HTTP API and must return series; every alert
must see series for each selector it reads and say exactly what happened (the two dead letters,
nothing else); "Dead letters (24h)" must show the dead letters the DLQ stream holds.

The `nats_*` series come from prometheus-nats-exporter (the NATS chart's sidecar), which is not
run here: the queries that read only those are listed in NATS_ONLY, and must still be valid.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nats
import promql_parser
import pytest
import yaml

from desk.helpdesk import ensure_demo
from desk.process import free_port
from desk.webhook import sample_event, send
from shared import subjects
from tests.deploy.test_monitoring import (
    _ANNOTATION_QUERY,
    DEAD,
    SERVICES,
    WEBHOOK_SECRET,
    Stack,
    _dashboard,
    _panels,
    _rule,
    _rules,
    read_promql,
    running_stack,
)

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

SCRAPE_SECONDS = 1
# Grafana's variables, as Grafana would fill them for a recent time range.
VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "1h"}
MIN_SAMPLES = 10  # of each series, before the numbers are read (see `observed`)
MISSING_TICKETS = ("T9998", "T9999")  # not in the demo helpdesk: each ends as a dead letter

_EXPORTER = "prometheus-nats-exporter's (nats_*), which this test does not run"
_RECORDED = f"recorded from {_EXPORTER}"
# What reads only nats_* series, directly or through a recording rule, and so may return
# nothing here (each is still evaluated: it must be valid). `test_every_query_returns_series`
# checks that this list is exact.
NATS_ONLY = {
    "rule desk:nats_consumer_pending:max": _EXPORTER,
    "rule desk:nats_consumer_ack_pending:max": _EXPORTER,
    'rule DeskDeadLetters reads nats_stream_last_seq{stream_name="DLQ"}': _EXPORTER,
    "rule DeskConsumerLagGrowing reads desk:nats_consumer_pending:max": _RECORDED,
    "rule DeskConsumerStalled reads desk:nats_consumer_pending:max": _RECORDED,
    "rule DeskConsumerStalled reads nats_consumer_delivered_consumer_seq"
    '{stream_name=~"EVENTS|WORK|INBOX|RESULTS",is_consumer_leader="true"}': _EXPORTER,
    "panel 'Dead letters (24h)' B": f"the DLQ stream's size, {_EXPORTER}",
    "panel 'Queue depth per consumer' A": _RECORDED,
    "panel 'Queue depth per consumer' B": _RECORDED,
    "panel 'Dead letters' B": f"the DLQ stream's size, {_EXPORTER}",
}


@dataclass(frozen=True)
class Query:
    where: str  # "panel '<title>' <refId>", "rule <name>", "rule <name> annotation"
    expr: str
    alert: bool = False


def queries() -> list[Query]:
    """Every PromQL expression of the dashboard and the rules, Grafana's variables filled."""
    found: list[Query] = []
    for rule in _rules(_rule()):
        name = rule.get("alert") or rule["record"]
        found.append(Query(f"rule {name}", rule["expr"], alert="alert" in rule))
        for text in rule.get("annotations", {}).values():
            found.extend(
                Query(f"rule {name} annotation", q) for q in _ANNOTATION_QUERY.findall(text)
            )
    for panel in _panels(_dashboard()):
        for target in panel.get("targets", []):
            found.append(Query(f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    filled = []
    for query in found:
        expr = query.expr
        for variable, value in VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"{query.where}: a Grafana variable this test cannot fill: {expr}"
        filled.append(Query(query.where, expr, query.alert))
    return filled


def selectors(expr: str) -> list[str]:
    """Each vector selector of `expr` once, without its offset: what the expression reads."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = str(node.matchers)
            found.append((node.name or "") + ("" if matchers == "{}" else matchers))
            return
        for attribute in ("lhs", "rhs", "expr", "args", "param", "vector_selector"):
            child = getattr(node, attribute, None)
            for item in child if isinstance(child, list) else [child]:
                if item is not None and not isinstance(item, str | int | float):
                    walk(item)

    walk(promql_parser.parse(expr))
    return list(dict.fromkeys(found))


def checks() -> dict[str, str]:
    """What must return series: each query; for an alert (empty while all is well) each
    selector it reads, as "rule <alert> reads <selector>"."""
    found: dict[str, str] = {}
    for query in queries():
        if query.alert:
            for selector in selectors(query.expr):
                found[f"{query.where} reads {selector}"] = selector
        else:
            found[query.where] = query.expr
    return found


def _nats_only(expr: str, recorded: dict[str, str]) -> bool:
    """Every metric `expr` reads is a nats_* series, or recorded from nothing but those."""
    names = read_promql(expr).metrics
    return bool(names) and all(
        n.startswith("nats_") or (n in recorded and _nats_only(recorded[n], recorded))
        for n in names
    )


# -- a real Prometheus -------------------------------------------------------------------------


class Prometheus:
    def __init__(self, binary: str, root: Path, targets: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = root / "prometheus.log"
        groups = _rule()["spec"]["groups"]
        (root / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
        config = {
            "global": {
                "scrape_interval": f"{SCRAPE_SECONDS}s",
                "scrape_timeout": f"{SCRAPE_SECONDS}s",
                "evaluation_interval": f"{SCRAPE_SECONDS}s",
            },
            "rule_files": [str(root / "rules.yaml")],
            # as the PodMonitors scrape: job = the service's name, the desk labels honoured
            "scrape_configs": [
                {
                    "job_name": job,
                    "honor_labels": True,
                    "metrics_path": "/metrics",
                    "static_configs": [{"targets": [target]}],
                }
                for job, target in targets.items()
            ],
        }
        (root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.command = [
            binary,
            f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.proc: subprocess.Popen[bytes] | None = None
        self.client = httpx.Client(base_url=self.url, timeout=10)

    def start(self, timeout: float = 30.0) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

        def ready() -> bool:
            assert self.proc is not None
            assert self.proc.poll() is None, f"prometheus exited: {self.tail()}"
            try:
                return self.client.get("/-/ready", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        self.wait(ready, timeout, lambda: f"Prometheus to be ready: {self.tail()}")

    def stop(self) -> None:
        self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log.exists() else ""

    def query(self, expr: str, where: str = "") -> list[dict[str, Any]]:
        """The instant vector (or scalar) `expr` gives now; a refused query fails naming it."""
        answer = self.client.get("/api/v1/query", params={"query": expr})
        body = answer.json()
        assert body["status"] == "success", f"{where or expr}: {body.get('error')} ({expr})"
        data = body["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str) -> float | None:
        """The single value `expr` gives now, or None while it gives none."""
        result = self.query(expr)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None

    def wait(self, check: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what()}")
            time.sleep(0.2)


@dataclass
class Observed:
    prometheus: Prometheus
    blind_when_fresh: list[str]  # `blind()` before any event
    dead_letters: int  # what the DLQ stream holds, read from the broker


async def _dlq_size(url: str) -> int:
    connection = await nats.connect(url)
    try:
        info = await connection.jetstream().stream_info(subjects.DLQ)
        return info.state.messages
    finally:
        await connection.close()


def _demo_helpdesk(var: Path) -> None:
    """The demo helpdesk `desk up` loads, where drafter and reconciler look by default."""
    ensure_demo(f"sqlite:///{(var / 'helpdesk.sqlite').resolve()}")


def _webhook(stack: Stack, ticket: str) -> None:
    ((status, body),) = send(
        url=stack.services["ingress"].url,
        source="helpdesk",
        secret=WEBHOOK_SECRET,
        scheme="standard",
        event=sample_event("ticket.created", ticket, "normal", None),
        repeat=1,
    )
    assert status == 202, body


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus (Debian package prometheus) is not installed")
    root = tmp_path_factory.mktemp("prometheus")
    with running_stack(root, seed=_demo_helpdesk) as stack:
        targets = {name: p.ops_url.removeprefix("http://") for name, p in stack.services.items()}
        prometheus = Prometheus(binary, root, targets)
        prometheus.start()
        try:
            # every target scraped a few times (rate() needs two samples); nothing happened yet
            prometheus.wait(
                lambda: prometheus.value("count(up == 1)") == len(SERVICES),
                30,
                lambda: f"every service scraped: {prometheus.query('up')}",
            )
            scraped = "min(count_over_time(up[1m])) >= 3"
            prometheus.wait(lambda: prometheus.value(scraped) is not None, 10, lambda: scraped)
            fresh = blind(prometheus)
            assert prometheus.value("sum(desk_dead_letters_total)") == 0
            _webhook(stack, "T1012")
            for ticket in MISSING_TICKETS:
                _webhook(stack, ticket)
            refused = httpx.post(
                f"{stack.services['ingress'].url}/webhooks/helpdesk",
                content=json.dumps(sample_event("ticket.created", "T1012", "normal", None)),
                headers={"Content-Type": "application/json", "webhook-signature": "v1,bad"},
                timeout=10,
            )
            assert refused.status_code in (400, 401), refused.text
            counted = "sum(desk_dead_letters_total)"
            prometheus.wait(
                lambda: prometheus.value(counted) == len(MISSING_TICKETS),
                30,
                lambda: f"the dead letters scraped; drafter: {stack.services['drafter'].tail()}",
            )
            # increase() extrapolates to the end of its window, by up to a scrape interval: over
            # a series scraped for only a few seconds that is a large share (2 would read 2.6)
            spans = f"min(count_over_time(desk_dead_letters_total[15m])) >= {MIN_SAMPLES}"
            prometheus.wait(
                lambda: prometheus.value(spans) is not None, 30, lambda: "enough samples"
            )
            yield Observed(prometheus, fresh, asyncio.run(_dlq_size(stack.nats.url)))
        finally:
            prometheus.stop()


def blind(prometheus: Prometheus) -> list[str]:
    """The checks that find no series: each would show nothing, or never fire, for want of a
    series."""
    found = []
    for where, expr in checks().items():
        result = prometheus.query(expr, where)  # refused: fails here, naming it
        if not result and where not in NATS_ONLY:
            found.append(f"{where}: {expr}")
    return found


def test_every_query_returns_series(observed: Observed) -> None:
    """On the fresh stack (before any event) and after the traffic."""
    recorded = {r["record"]: r["expr"] for r in _rules(_rule()) if "record" in r}
    nats_only = {where for where, expr in checks().items() if _nats_only(expr, recorded)}
    assert nats_only == set(NATS_ONLY), "NATS_ONLY must list exactly the nats_* queries"
    assert not observed.blind_when_fresh, "no series on a fresh stack for:\n" + "\n".join(
        observed.blind_when_fresh
    )
    after = blind(observed.prometheus)
    assert not after, "no series after the traffic for:\n" + "\n".join(after)


def test_the_alerts_see_the_dead_letters_and_nothing_else(observed: Observed) -> None:
    prometheus = observed.prometheus
    firing: dict[str, list[tuple[dict[str, str], int]]] = {}
    for query in (q for q in queries() if q.alert):
        result = prometheus.query(query.expr, query.where)
        if result:
            name = query.where.removeprefix("rule ")
            firing[name] = [(r["metric"], round(float(r["value"][1]))) for r in result]
    assert firing == {"DeskDeadLetters": [(DEAD, len(MISSING_TICKETS))]}


def test_the_dead_letter_panel_counts_the_dead_letters(observed: Observed) -> None:
    """The stat read 0 while two existed; now it shows what the DLQ stream holds."""
    assert observed.dead_letters == len(MISSING_TICKETS)
    ((where, expr),) = [
        (q.where, q.expr) for q in queries() if q.where == "panel 'Dead letters (24h)' A"
    ]
    assert observed.prometheus.value(expr) == observed.dead_letters, where
