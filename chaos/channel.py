"""A threaded fake delivery channel (the helpdesk's reply endpoint) for the chaos harness.

Answers `POST /replies` with 200 and records each call's Idempotency-Key; while `down` it
answers 503 instead (and still records the call as refused).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ThreadedChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delivered: list[str] = []  # Idempotency-Key of every call answered 200
        self.refused = 0
        self._down_until = 0.0
        channel = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                key = self.headers.get("Idempotency-Key", "")
                with channel._lock:
                    down = time.monotonic() < channel._down_until
                    if down:
                        channel.refused += 1
                    else:
                        channel.delivered.append(key)
                status, body = (503, b'{"error":"down"}') if down else (200, b'{"received":true}')
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/replies"

    def start(self) -> ThreadedChannel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_for(self, seconds: float) -> None:
        with self._lock:
            self._down_until = time.monotonic() + seconds

    def keys(self) -> list[str]:
        with self._lock:
            return list(self.delivered)
