"""Audit a hashed lock file for releases with known vulnerabilities (`make check` runs it).

    python scripts/audit.py requirements-test.lock [extra pip-audit arguments]

pip-audit reads the exact pins and hashes in the lock (no resolution, nothing installed) and
asks PyPI's advisory data, then OSV if PyPI cannot answer. The exit code is 0 when no pinned
release has a known advisory, 1 when one has (or when some packages could not be checked), and
0 with a loud "AUDIT SKIPPED" banner when neither database can be reached: an index mirror
without PyPI's JSON API answers 404 for every package, and pip-audit alone would then report
"No known vulnerabilities found". Set DESK_AUDIT_REQUIRED=1 to make that case fail (exit 2).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Report = dict[str, Any]

SERVICES = ("pypi", "osv")

# What pip-audit prints (a traceback) when it cannot reach a vulnerability service.
_UNREACHABLE = re.compile(
    r"ConnectionError|ConnectTimeout|ReadTimeout|Max retries exceeded|NameResolutionError"
    r"|Name or service not known|Temporary failure in name resolution|Network is unreachable"
    r"|Connection refused|SSLError|ProxyError|ServiceError|timed out",
)


@dataclass
class Result:
    service: str
    unreachable: str = ""  # why the service could not be asked; empty when it answered
    vulnerable: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    audited: int = 0
    error: str = ""  # pip-audit failed for a reason other than the network


def run_pip_audit(lock: Path, service: str, extra: list[str]) -> tuple[int, Report | None, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "audit.json"
        cmd = [
            sys.executable,
            "-m",
            "pip_audit",
            "--requirement",
            str(lock),
            "--require-hashes",
            "--disable-pip",
            "--vulnerability-service",
            service,
            "--format",
            "json",
            "--output",
            str(out),
            "--progress-spinner",
            "off",
            "--desc",
            "on",
            *extra,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        report = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
        return proc.returncode, report, proc.stderr


def judge(service: str, rc: int, report: Report | None, stderr: str) -> Result:
    result = Result(service)
    if report is None:
        tail = stderr.strip().splitlines()[-1:] or [f"pip-audit exited {rc} with no report"]
        if _UNREACHABLE.search(stderr):
            result.unreachable = tail[0][:300]
        else:
            result.error = stderr.strip() or tail[0]
        return result
    deps = report.get("dependencies", [])
    for dep in deps:
        if "skip_reason" in dep:
            result.skipped.append((dep["name"], dep["skip_reason"]))
            continue
        result.audited += 1
        for vuln in dep.get("vulns", []):
            result.vulnerable.append((dep["name"], dep.get("version", "?"), vuln))
    # PyPI knows every package in a lock made from PyPI: "not found" for all of them means the
    # JSON API is not there (a mirror, a proxy that serves only /simple), not a clean bill.
    if deps and not result.audited and not result.vulnerable:
        result.unreachable = (
            f"all {len(deps)} packages were skipped, e.g. {result.skipped[0][1]!r}"
            if result.skipped
            else "no package was audited"
        )
    return result


def describe(vuln: dict[str, Any]) -> str:
    ids = ", ".join([vuln.get("id", "?"), *vuln.get("aliases", [])])
    fixed = ", ".join(vuln.get("fix_versions", [])) or "no fixed release"
    desc = " ".join((vuln.get("description") or "").split())
    if len(desc) > 160:
        desc = desc[:157] + "..."
    return f"{ids} (fixed in: {fixed}) {desc}".rstrip()


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    lock, extra = Path(argv[0]), argv[1:]
    if not lock.is_file():
        print(f"audit: {lock}: no such lock file (run `make lock`)", file=sys.stderr)
        return 2
    reasons = []
    for service in SERVICES:
        result = judge(service, *run_pip_audit(lock, service, extra))
        if result.error:
            print(f"audit: pip-audit failed ({service}):\n{result.error}", file=sys.stderr)
            return 1
        if result.unreachable:
            reasons.append(f"{service}: {result.unreachable}")
            continue
        if result.vulnerable:
            print(f"audit: {lock}: {len(result.vulnerable)} known vulnerabilities ({service}):")
            for name, version, vuln in result.vulnerable:
                print(f"  {name}=={version}: {describe(vuln)}")
            print("Raise the floor in pyproject.toml above the fixed release, then `make lock`.")
            return 1
        if result.skipped:
            print(f"audit: {lock}: {len(result.skipped)} packages not audited ({service}):")
            for name, why in result.skipped:
                print(f"  {name}: {why}")
            return 1
        print(f"audit: {lock}: {result.audited} packages, no known vulnerabilities ({service})")
        return 0
    banner = "=" * 78
    print(
        f"{banner}\nAUDIT SKIPPED: vulnerability database unreachable; {lock} was NOT checked.\n"
        + "".join(f"  {reason}\n" for reason in reasons)
        + "Run `make check` where PyPI's JSON API or the OSV API can be reached.\n"
        + banner,
        file=sys.stderr,
    )
    return 2 if os.environ.get("DESK_AUDIT_REQUIRED") == "1" else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
