"""A keep-alive HTTP/1.1 load generator that costs little next to the server it measures.

Requests are encoded before timing; each of `connections` sockets sends one, waits for the
whole response (a minimal parser: status line, `Content-Length`, body) and sends the next, so
the offered load is closed-loop with at most `connections` requests in flight. With `rate` it
is open-loop instead: requests go out at that rate on whichever connection is free, and each
latency counts from when its request was due. Built on asyncio protocols (no stream or
coroutine per request) and uvloop when it is installed.

Run it in its own process so it does not share the GIL with the server, once:

    result = drive_in_subprocess("127.0.0.1", port, requests, connections=64)

or as a process kept for several runs (`LoadGenerator`), or in this process (`await drive(...)`).
"""

from .connection import drive
from .generator import LoadGenerator, drive_in_subprocess
from .result import LoadResult, percentile
from .wire import LoadError, encode_post

__all__ = [
    "LoadError",
    "LoadGenerator",
    "LoadResult",
    "drive",
    "drive_in_subprocess",
    "encode_post",
    "percentile",
]
