"""HTTP/1.1 on the wire: a keep-alive POST encoded before timing, the one response header the
generator reads, and `LoadError`, what a run raises when it cannot measure."""

from __future__ import annotations


class LoadError(RuntimeError):
    pass


def encode_post(path: str, body: bytes, headers: dict[str, str], host: str = "127.0.0.1") -> bytes:
    """One HTTP/1.1 keep-alive POST, ready to write to a socket."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def content_length(head: bytes) -> int:
    lowered = head.lower()
    at = lowered.find(b"\r\ncontent-length:")
    if at < 0:
        if b"\r\ntransfer-encoding:" in lowered:
            raise LoadError("chunked responses are not supported by this generator")
        return 0
    start = at + len(b"\r\ncontent-length:")
    end = lowered.find(b"\r\n", start)
    return int(lowered[start : end if end >= 0 else len(lowered)])
