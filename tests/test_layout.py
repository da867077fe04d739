"""Boundaries the codebase keeps: services never import each other, shared never imports
services, and subject names are spelled only in shared/."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBJECT_LIKE = re.compile(r"^(events|work|inbox|results|dlq)\.[A-Za-z0-9_*>.-]*$")


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
