"""A throwaway CA and a server certificate it signs, made with the `openssl` command line tool
(the tests that need one skip without it): what cert-manager issues in the prod overlay, on
loopback."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA's certificate: what a client trusts (DESK_NATS_TLS_CA)
    cert: Path  # the server's certificate, signed by the CA, for server and client auth
    key: Path


def make_pki(directory: Path, *, names: tuple[str, ...] = ("localhost",)) -> Pki:
    """A CA and a server certificate for 127.0.0.1 and `names` (ECDSA P-256, one day)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command line tool is not installed (it makes test certificates)")
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca, key, csr, cert = (
        directory / name for name in ("ca.key", "ca.crt", "tls.key", "tls.csr", "tls.crt")
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "1",
        "-subj",
        "/CN=test CA",
    )
    run("req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=nats")
    extensions = directory / "server.ext"
    extensions.write_text(
        "subjectAltName=" + ",".join(["IP:127.0.0.1", *(f"DNS:{n}" for n in names)]) + "\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
        "keyUsage=digitalSignature,keyEncipherment\n"
    )
    run(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-out", str(cert), "-days", "1", "-extfile", str(extensions),
    )  # fmt: skip
    return Pki(ca=ca, cert=cert, key=key)


def tls_block(pki: Pki, *, name: str = "tls", extra: str = "") -> str:
    """A nats-server `tls { }` block (or `name`, e.g. inside `cluster { }`) serving `pki`."""
    return f'{name} {{\n  cert_file: "{pki.cert}"\n  key_file: "{pki.key}"\n{extra}}}\n'
