"""Boundaries the codebase keeps: services never import each other, shared never imports
services, nothing outside tests/ imports tests, code outside services/ uses a service only
through its public entry points, and subject names are spelled only in shared/."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBJECT_LIKE = re.compile(r"^(events|work|inbox|results|dlq)\.[A-Za-z0-9_*>.-]*$")
PRODUCT = ("shared", "services", "desk")  # what the wheel and the image hold
NOT_CODE = {"var", "build", "dist", "deploy"}  # no Python of ours (deploy: manifests only)


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_the_six_services_exist_with_the_same_shape() -> None:
    names = {p.name for p in (ROOT / "services").iterdir() if (p / "main.py").exists()}
    assert names == {"ingress", "router", "drafter", "sender", "reconciler", "inbox_api"}
    for name in names:
        tree = ast.parse((ROOT / "services" / name / "main.py").read_text())
        runs = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "run"]
        assert runs, f"services/{name}/main.py has no `async def run(settings)`"


def test_every_main_only_declares_the_service() -> None:
    """`main.py` declares what the service runs, in one shape: `run(settings)` and nothing
    else, a `Service` entered once (no `try`: the service owns lifetimes), the bus and the
    ledger taken from it (never opened here, never checked for None), at most 60 lines."""
    for path in sorted((ROOT / "services").glob("*/main.py")):
        where = f"services/{path.parent.name}/main.py"
        text = path.read_text()
        assert len(text.splitlines()) <= 60, f"{where}: {len(text.splitlines())} lines"
        tree = ast.parse(text)
        defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        assert defs == ["run"], f"{where} defines {defs}: move them beside what they build"
        nodes = list(ast.walk(tree))
        entered = [n for n in nodes if isinstance(n, ast.AsyncWith)]
        assert len(entered) == 1, f"{where}: the service is entered once ({len(entered)})"
        assert not [n for n in nodes if isinstance(n, ast.Try)], f"{where}: a try block"
        for forbidden in ("bus is None", "bus is not None", "Ledger.open", "AsyncExitStack"):
            assert forbidden not in text, f"{where}: {forbidden!r} (the service owns it)"


MAX_MODULE_LINES = 400
CODE = ("shared", "services", "desk", "chaos", "standins", "benchmarks", "scripts")
# Modules still over the limit, with the size each may not grow past: the list only shrinks.
OVER_THE_LIMIT: dict[str, int] = {}


def test_no_module_outside_tests_grows_past_400_lines() -> None:
    """Small modules, one concept each: a module that grows past 400 lines is split by
    concept before it lands."""
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for top in CODE
        for path in (ROOT / top).rglob("*.py")
    }
    over = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    grown = {n: size for n, size in over.items() if size > OVER_THE_LIMIT.get(n, MAX_MODULE_LINES)}
    assert not grown, f"over {MAX_MODULE_LINES} lines: {grown}: split them by concept"
    shrunk = [n for n in OVER_THE_LIMIT if sizes.get(n, 0) <= MAX_MODULE_LINES]
    assert not shrunk, f"{shrunk} are within the limit now: take them off OVER_THE_LIMIT"


def test_services_never_import_each_other() -> None:
    for path in (ROOT / "services").rglob("*.py"):
        own = path.relative_to(ROOT / "services").parts[0]
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "services" and len(parts) > 1:
                assert parts[1] == own, f"{path.relative_to(ROOT)} imports {module}"
            assert parts[0] != "desk", f"{path.relative_to(ROOT)} imports {module}"


def test_shared_never_imports_services_or_the_cli() -> None:
    for path in (ROOT / "shared").rglob("*.py"):
        for module in imported_modules(path):
            assert module.split(".")[0] not in {"services", "desk"}, (
                f"{path.relative_to(ROOT)} imports {module}"
            )


def test_no_subject_literals_outside_shared() -> None:
    offenders = []
    for path in (ROOT / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if SUBJECT_LIKE.match(node.value):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert offenders == [], "use shared.subjects instead of spelling subjects"


def python_files(*, outside: set[str]) -> Iterator[Path]:
    """Every Python file of the project, except under the top-level directories `outside`."""
    for top in sorted(ROOT.iterdir()):
        if top.name in outside or top.name in NOT_CODE or top.name.startswith("."):
            continue
        if top.is_dir() and not top.name.endswith(".egg-info"):
            yield from sorted(top.rglob("*.py"))
        elif top.suffix == ".py":
            yield top


def imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, module, names) for each absolute import: names are what `from module import`
    takes, empty for `import module`."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]


def public_entry_points(service: str) -> list[str] | None:
    """`__all__` of services/<service>/__init__.py, read without importing it (None: none)."""
    tree = ast.parse((ROOT / "services" / service / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign):
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "__all__":
            return list(ast.literal_eval(value))
    return None


def test_nothing_outside_tests_imports_tests() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in python_files(outside={"tests"})
        for line, module, _ in imports(path)
        if module.split(".")[0] == "tests"
    ]
    assert offenders == [], "put what both need in a package of its own (standins/)"


def test_the_product_never_imports_the_suites_the_benchmarks_or_the_stand_ins() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for top in PRODUCT
        for path in sorted((ROOT / top).rglob("*.py"))
        for line, module, _ in imports(path)
        if module.split(".")[0] in {"tests", "chaos", "benchmarks", "standins", "scripts"}
    ]
    assert offenders == []


def test_every_service_declares_its_public_entry_points() -> None:
    for path in sorted((ROOT / "services").glob("*/main.py")):
        name = path.parent.name
        package = importlib.import_module(f"services.{name}")
        declared = public_entry_points(name)
        assert declared is not None, f"services/{name}/__init__.py declares no __all__"
        assert declared == sorted(set(declared)), f"services.{name}.__all__: sorted, once each"
        for entry in declared:
            assert hasattr(package, entry), f"services.{name} does not define {entry}"
            assert f"`{entry}" in (package.__doc__ or ""), f"services.{name}: document {entry}"


def test_code_outside_services_uses_only_a_services_public_entry_points() -> None:
    """desk/, chaos/, benchmarks/ (and anything else outside services/ and tests/) import from a
    service only what its `__all__` names: `from services.<name> import <entry point>`."""
    services = {p.parent.name for p in (ROOT / "services").glob("*/__init__.py")}
    offenders = []
    for path in python_files(outside={"services", "tests"}):
        for line, module, names in imports(path):
            parts = module.split(".")
            if parts[0] != "services":
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            if len(parts) != 2 or parts[1] not in services or not names:
                offenders.append(
                    f"{where} imports {module}{': ' + ', '.join(names) if names else ''}"
                )
                continue
            public = public_entry_points(parts[1]) or []
            offenders += [f"{where} imports {n} from {module}" for n in names if n not in public]
    assert offenders == [], "add the name to the service's __all__, or move it out of services/"


NATS_INTERNALS = ("nats.aio.client", "nats.aio.subscription", "nats.protocol")


def test_only_the_bus_knows_the_nats_clients_internals() -> None:
    """The connection, the raw publish pipeline and their workarounds live in shared/bus/,
    against one pinned major version of nats-py; the product elsewhere uses its public API."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for top in PRODUCT
        for path in sorted((ROOT / top).rglob("*.py"))
        if (ROOT / "shared" / "bus") not in path.parents
        for line, module, _ in imports(path)
        if module.startswith(NATS_INTERNALS)
    ]
    assert offenders == []
