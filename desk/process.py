"""Child-process helpers shared by the stack supervisor and the embedded broker."""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn`: on Linux, the child gets SIGTERM if the process that started it dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_GIVEN: set[int] = set()  # ports free_port handed out in this process
_LOWEST = 10000  # free_port's ports: from here up to where the kernel's own range begins


def kernel_port_range() -> tuple[int, int]:
    """The ports the kernel gives out by itself (to `connect` and to `bind` on port 0)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, and none this process handed out before, taken from below the kernel's
    own range. A service restarted on its port (the supervisor, a test that kills one) must
    find it still free: a port from the kernel's range can be taken in between by any outgoing
    connection on the machine, which gets a port from that range. And the kernel may offer a
    port it just gave (and that was closed again) a second time, so that two services, or one
    service's public and ops listeners, would be given the same one."""
    low, _ = kernel_port_range()
    if low - _LOWEST >= 1000:
        for _ in range(1000):
            port = random.randrange(_LOWEST, low)
            if port not in _GIVEN and _bindable(host, port):
                _GIVEN.add(port)
                return port
    for _ in range(1000):  # a kernel range starting low: what the kernel offers, not given yet
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise OSError("no free port left that was not handed out already")


def reserve(port: int) -> None:
    """`port` is spoken for (an operator chose it for a service): `free_port` never gives it."""
    _GIVEN.add(port)


def _bindable(host: str, port: int) -> bool:
    """No listener and no connection holds `port` (not even one lingering in TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def port_free(port: int, host: str = "127.0.0.1", *, as_services_bind: bool = False) -> bool:
    """Whether `port` can be bound. `as_services_bind`: the way the services bind it
    (SO_REUSEADDR), so that connections of a dead server lingering in TIME_WAIT don't count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if as_services_bind:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def terminate(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds; reaps it."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
