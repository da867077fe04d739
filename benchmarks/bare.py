"""The ceilings of ingress: a bare Starlette endpoint served exactly the way ingress is served.

`POST /webhooks/{source}` reads the body and answers 202, nothing else. It runs on the same
`shared.http` server (uvicorn inside `asyncio.run`, the same app factory and middleware) in its
own process, beside an ops server on a second port as every service has, so ingress/bare
isolates what ingress itself costs per request.

With `--nats-url`, the endpoint also does the work ingress cannot avoid: it publishes each body
with nats-py (under the request's `webhook-id` as `Nats-Msg-Id`, to `benchpub.<source>`) and
answers only once the broker's PubAck is back. ingress/publish is then what ingress's own
work (verifying, the envelope, metrics, tracing) costs beyond the unavoidable.

    python -m benchmarks.bare --port 8100 --ops-port 8101 [--nats-url nats://127.0.0.1:4333]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable

import nats
from nats.js import JetStreamContext
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from services.ingress import settle_gc
from shared.http import HttpServer, make_app, make_ops_app

PUBLISH_PREFIX = "benchpub"  # the subjects the publishing endpoint stores to


async def receive(request: Request) -> Response:
    await request.body()
    return JSONResponse({"accepted": True}, status_code=202)


def publishing(js: JetStreamContext) -> Callable[[Request], Awaitable[Response]]:
    async def receive_and_publish(request: Request) -> Response:
        body = await request.body()
        msg_id = request.headers.get("webhook-id", "")
        subject = f"{PUBLISH_PREFIX}.{request.path_params['source']}"
        await js.publish(subject, body, headers={"Nats-Msg-Id": msg_id})
        return JSONResponse({"accepted": True}, status_code=202)

    return receive_and_publish


async def _ready() -> dict[str, bool]:
    return {"ok": True}


async def serve(host: str, port: int, ops_port: int, nats_url: str | None = None) -> None:
    nc = await nats.connect(nats_url) if nats_url else None
    endpoint = publishing(nc.jetstream(timeout=30)) if nc is not None else receive
    server = HttpServer(
        make_app([Route("/webhooks/{source}", endpoint, methods=["POST"])]),
        host,
        port,
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
    if nc is not None:
        await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ops-port", type=int, required=True, help="/healthz, /readyz, /metrics")
    parser.add_argument("--nats-url", help="also publish each body and wait for the PubAck")
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.ops_port, args.nats_url))


if __name__ == "__main__":
    main()
