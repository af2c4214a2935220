"""flask-limiter and slowapi switched to this package by their storage URI alone, tested over real
HTTP: a Flask app on werkzeug, a FastAPI app on uvicorn; the fixed window and the sliding-window
counter, with the module and with the library."""

from __future__ import annotations

import limits.strategies
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from flask import Flask
from flask_limiter import Limiter as FlaskLimiter
from flask_limiter.util import get_remote_address as flask_address
from http_servers import get, serve_asgi, serve_wsgi
from servers import Server
from slowapi import Limiter as SlowLimiter
from slowapi import _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address as slow_address

import redis_ratelimit_client  # noqa: F401  (registers the ratelimit+ schemes)

STRATEGIES = [
    "fixed-window",
    pytest.param(
        "sliding-window-counter",
        marks=pytest.mark.skipif(
            not hasattr(limits.strategies, "SlidingWindowCounterRateLimiter"),
            reason="limits < 4.1 has no sliding-window counter",
        ),
    ),
]


def every_key_expires(server: Server) -> list[bytes]:
    client = server.client()
    keys = list(client.scan_iter("LIMITS:*"))
    assert keys and all(client.pttl(k) > 0 for k in keys)
    return keys


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_flask_limiter(server: Server, backend: str, strategy: str) -> None:
    app = Flask(__name__)
    app.config["RATELIMIT_STORAGE_URI"] = server.url("ratelimit+redis")
    app.config["RATELIMIT_STRATEGY"] = strategy
    app.config["RATELIMIT_HEADERS_ENABLED"] = True
    limiter = FlaskLimiter(flask_address, app=app, default_limits=["3 per minute"])

    @app.route("/")
    def index() -> str:
        return "hello"

    with serve_wsgi(app) as url:
        answers = [get(url + "/") for _ in range(4)]
    assert [a.status for a in answers] == [200, 200, 200, 429]
    assert answers[0].body == b"hello" and answers[2].headers["X-RateLimit-Remaining"] == "0"
    assert 0 < int(answers[3].headers["Retry-After"]) <= 120
    keys = every_key_expires(server)
    command = "RATELIMIT.HIT" if strategy == "fixed-window" else "RATELIMIT.SLIDE"
    assert limiter.storage.limiter.backend == backend
    value = server.client().get(keys[0])
    assert value is not None and (value.startswith(b"slide:") == (command == "RATELIMIT.SLIDE"))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_slowapi(server: Server, strategy: str) -> None:
    limiter = SlowLimiter(key_func=slow_address, storage_uri=server.url("ratelimit+redis"), strategy=strategy)
    app = FastAPI()
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @app.get("/")
    @limiter.limit("2/minute")
    async def index(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    with serve_asgi(app) as url:
        answers = [get(url + "/") for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 429]
    every_key_expires(server)
