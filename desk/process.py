"""Child-process helpers shared by the stack supervisor and the embedded broker."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """`preexec_fn`: on Linux, the child gets SIGTERM if the process that started it dies."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_GIVEN: set[int] = set()  # ports free_port handed out in this process


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, and none this process handed out before: the kernel may offer a port
    it just gave (and that was closed again) a second time, and two services, or one service's
    public and ops listeners, would then be given the same one."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise OSError("no free port left that was not handed out already")


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
