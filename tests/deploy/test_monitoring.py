"""deploy/k8s/monitoring: PodMonitors, alert rules and the Grafana dashboard.

Every metric the rules and the dashboard name must exist:
- `desk_*`: exported by the six real services, started here on a real nats-server and scraped
  on their ops ports (DESK_OPS_PORT), as the PodMonitors scrape them.
  A family is "exported" when its `# TYPE` line is in a service's /metrics (prometheus_client
  prints HELP/TYPE even for a labelled metric with no samples yet); the name used in PromQL must
  be one of that family's sample names (`x_total` for a counter, `x_bucket`/`_sum`/`_count` for
  a histogram), so a histogram's bare name or a counter without `_total` fails too.
- `nats_*`: not ours. They come from prometheus-nats-exporter, the NATS Helm chart's
  `promExporter` sidecar (`-jsz=all -prefix=nats`, NATS-NOTES §10); NATS_EXPORTER below lists
  the JetStream series its jsz collector exports, and a `nats_*` name outside it fails.
- `desk:*`: recorded by a rule in the PrometheusRule.
- `up`: Prometheus' own per-target series.
Label names in selectors and in `by`/`on` clauses must belong to the metrics of the expression.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import functools
import importlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from desk.natsserver import NatsServer
from services.inbox_api import store as inbox_store
from shared.db import database_url, make_engine
from shared.inbox import CATEGORIES, DECISION_TYPES, ESCALATION
from tests.inbox_items import draft_item
from tests.services_running import ROOT, ServiceProcess

pytestmark = pytest.mark.long  # scheduled first (tests/conftest.py)

MONITORING = ROOT / "deploy" / "k8s" / "monitoring"
SERVICES = ("ingress", "router", "drafter", "inbox_api", "sender", "reconciler")
REVIEWER = "reviewer-token-for-monitoring"

# prometheus-nats-exporter's JetStream collector (collector/jsz.go, v0.20): with `-prefix=nats`
# the series are nats_server_*, nats_stream_* and nats_consumer_*; these are the ones a rule or
# panel may use, with their labels.
_SERVER_LABELS = {"server_id", "server_name", "cluster", "domain", "meta_leader", "is_meta_leader"}
_STREAM_LABELS = _SERVER_LABELS | {
    "account",
    "account_id",
    "stream_name",
    "stream_leader",
    "is_stream_leader",
}
_CONSUMER_LABELS = _STREAM_LABELS | {
    "consumer_name",
    "consumer_leader",
    "is_consumer_leader",
    "consumer_desc",
    "consumer_created",
}
NATS_EXPORTER: dict[str, set[str]] = {
    **{
        f"nats_stream_{n}": _STREAM_LABELS
        for n in ("total_messages", "total_bytes", "first_seq", "last_seq", "consumer_count")
    },
    **{
        f"nats_consumer_{n}": _CONSUMER_LABELS
        for n in (
            "num_pending",
            "num_ack_pending",
            "num_redelivered",
            "num_waiting",
            "delivered_consumer_seq",
            "delivered_stream_seq",
            "ack_floor_stream_seq",
            "ack_floor_consumer_seq",
        )
    },
}
# Labels Prometheus (Operator) attaches to every scraped series. `service` is also a desk label:
# the PodMonitors honor ours.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}
BUILTIN_SERIES = {"up": set[str]()}

# One metric per alert and per required panel: the extraction below must find at least these.
REQUIRED_DESK_METRICS = {
    "desk_dead_letters_total",
    "desk_inbox_oldest_waiting_seconds",
    "desk_inbox_waiting_items",
    "desk_inbox_decisions_total",
    "desk_reconciler_gaps_total",
    "desk_reconciler_last_success_timestamp_seconds",
    "desk_sender_deliveries_total",
    "desk_nats_connected",
    "desk_ingress_requests_total",
    "desk_ingress_publish_seconds_bucket",
    "desk_drafter_run_seconds_bucket",
    "desk_handler_seconds_bucket",
    "desk_drafter_cost_usd_total",
    "desk_sender_outcomes_total",
    "desk_waiting",
}
REQUIRED_ALERTS = {
    "DeskDeadLetters",
    "DeskInboxOldestWaiting",
    "DeskInboxPastTarget",
    "DeskConsumerLagGrowing",
    "DeskReconcilerGaps",
    "DeskChannelRetryRate",
    "DeskServiceDown",
    "DeskRepliesFailed",
    "DeskDependencyWait",
}
REQUIRED_PANELS = {
    "Intake rate by outcome",
    "Pipeline latency p50/p95/p99",
    "Handler latency p50/p95/p99 by consumer",
    "Queue depth per consumer",
    "Inbox waiting count and oldest age",
    "Decision mix per category",
    "Dead letters",
    "Draft cost",
}


# -- a small PromQL reader ---------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$\w+)
  | (?P<number>\d[\w.]*|\.\d+)
  | (?P<ident>[A-Za-z_:][\w:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=,(){}\[\]@])
    """,
    re.VERBOSE,
)
_KEYWORDS = {"and", "or", "unless", "offset", "bool", "atan2", "inf", "nan", "start", "end"}
_LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
_AGGREGATIONS = {
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
}


@dataclass
class Uses:
    """What one PromQL expression names: metrics, labels matched per metric, grouping labels."""

    metrics: set[str] = field(default_factory=set)
    matched: dict[str, set[str]] = field(default_factory=dict)
    grouping: set[str] = field(default_factory=set)


def _tokens(expr: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(expr):
        match = _TOKEN.match(expr, position)
        assert match, f"cannot read PromQL at {expr[position : position + 30]!r} in {expr!r}"
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            found.append((kind, match.group()))
        position = match.end()
    return found


def _label_list(tokens: list[tuple[str, str]], at: int) -> tuple[list[str], int]:
    """Labels of a `(a, b)` list starting at tokens[at]; returns them and the index after `)`."""
    assert tokens[at][1] == "(", tokens[at:]
    labels: list[str] = []
    at += 1
    while tokens[at][1] != ")":
        if tokens[at][0] in ("ident", "string"):
            labels.append(tokens[at][1].strip("\"'`"))
        at += 1
    return labels, at + 1


def read_promql(expr: str) -> Uses:
    tokens = _tokens(expr)
    assert sum(v == "(" for _, v in tokens) == sum(v == ")" for _, v in tokens), expr
    assert sum(v == "{" for _, v in tokens) == sum(v == "}" for _, v in tokens), expr
    uses = Uses()
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if value == "[":  # a range or subquery: durations and variables, no metric
            while tokens[i][1] != "]":
                i += 1
            i += 1
        elif kind == "ident" and value in _LABEL_LISTS:
            if following == "(":
                labels, i = _label_list(tokens, i + 1)
                uses.grouping.update(labels)
            else:
                i += 1  # group_left without labels
        elif kind == "ident" and (
            following == "(" or (value in _AGGREGATIONS and following in _LABEL_LISTS)
        ):
            i += 1  # a function or an aggregation
        elif kind == "ident" and value.lower() in _KEYWORDS:
            i += 1
        elif kind == "ident" or value == "{":
            name = value if kind == "ident" else ""
            i += 1 if kind == "ident" else 0
            matchers: set[str] = set()
            if i < len(tokens) and tokens[i][1] == "{":
                i += 1
                while tokens[i][1] != "}":
                    label, op, matched = tokens[i], tokens[i + 1], tokens[i + 2]
                    assert label[0] == "ident" and op[0] == "op" and matched[0] == "string", expr
                    if label[1] == "__name__":
                        name = matched[1].strip("\"'`")
                    matchers.add(label[1])
                    i += 3
                    if tokens[i][1] == ",":
                        i += 1
                i += 1
            assert name, f"a selector without a metric name in {expr!r}"
            uses.metrics.add(name)
            uses.matched.setdefault(name, set()).update(matchers - {"__name__"})
        else:
            i += 1
    return uses


def test_the_promql_reader_finds_metrics_and_only_metrics() -> None:
    uses = read_promql(
        'sum by (channel) (rate(a_total{outcome=~"retry|x"}[$__rate_interval])) / on (channel)'
        ' group_left sum without (pod) (b_total offset 15m) > bool 0.05 or absent(up{job="a"})'
        " or histogram_quantile(0.95, sum by (le) (rate(c_bucket[5m]))) and vector(1) * 1e3"
        ' or rec:rule:max unless count(d) or {__name__="e", x="1"} or sum(f[1h:5m])'
    )
    assert uses.metrics == {"a_total", "b_total", "up", "c_bucket", "rec:rule:max", "d", "e", "f"}
    assert uses.matched["a_total"] == {"outcome"} and uses.matched["e"] == {"x"}
    assert uses.grouping == {"channel", "pod", "le"}


# -- the manifests -----------------------------------------------------------------------------


def _rule() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return loaded


def _dashboard() -> dict[str, Any]:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    (entry,) = generator["files"]
    loaded: dict[str, Any] = json.loads((MONITORING / entry.split("=")[-1]).read_text())
    return loaded


def _rules(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))  # collapsed rows
    return found


_ANNOTATION_QUERY = re.compile(r'query\s+"((?:[^"\\]|\\.)*)"')


def expressions() -> list[tuple[str, str, set[str]]]:
    """(where, PromQL, labels a legend or annotation shows) for every rule and panel query."""
    found: list[tuple[str, str, set[str]]] = []
    for r in _rules(_rule()):
        where = f"rule {r.get('alert') or r.get('record')}"
        shown = {
            m for a in r.get("annotations", {}).values() for m in re.findall(r"\$labels\.(\w+)", a)
        }
        found.append((where, r["expr"], shown))
        for text in r.get("annotations", {}).values():
            found.extend((f"{where} annotation", q, set()) for q in _ANNOTATION_QUERY.findall(text))
    for panel in _panels(_dashboard()):
        for target in panel.get("targets", []):
            shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            found.append((f"panel {panel['title']!r}", target["expr"], shown))
    return found


def test_the_kustomization_lists_the_manifests_and_a_grafana_dashboard_configmap() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert set(kustomization["resources"]) == {"podmonitors.yaml", "prometheusrule.yaml"}
    (generator,) = kustomization["configMapGenerator"]
    assert generator["options"]["labels"]["grafana_dashboard"] == "1"
    assert generator["options"]["disableNameSuffixHash"] is True
    for name in [*kustomization["resources"], *(f.split("=")[-1] for f in generator["files"])]:
        assert (MONITORING / name).is_file(), name


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_a_podmonitor_per_service_scrapes_its_ops_port() -> None:
    monitors = _documents(MONITORING / "podmonitors.yaml")
    assert all(d["kind"] == "PodMonitor" for d in monitors)
    assert all(d["apiVersion"] == "monitoring.coreos.com/v1" for d in monitors)
    selected = set()
    for monitor in monitors:
        spec = monitor["spec"]
        assert set(spec["selector"]) == {"matchLabels"}
        labels = spec["selector"]["matchLabels"]
        assert labels["app.kubernetes.io/part-of"] == "ambient-desk"
        selected.add(labels["app.kubernetes.io/name"])
        assert spec["jobLabel"] == "app.kubernetes.io/name"  # job = the service's name
        (endpoint,) = spec["podMetricsEndpoints"]
        assert endpoint["port"] == "ops" and endpoint["path"] == "/metrics"
        assert endpoint["interval"] == "30s"
        assert endpoint["honorLabels"] is True
    assert len(monitors) == len(SERVICES) and selected == set(SERVICES)


def test_each_podmonitor_selects_the_pods_of_a_deployment_with_an_ops_port() -> None:
    """The pods serve /metrics on their port named `ops`; no Service exposes it (the public
    Services of ingress and inbox-api carry only their routes' port)."""
    base = ROOT / "deploy" / "k8s" / "base"
    if not base.is_dir():
        pytest.skip("no deploy/k8s/base")
    documents = [d for path in sorted(base.glob("*.yaml")) for d in _documents(path)]
    deployments = [d for d in documents if d["kind"] == "Deployment"]
    for monitor in _documents(MONITORING / "podmonitors.yaml"):
        wanted = monitor["spec"]["selector"]["matchLabels"].items()
        (deployment,) = [
            d for d in deployments if wanted <= d["spec"]["template"]["metadata"]["labels"].items()
        ]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert "ops" in {p["name"] for p in container["ports"]}, deployment["metadata"]
    for service in (d for d in documents if d["kind"] == "Service"):
        names = {p["name"] for p in service["spec"]["ports"]}
        targets = {p.get("targetPort") for p in service["spec"]["ports"]}
        assert not names & {"ops", "metrics"} and "ops" not in targets, service["metadata"]


def test_every_alert_has_for_severity_and_summary() -> None:
    rule = _rule()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1" and rule["kind"] == "PrometheusRule"
    alerts = [r for r in _rules(rule) if "alert" in r]
    assert REQUIRED_ALERTS <= {a["alert"] for a in alerts}
    for alert in alerts:
        assert re.fullmatch(r"\d+[smh]", str(alert.get("for", ""))), alert["alert"]
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        assert alert["annotations"]["summary"].strip(), alert["alert"]
        assert alert["annotations"]["description"].strip(), alert["alert"]


def test_the_inbox_threshold_is_a_recorded_value_of_four_hours() -> None:
    rules = {r.get("record") or r.get("alert"): r for r in _rules(_rule())}
    threshold = rules["desk:inbox_oldest_waiting_threshold_seconds"]["expr"].strip()
    assert threshold == f"vector({4 * 3600})"
    assert "desk:inbox_oldest_waiting_threshold_seconds" in rules["DeskInboxOldestWaiting"]["expr"]


def test_the_dashboard_has_each_panel_and_a_datasource_variable() -> None:
    dashboard = _dashboard()
    assert 36 <= dashboard["schemaVersion"] <= 41 and dashboard["uid"] == "ambient-desk"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    panels = _panels(dashboard)
    assert REQUIRED_PANELS <= {p["title"] for p in panels}
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        if panel.get("type") == "row":
            continue
        assert panel["targets"], panel["title"]
        for target in [panel, *panel["targets"]]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]


def test_every_recorded_and_nats_name_is_defined() -> None:
    recorded = {r["record"] for r in _rules(_rule()) if "record" in r}
    for where, expr, _ in expressions():
        for name in read_promql(expr).metrics:
            if ":" in name:
                assert name in recorded, f"{where}: {name} is not recorded by any rule"
            elif name.startswith("nats_"):
                assert name in NATS_EXPORTER, f"{where}: the NATS exporter has no {name}"
            else:
                assert name.startswith("desk_") or name in BUILTIN_SERIES, f"{where}: {name}?"


def test_promql_syntax_and_the_reader_agree_with_a_real_parser() -> None:
    parser = pytest.importorskip("promql_parser")

    def names(node: Any) -> Iterator[str]:
        if isinstance(node, parser.VectorSelector):
            yield node.name or next(m.value for m in node.matchers.matchers if m.name == "__name__")
        for attribute in ("lhs", "rhs", "expr", "args", "param", "vector_selector"):
            child = getattr(node, attribute, None)
            for item in child if isinstance(child, list) else [child]:
                if item is not None and not isinstance(item, str | int | float):
                    yield from names(item)

    for where, expr, _ in expressions():
        concrete = expr.replace("$__rate_interval", "2m").replace("$__range", "6h")
        assert set(names(parser.parse(concrete))) == read_promql(expr).metrics, where


# -- the real services -------------------------------------------------------------------------


@dataclass
class Scrape:
    families: dict[str, str]  # family name -> type, from # TYPE lines
    samples: dict[str, dict[frozenset[tuple[str, str]], float]]  # sample name -> labels -> value

    @property
    def exported(self) -> set[str]:
        """Every sample name these families can carry, samples or not."""
        suffixes = {
            "counter": ("_total", "_created"),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
            "summary": ("", "_sum", "_count", "_created"),
            "info": ("_info",),
        }
        return {
            family + suffix
            for family, kind in self.families.items()
            for suffix in suffixes.get(kind, ("",))
        } | set(self.samples)


def parse_scrape(text: str) -> Scrape:
    families: dict[str, str] = {}
    samples: dict[str, dict[frozenset[tuple[str, str]], float]] = {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for sample in family.samples:
            samples.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    return Scrape(families, samples)


def test_the_exported_names_follow_each_type() -> None:
    scrape = parse_scrape(
        "# TYPE a_total counter\n# TYPE b_seconds histogram\n# TYPE c gauge\nc 1.0\n"
    )
    assert {"a_total", "b_seconds_bucket", "b_seconds_count", "c"} <= scrape.exported
    assert not {"a", "b_seconds", "a_total_total", "d"} & scrape.exported


def _seed_inbox(var_dir: Path) -> None:
    """Two waiting items, the oldest created two hours ago, before inbox_api starts."""
    engine = make_engine(database_url(None, var_dir, "inbox"))
    try:
        inbox_store.create_tables(engine)
        now = dt.datetime.now(dt.UTC)
        inbox_store.project(engine, draft_item("M1", created_at=now - dt.timedelta(hours=2)))
        inbox_store.project(
            engine, draft_item("M2", category="billing", created_at=now - dt.timedelta(minutes=5))
        )
    finally:
        engine.dispose()


@dataclass
class Scraped:
    services: dict[str, Scrape]  # each service's /metrics once everything ran
    inbox_before: Scrape  # inbox_api's, seeded with two waiting items, before any decision


def _scrape(url: str) -> Scrape:
    return parse_scrape(httpx.get(f"{url}/metrics", timeout=10).text)


def _scrape_until(url: str, sample: str, value: float, timeout: float = 30.0) -> Scrape:
    deadline = time.monotonic() + timeout
    while True:
        scrape = _scrape(url)
        if scrape.samples.get(sample, {}).get(frozenset()) == value or time.monotonic() > deadline:
            return scrape
        time.sleep(0.1)


WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"monitoring-helpdesk-secret-32byt").decode()


@dataclass
class Stack:
    nats: NatsServer
    services: dict[str, ServiceProcess]


@contextlib.contextmanager
def running_stack(root: Path, seed: Callable[[Path], None] | None = None) -> Iterator[Stack]:
    """The six services on their own nats-server, on free ports, with `root`/var as their var
    dir (dev credentials: the demo source `helpdesk` signs with WEBHOOK_SECRET; `seed` fills
    it first); every process stopped on exit."""
    var = root / "var"
    var.mkdir()
    (var / "dev-credentials.json").write_text(
        json.dumps(
            {
                "webhook_secrets": {"helpdesk": WEBHOOK_SECRET},
                "reviewer_token": REVIEWER,
                "viewer_token": "viewer-token-for-monitoring",
            }
        )
    )
    if seed is not None:
        seed(var)
    nats = NatsServer(root / "nats", sync_always=False, log_file=root / "nats.log")
    processes: dict[str, ServiceProcess] = {}
    try:
        nats.start()  # its port is known once it runs (a taken port makes it pick another)
        env = {"DESK_NATS_URL": nats.url, "DESK_VAR_DIR": str(var)}
        processes = {s: ServiceProcess([s], env, root / f"{s}.log") for s in SERVICES}
        with ThreadPoolExecutor(len(SERVICES)) as pool:
            # generous: six interpreters importing at once on a small, shared machine
            for started in [pool.submit(p.start, True, 90.0) for p in processes.values()]:
                started.result()
        yield Stack(nats, processes)
    finally:
        with ThreadPoolExecutor(len(SERVICES)) as pool:
            list(pool.map(ServiceProcess.stop, [p for p in processes.values() if p.proc]))
        nats.kill()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    with running_stack(tmp_path_factory.mktemp("monitoring"), seed=_seed_inbox) as stack:
        processes = stack.services
        inbox = processes["inbox_api"]
        # the first refresh, scraped where Prometheus scrapes: the ops port
        before = _scrape_until(inbox.ops_url, "desk_inbox_waiting_items", 2.0)
        answer = httpx.post(
            f"{inbox.url}/api/items/{draft_item('M1').id}/decision",
            json={"type": "accept", "version": 1},
            headers={"Authorization": f"Bearer {REVIEWER}"},
            timeout=10,
        )
        assert answer.status_code == 202, answer.text
        yield Scraped(
            {name: _scrape(p.ops_url) for name, p in processes.items()}, inbox_before=before
        )


def _owner(metric: str) -> tuple[str, ...]:
    """The services that must export a desk metric: its prefix names the owner, else all."""
    owner = next((s for s in SERVICES if metric.startswith(f"desk_{s}_")), None)
    owner = owner or ("ingress" if metric.startswith("desk_imap_") else None)  # its metrics.py
    owner = owner or ("inbox_api" if metric.startswith("desk_inbox_") else None)
    owner = owner or ("drafter" if metric.startswith("desk_model_") else None)  # its endpoint
    return (owner,) if owner else SERVICES


def _labels_of_the_code() -> dict[str, set[str]]:
    """Label names of every desk metric (sample name -> labels), from the modules that define
    them (every module that uses prometheus_client): a labelled metric with no samples yet shows
    no labels in /metrics."""
    for path in sorted([*(ROOT / "shared").rglob("*.py"), *(ROOT / "services").rglob("*.py")]):
        if "prometheus_client" in path.read_text():
            importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    labels: dict[str, set[str]] = {}
    for collector, families in list(REGISTRY._collector_to_names.items()):
        if not any(f.startswith("desk_") for f in families):
            continue
        names = tuple(getattr(collector, "_labelnames", ()))
        described: list[Any] = list(getattr(collector, "describe", list)())
        for family in described or collector.collect():
            scrape = Scrape({family.name: family.type}, {})
            for sample in scrape.exported:
                labels[sample] = set(names) | ({"le"} if sample.endswith("_bucket") else set())
    return labels


def test_the_services_export_every_desk_metric_the_rules_and_dashboard_use(
    scraped: Scraped,
) -> None:
    scrapes = scraped.services
    used: dict[str, set[str]] = {}
    for where, expr, _ in expressions():
        for name in read_promql(expr).metrics:
            if name.startswith("desk_"):
                used.setdefault(name, set()).add(where)
    assert REQUIRED_DESK_METRICS <= set(used), REQUIRED_DESK_METRICS - set(used)
    for service, scrape in scrapes.items():
        # the scrape is real: every service reports its NATS connection up
        assert scrape.samples["desk_nats_connected"] == {frozenset({("service", service)}): 1.0}
    missing = {
        f"{name} (used in {', '.join(sorted(where))}) from {service}"
        for name, where in used.items()
        for service in _owner(name)
        if name not in scrapes[service].exported
    }
    assert not missing, "\n".join(sorted(missing))
    # and has samples already: a labelled counter whose series appear only at its first event
    # shows Prometheus no increase() for that event (every series starts at 0)
    unsampled = {n for n in used if not any(n in scrapes[s].samples for s in _owner(n))}
    assert not unsampled, sorted(unsampled)


def test_labels_used_belong_to_the_metrics(scraped: Scraped) -> None:
    code = _labels_of_the_code()
    for service, scrape in scraped.services.items():  # the code's labels are what is exported
        for sample, values in scrape.samples.items():
            if sample in code:
                for labels in values:
                    assert {k for k, _ in labels} <= code[sample], (service, sample)
    recorded: dict[str, set[str]] = {}
    known = {**code, **NATS_EXPORTER, **BUILTIN_SERIES}
    for r in _rules(_rule()):
        if "record" in r:
            uses = read_promql(r["expr"])
            recorded[r["record"]] = {x for m in uses.metrics for x in known[m]} & uses.grouping
    known.update(recorded)
    checked = 0
    for where, expr, shown in expressions():
        uses = read_promql(expr)
        for name, matched in uses.matched.items():
            assert matched <= known[name] | TARGET_LABELS, f"{where}: {name}{{{matched}}}"
            checked += len(matched)
        available = {x for m in uses.metrics for x in known[m]} | TARGET_LABELS
        assert uses.grouping <= available, f"{where}: {uses.grouping - available}"
        assert shown <= available | uses.grouping, f"{where}: shows {shown - available}"
        checked += len(uses.grouping)
    assert checked > 20


def test_the_inbox_metrics_come_from_the_database(scraped: Scraped) -> None:
    before = scraped.inbox_before.samples
    assert before["desk_inbox_waiting_items"] == {frozenset(): 2.0}
    oldest = max(before["desk_inbox_oldest_waiting_seconds"].values())
    assert 2 * 3600 - 5 < oldest < 2 * 3600 + 300
    assert scraped.inbox_before.families["desk_inbox_decisions"] == "counter"
    # no decision yet: every category's series exists at 0, for each decision its items allow
    zeroes = before["desk_inbox_decisions_total"]
    assert set(zeroes.values()) == {0.0}
    assert {dict(labels)["category"] for labels in zeroes} == {*CATEGORIES, ESCALATION}
    assert {dict(labels)["type"] for labels in zeroes} == set(DECISION_TYPES)
    after = scraped.services["inbox_api"].samples
    decided = frozenset({("category", "refund"), ("type", "accept")})
    assert after["desk_inbox_decisions_total"] == {**zeroes, decided: 1.0}


async def test_the_inbox_metrics_follow_the_store(tmp_path: Path) -> None:
    from services.inbox_api import metrics

    engine = make_engine(database_url(None, tmp_path, "inbox"))
    oldest = "desk_inbox_oldest_waiting_seconds"
    try:
        inbox_store.create_tables(engine)
        assert inbox_store.waiting(engine) == inbox_store.Waiting()
        metrics.known_queues(["billing"])
        metrics.record(inbox_store.waiting(engine))
        # every known queue's series exists at 0 for each priority, before anything waits
        assert REGISTRY.get_sample_value(oldest, {"queue": "billing", "priority": "urgent"}) == 0
        assert REGISTRY.get_sample_value(oldest, {"queue": "none", "priority": "low"}) == 0
        created = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=30)
        targets = inbox_store.targets.Targets({"normal": 20})  # 20 min: this one is past it
        item = draft_item("W1", created_at=created)
        item = item.model_copy(
            update={"trigger": item.trigger.model_copy(update={"queue": "billing"})}
        )
        inbox_store.project(engine, item, None, targets)
        await metrics.refresh(functools.partial(inbox_store.waiting, engine))
        assert REGISTRY.get_sample_value("desk_inbox_waiting_items") == 1.0
        age = REGISTRY.get_sample_value(oldest, {"queue": "billing", "priority": "normal"})
        assert age is not None and 1800 <= age < 1860
        assert REGISTRY.get_sample_value(oldest, {"queue": "billing", "priority": "urgent"}) == 0
        past = "desk_inbox_past_target_items"
        assert REGISTRY.get_sample_value(past, {"queue": "billing"}) == 1.0
        assert REGISTRY.get_sample_value(past, {"queue": "none"}) == 0.0
    finally:
        metrics.record(inbox_store.Waiting())
        engine.dispose()


# -- the alerts' behaviour, where promtool and kubectl are at hand -----------------------------


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _consumer(name: str, stream: str, consumer: str, values: str) -> dict[str, str]:
    return _series(
        f"nats_consumer_{name}",
        values,
        stream_name=stream,
        consumer_name=consumer,
        is_consumer_leader="true",
    )


def _expect(at: str, alert: str, *fired: dict[str, str]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": [{"exp_labels": f} for f in fired]}


def _case(series: list[dict[str, str]], *expectations: dict[str, Any]) -> dict[str, Any]:
    return {"interval": "1m", "input_series": series, "alert_rule_test": list(expectations)}


WARNING, CRITICAL = {"severity": "warning"}, {"severity": "critical"}
DEAD = {"service": "drafter", "consumer": "drafter", "reason": "permanent"}
JOBS = ("ingress", "router", "drafter", "inbox_api", "sender")  # no reconciler target at all


def _panel_expr(title: str, ref: str = "A") -> str:
    (panel,) = [p for p in _panels(_dashboard()) if p["title"] == title]
    (target,) = [t for t in panel["targets"] if t["refId"] == ref]
    expr: str = target["expr"]
    return expr


def _dead(values: str, pod: str) -> dict[str, str]:
    return _series("desk_dead_letters_total", values, job="drafter", pod=pod, **DEAD)


# promtool unit tests of the alert rules (series values: `a+bxN` = a, a+b, ... N more; `_` none;
# `axN` = a, then N more). Every alert has a case where it fires and one where it does not (an
# expectation without alerts): test_every_alert_has_a_case_that_fires_and_one_that_does_not.
PROMTOOL_TESTS: dict[str, Any] = {
    "evaluation_interval": "1m",
    "tests": [
        # the first dead letter of a kind (a series that starts at 1) fires; a steady count not
        _case(
            [_series("desk_dead_letters_total", "_x10 1x50", job="drafter", **DEAD)],
            _expect("13m", "DeskDeadLetters", {**WARNING, **DEAD}),
            _expect("45m", "DeskDeadLetters"),
        ),
        # a new letter in the DLQ stream fires though a replay kept its size at 5
        _case(
            [
                _series("nats_stream_last_seq", "5x10 6x30", stream_name="DLQ"),
                _series("nats_stream_total_messages", "5x40", stream_name="DLQ"),
            ],
            _expect("5m", "DeskDeadLetters"),
            _expect("13m", "DeskDeadLetters", {**WARNING, "stream_name": "DLQ"}),
            _expect("35m", "DeskDeadLetters"),
        ),
        # a failed reply fires (counted from 0, or by a series born at 1); none for 15m does not
        _case(
            [_series("desk_sender_outcomes_total", "0x10 1x30", job="sender", outcome="failed")],
            _expect("10m", "DeskRepliesFailed"),
            _expect("13m", "DeskRepliesFailed", CRITICAL),
            _expect("35m", "DeskRepliesFailed"),
        ),
        _case(
            [_series("desk_sender_outcomes_total", "_x10 1x30", job="sender", outcome="failed")],
            _expect("13m", "DeskRepliesFailed", CRITICAL),
        ),
        # held for a dependency (dipping to 0 for each new try) fires after 10 minutes; a
        # five-minute wait does not
        _case(
            [
                _series(
                    "desk_waiting",
                    "0x2 " + "1 1 1 0 " * 6,
                    service="sender",
                    consumer="sender",
                ),
                _series("desk_waiting", "1x5 0x20", service="drafter", consumer="drafter"),
            ],
            _expect("9m", "DeskDependencyWait"),
            _expect(
                "16m", "DeskDependencyWait", {**CRITICAL, "service": "sender", "consumer": "sender"}
            ),
        ),
        # the oldest item ages a minute a minute: fires 5 minutes after it passes 4h
        # (by queue and priority: the alert says which)
        _case(
            [
                _series(
                    "desk_inbox_oldest_waiting_seconds",
                    "0+60x300",
                    job="inbox_api",
                    queue="billing",
                    priority="high",
                ),
                _series(
                    "desk_inbox_oldest_waiting_seconds", "0x300", queue="billing", priority="low"
                ),
            ],
            _expect("243m", "DeskInboxOldestWaiting"),
            _expect(
                "247m",
                "DeskInboxOldestWaiting",
                {**WARNING, "queue": "billing", "priority": "high"},
            ),
        ),
        # items past their target for 10 minutes fire, per queue; a queue with none does not
        _case(
            [
                _series("desk_inbox_past_target_items", "0x5 2x30", queue="billing"),
                _series("desk_inbox_past_target_items", "0x40", queue="general"),
            ],
            _expect("14m", "DeskInboxPastTarget"),
            _expect("16m", "DeskInboxPastTarget", {**WARNING, "queue": "billing"}),
        ),
        # a growing backlog fires after 10 minutes (not before); a large steady one that moves
        # does not
        _case(
            [
                _consumer("num_pending", "WORK", "drafter", "0+2x40"),
                _consumer("delivered_consumer_seq", "WORK", "drafter", "0+1x40"),
                _consumer("num_pending", "INBOX", "sender", "500x40"),
                _consumer("delivered_consumer_seq", "INBOX", "sender", "0+10x40"),
            ],
            _expect("5m", "DeskConsumerLagGrowing"),
            _expect(
                "25m",
                "DeskConsumerLagGrowing",
                {**WARNING, "stream_name": "WORK", "consumer_name": "drafter"},
            ),
            _expect("25m", "DeskConsumerStalled"),
        ),
        # a backlog and no delivery at all is stalled
        _case(
            [
                _consumer("num_pending", "EVENTS", "router", "3x40"),
                _consumer("delivered_consumer_seq", "EVENTS", "router", "77x40"),
            ],
            _expect(
                "25m",
                "DeskConsumerStalled",
                {**CRITICAL, "stream_name": "EVENTS", "consumer_name": "router"},
            ),
        ),
        # retries above 5% of a channel's attempts (1 in 11) fire, after 5 minutes; 1 in 101 does
        # not
        _case(
            [
                _series(
                    "desk_sender_deliveries_total",
                    "0+10x60",
                    channel="webhook",
                    outcome="delivered",
                ),
                _series(
                    "desk_sender_deliveries_total", "0+1x60", channel="webhook", outcome="retry"
                ),
                _series(
                    "desk_sender_deliveries_total", "0+100x60", channel="quiet", outcome="delivered"
                ),
                _series(
                    "desk_sender_deliveries_total", "0+1x60", channel="quiet", outcome="unknown"
                ),
            ],
            _expect("3m", "DeskChannelRetryRate"),
            _expect("30m", "DeskChannelRetryRate", {**WARNING, "channel": "webhook"}),
        ),
        # the reconciler's first gaps fire, for an hour; a reconciler that completes runs is not
        # stale
        _case(
            [
                _series("desk_reconciler_gaps_total", "_x30 3x100", type="ticket.created"),
                _series("desk_reconciler_last_success_timestamp_seconds", "0+60x130"),
            ],
            _expect("20m", "DeskReconcilerGaps"),
            _expect("33m", "DeskReconcilerGaps", {**WARNING, "type": "ticket.created"}),
            _expect("100m", "DeskReconcilerGaps"),
            _expect("33m", "DeskReconcilerStale"),
        ),
        # no backfill completed since minute 10: stale from 15 minutes later, firing 5 after that
        _case(
            [_series("desk_reconciler_last_success_timestamp_seconds", "0+60x10 600x40")],
            _expect("28m", "DeskReconcilerStale"),
            _expect("35m", "DeskReconcilerStale", WARNING),
        ),
        # a mail poller whose polls all fail fires after 20 minutes; one whose polls succeed
        # between failures does not, nor does the webhook ingress (its counters stay 0)
        _case(
            [
                _series("desk_imap_polls_total", "0+1x40", pod="imap-a", outcome="failed"),
                _series("desk_imap_polls_total", "5x40", pod="imap-a", outcome="ok"),
                _series("desk_imap_polls_total", "0+1x40", pod="imap-b", outcome="failed"),
                _series("desk_imap_polls_total", "0+1x40", pod="imap-b", outcome="ok"),
                _series("desk_imap_polls_total", "0x40", pod="ingress", outcome="failed"),
                _series("desk_imap_polls_total", "0x40", pod="ingress", outcome="ok"),
            ],
            _expect("3m", "DeskMailIntakeFailing"),
            _expect("25m", "DeskMailIntakeFailing", {**CRITICAL, "pod": "imap-a"}),
        ),
        # a drafter whose model has been down for 3 minutes fires (a minute's blip does not,
        # nor does a drafter whose model answers); up again, it stops
        _case(
            [
                _series("desk_model_up", "1x5 0x10 1x10", namespace="desk", pod="drafter-a"),
                _series("desk_model_up", "1x5 0 1x20", namespace="desk", pod="drafter-b"),
            ],
            _expect("7m", "DeskModelDown"),
            _expect("9m", "DeskModelDown", {**CRITICAL, "namespace": "desk", "pod": "drafter-a"}),
            _expect("20m", "DeskModelDown"),
        ),
        # a target down, and a service no target of which is scraped
        _case(
            [
                _series(
                    "up", "0x20" if job == "ingress" else "1x20", job=job, instance=f"{job}:8080"
                )
                for job in JOBS
            ],
            _expect(
                "10m",
                "DeskServiceDown",
                {**CRITICAL, "job": "ingress", "instance": "ingress:8080"},
                {**CRITICAL, "job": "reconciler"},
            ),
        ),
        # every service scraped and up
        _case(
            [
                _series("up", "1x20", job=job, instance=f"{job}:8080")
                for job in (*JOBS, "reconciler")
            ],
            _expect("10m", "DeskServiceDown"),
        ),
        # a NATS connection lost for 5 minutes fires (not sooner); a connected service does not
        _case(
            [
                _series("desk_nats_connected", "1x5 0x20", service="sender"),
                _series("desk_nats_connected", "1x25", service="router"),
            ],
            _expect("8m", "DeskNatsDisconnected"),
            _expect("15m", "DeskNatsDisconnected", {**CRITICAL, "service": "sender"}),
        ),
        # "Dead letters (24h)" at 30h (samples every 5 minutes): 3 by a pod alive all along, 1
        # after a restart, 1 by a pod gone since, 1 by a new pod, and 2 by a new pod before its
        # first scrape (born at 2: increase() alone misses them) = 8
        {
            "interval": "5m",
            "input_series": [
                _dead("0x120 1x120 3x200", "steady"),
                _dead("2x150 0 1x200", "restarted"),
                _dead("0x180 1x60", "gone"),
                _dead("_x312 0x5 1x40", "new"),
                _dead("_x300 2x60", "busy-at-start"),
            ],
            "promql_expr_test": [
                {
                    "expr": _panel_expr("Dead letters (24h)"),
                    "eval_time": "30h",
                    "exp_samples": [{"labels": "{}", "value": 8}],
                }
            ],
        },
        # ... and with every series older than the window
        {
            "interval": "5m",
            "input_series": [_dead("0x300 2x100", "steady")],
            "promql_expr_test": [
                {
                    "expr": _panel_expr("Dead letters (24h)"),
                    "eval_time": "30h",
                    "exp_samples": [{"labels": "{}", "value": 2}],
                }
            ],
        },
    ],
}


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    alerts = {r["alert"] for r in _rules(_rule()) if "alert" in r}
    expected = [e for case in PROMTOOL_TESTS["tests"] for e in case.get("alert_rule_test", [])]
    fires = {e["alertname"] for e in expected if e["exp_alerts"]}
    silent = {e["alertname"] for e in expected if not e["exp_alerts"]}
    assert not alerts - fires, f"no promtool case where these fire: {sorted(alerts - fires)}"
    assert not alerts - silent, f"no promtool case where these stay quiet: {alerts - silent}"
    assert not (fires | silent) - alerts, f"cases of unknown alerts: {(fires | silent) - alerts}"


def test_the_alerts_fire_when_they_should(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool (Debian package prometheus) is not installed")
    groups = _rule()["spec"]["groups"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    assert _check(promtool, "check", "rules", str(tmp_path / "rules.yaml"))  # templates too
    for rule in (r for group in groups for r in group["rules"]):
        rule.pop("annotations", None)  # the cases below check when alerts fire, not their text
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump({"groups": groups}))
    cases = {**PROMTOOL_TESTS, "rule_files": ["bare.yaml"]}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(cases))
    assert _check(promtool, "test", "rules", str(tmp_path / "tests.yaml"))


def _check(*command: str) -> bool:
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return True


def test_kustomize_builds_the_monitoring_manifests() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    built = subprocess.run(
        [kubectl, "kustomize", str(MONITORING)], capture_output=True, text=True, timeout=60
    )
    assert built.returncode == 0, built.stderr
    kinds = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(built.stdout) if d]
    assert ("PrometheusRule", "ambient-desk") in kinds
    assert sum(kind == "PodMonitor" for kind, _ in kinds) == len(SERVICES)
    assert not [k for k, _ in kinds if k == "ServiceMonitor"], "no Service exposes /metrics"
    (configmap,) = [d for d in yaml.safe_load_all(built.stdout) if d and d["kind"] == "ConfigMap"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["ambient-desk.json"]) == _dashboard()
