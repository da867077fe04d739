"""The HTTP ceiling: a bare Starlette endpoint served exactly the way ingress is served.

`POST /webhooks/{source}` reads the body and answers 202, nothing else. It runs on the same
`shared.http` server (uvicorn inside `asyncio.run`, the same app factory and middleware) in its
own process, beside an ops server on a second port as every service has, so ingress/bare
isolates what ingress itself costs per request.

    python -m benchmarks.bare --port 8100 --ops-port 8101
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.ingress import settle_gc
from shared.http import HttpServer, make_app, make_ops_app


async def receive(request: Request) -> Response:
    await request.body()
    return JSONResponse({"accepted": True}, status_code=202)


async def _ready() -> dict[str, bool]:
    return {"ok": True}


async def serve(host: str, port: int, ops_port: int) -> None:
    server = HttpServer(
        make_app([Route("/webhooks/{source}", receive, methods=["POST"])]), host, port
    )
    ops = HttpServer(make_ops_app(_ready), host, ops_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await ops.start()
    await server.start()
    settle_gc()  # the same process tuning as ingress
    await stop.wait()
    await server.stop()
    await ops.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ops-port", type=int, required=True, help="/healthz, /readyz, /metrics")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.ops_port))


if __name__ == "__main__":
    main()
