"""`python -m desk …` for the tests, forked from a process that has the code loaded.

The suite starts some three hundred service and command processes; loading the code was half
of the suite's CPU (the drafter's start-up alone 1.5 s of a 2-core machine). Each test worker
starts one server, which imports the CLI and every service's module once; each `spawn` then
forks it, and the child does what `python -m desk <args>` does from there: its own environment,
working directory, standard streams and signals, `desk.cli.main`, its exit status. The services
run as they do in production from that point on; only the loading of the code is shared. The
stack's supervisor (`desk up`) still starts its services the ordinary way, and DESK_TEST_FORK=0
starts everything the ordinary way.

    process = spawn(["inbox", "list"], env=env, cwd=ROOT, stdout=PIPE, stderr=PIPE)
    out, err = process.communicate(timeout=30)     # as subprocess.Popen
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
ENABLED = os.environ.get("DESK_TEST_FORK", "1") != "0"


class Forked:
    """A forked `python -m desk` process, with the part of `subprocess.Popen` tests use."""

    def __init__(
        self,
        args: list[str],
        pid: int,
        status: Path,
        out: Path | None,
        err: Path | None,
        text: bool,
    ) -> None:
        self.args = args
        self.pid = pid
        self.returncode: int | None = None
        self._status = status
        self._out, self._err, self._text = out, err, text

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        self.wait(timeout)
        return self._read(self._out), self._read(self._err)

    def _read(self, path: Path | None) -> Any:
        if path is None:
            return None
        data = path.read_bytes()
        return data.decode() if self._text else data


class _Server:
    """This worker's fork server: a child process, spoken to in JSON lines."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="desk-fork-"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from tests.forkserver import serve; serve()"],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("DESK_")},
            stdin=PIPE,
            stdout=PIPE,
        )
        self.lock = threading.Lock()
        self.count = 0
        ready = self.proc.stdout.readline()  # type: ignore[union-attr]
        if json.loads(ready or b"{}").get("ready") is not True:
            raise RuntimeError(f"the fork server did not start (exit {self.proc.wait()})")

    def fork(self, request: dict[str, Any]) -> int:
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            answer = json.loads(self.proc.stdout.readline() or b"{}")
        if "pid" not in answer:
            raise RuntimeError(f"the fork server failed: {answer}")
        return int(answer["pid"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # the server kills what it forked that still runs, and ends
        self.proc.wait(10)


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or _server.proc.poll() is not None:
            _server = _Server()
            atexit.register(_server.close)
        return _server


def spawn(
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path | str = ROOT,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    stdin: bytes | None = None,
    text: bool = False,
) -> Forked | subprocess.Popen[Any]:
    """`python -m desk <args>` with exactly `env`: forked, or (DESK_TEST_FORK=0) executed.
    `stdout`/`stderr`: PIPE (read by `communicate`), STDOUT (stderr only), an open file (its
    path is appended to), or None (this process's own)."""
    if not ENABLED:
        process = subprocess.Popen(
            [sys.executable, "-m", "desk", *args],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL if stdin is None else PIPE,
            text=text,
        )
        if stdin is not None and process.stdin is not None:
            process.stdin.write(stdin.decode() if text else stdin)  # type: ignore[arg-type]
            process.stdin.close()
        return process
    server = _the_server()
    with server.lock:
        server.count += 1
        base = server.dir / str(server.count)
    out = base.with_suffix(".out") if stdout == PIPE else None
    err = base.with_suffix(".err") if stderr == PIPE else None
    request: dict[str, Any] = {
        "args": args,
        "env": env,
        "cwd": str(cwd),
        "status": str(base.with_suffix(".status")),
        "stdout": _target(stdout, out),
        "stderr": "stdout" if stderr == STDOUT else _target(stderr, err),
        "stdin": None,
    }
    if stdin is not None:
        given = base.with_suffix(".in")
        given.write_bytes(stdin)
        request["stdin"] = str(given)
    pid = server.fork(request)
    return Forked(
        [sys.executable, "-m", "desk", *args], pid, Path(request["status"]), out, err, text
    )


def _target(stream: int | IO[Any] | None, captured: Path | None) -> str | None:
    if captured is not None:
        return str(captured)
    if stream is None:
        return None
    if isinstance(stream, int):
        raise ValueError(f"unsupported stream {stream}")
    return str(Path(stream.name).resolve())


def run(
    args: list[str],
    *,
    env: dict[str, str],
    cwd: Path | str = ROOT,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run([python, -m, desk, *args], capture_output=True, text=True, …)`."""
    process = spawn(
        args,
        env=env,
        cwd=cwd,
        stdout=PIPE,
        stderr=PIPE,
        stdin=input.encode() if input is not None else None,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
        raise
    assert process.returncode is not None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


# ---- the server's side ------------------------------------------------------------------


def serve() -> None:
    """Load the code, then fork a `python -m desk` child for each request on stdin."""
    requests, answers = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # a stray print goes where stderr goes, not into the answers
    gc.disable()
    import desk.cli
    import desk.stack
    from shared import catalog

    for spec in (
        *catalog.SERVICES,
        *(p for parts in catalog.PARTS.values() for p in parts.values()),
    ):
        importlib.import_module(spec.module)
    del desk
    gc.collect()
    gc.freeze()
    gc.enable()
    if threading.active_count() != 1:  # a thread does not survive a fork: none may run yet
        raise RuntimeError(f"threads after loading: {threading.enumerate()}")
    children: dict[int, str] = {}
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ)
    os.write(answers, b'{"ready": true}\n')
    pending = b""
    while True:
        ready = selector.select(timeout=0.02)
        _reap(children)
        if not ready:
            continue
        chunk = os.read(requests, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            try:
                pid = os.fork()
            except OSError as exc:
                os.write(answers, json.dumps({"error": str(exc)}).encode() + b"\n")
                continue
            if pid == 0:
                selector.close()
                os.close(requests)
                os.close(answers)
                _child(request)  # never returns
            children[pid] = request["status"]
            os.write(answers, json.dumps({"pid": pid}).encode() + b"\n")
    for pid in children:  # the test worker has gone: nothing it started outlives it
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while children and time.monotonic() < deadline:
        _reap(children)
        time.sleep(0.01)


def _reap(children: dict[int, str]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = children.pop(pid, None)
        if path is not None:
            partial = path + ".part"
            Path(partial).write_text(str(os.waitstatus_to_exitcode(status)))
            os.replace(partial, path)  # whole, or not there


def _child(request: dict[str, Any]) -> None:
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        stdin = os.open(request["stdin"] or os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, target in ((1, request["stdout"]), (2, request["stderr"])):
            if target == "stdout":
                os.dup2(1, 2)
            elif target is not None:
                os.dup2(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), fd)
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
        sys.argv = [str(ROOT / "desk" / "__main__.py"), *request["args"]]
        from desk.__main__ import run as desk

        try:
            code = desk()
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter does at exit
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
