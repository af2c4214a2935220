"""The ASGI middleware (on a Starlette app, served by uvicorn) and the WSGI one (on a plain WSGI
app, served by werkzeug), over real HTTP, with the module and with the library: each limiter as a
rule, key functions, the headers, permits held while a response streams, and the server stopped
under traffic (fail open, fail closed)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
import redis
import redis.asyncio
from http_servers import get, serve_asgi, serve_wsgi
from servers import Server, wait_until
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route

from redis_ratelimit_client import asgi, wsgi
from redis_ratelimit_client.rules import AllOf, FixedWindow, Gcra, InFlight, Rule, SlidingWindow, header, user

STREAM_CHUNKS, STREAM_PAUSE = 5, 0.2  # a response that streams for a second


def wsgi_app(environ: dict[str, Any], start_response: Any) -> Any:
    start_response("200 OK", [("Content-Type", "text/plain")])
    if environ["PATH_INFO"] == "/stream":

        def chunks() -> Iterator[bytes]:
            for i in range(STREAM_CHUNKS):
                time.sleep(STREAM_PAUSE)
                yield f"{i}\n".encode()

        return chunks()
    return [b"hello\n"]


async def hello(request: StarletteRequest) -> PlainTextResponse:
    return PlainTextResponse("hello\n")


async def stream(request: StarletteRequest) -> StreamingResponse:
    async def chunks() -> Any:
        for i in range(STREAM_CHUNKS):
            await asyncio.sleep(STREAM_PAUSE)
            yield f"{i}\n"

    return StreamingResponse(chunks(), media_type="text/plain")


def asgi_app() -> Starlette:
    return Starlette(routes=[Route("/", hello), Route("/api/{rest:path}", hello), Route("/stream", stream)])


Serve = Callable[..., AbstractContextManager[str]]


@pytest.fixture(params=["asgi", "wsgi"])
def serve(request: pytest.FixtureRequest) -> Serve:
    """Serves the kind's app under its RateLimitMiddleware(client, rules, **options)."""

    # As docs/clients/python.md advises for a middleware: one try, no backoff, so that an outage
    # costs a request a connection attempt, not the client's retries.
    fail_fast = {"socket_timeout": 2, "socket_connect_timeout": 1, "retry": None}

    def serving(server: Server, rules: list[Rule], **options: Any) -> AbstractContextManager[str]:
        if request.param == "asgi":
            client = redis.asyncio.Redis(port=server.port, **fail_fast)
            return serve_asgi(asgi.RateLimitMiddleware(asgi_app(), client, rules, **options))
        client = redis.Redis(port=server.port, **fail_fast)
        return serve_wsgi(wsgi.RateLimitMiddleware(wsgi_app, client, rules, **options))

    return serving


def test_fixed_window_and_headers(server: Server, serve: Serve) -> None:
    with serve(server, [Rule(FixedWindow(2, 60))]) as url:
        answers = [get(url + "/") for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 429]
    assert answers[0].body == b"hello\n"
    assert answers[0].headers["RateLimit-Policy"] == '"default";q=2;w=60'
    assert answers[0].headers["RateLimit"] == '"default";r=1;t=60'
    assert "Retry-After" not in answers[0].headers
    # The window's end, in whole seconds rounded up: 60 unless a second went by since the first request.
    assert answers[2].headers["RateLimit"] in ('"default";r=0;t=60', '"default";r=0;t=59')
    assert answers[2].headers["Retry-After"] == answers[2].headers["RateLimit"][-2:]
    assert answers[2].body == b"Too Many Requests\n"
    key = "rl:{default:127.0.0.1}"
    assert server.client().get(key) == b"2" and server.client().pttl(key) > 0


def test_rules_per_route_and_method(server: Server, serve: Serve) -> None:
    rules = [Rule(SlidingWindow(1, 60), path="/api/*", name="api"), Rule(Gcra(0, 1, 60), methods={"POST"})]
    with serve(server, rules) as url:
        assert [get(url + "/api/a").status for _ in range(2)] == [200, 429]
        free = [get(url + "/") for _ in range(3)]
    assert [a.status for a in free] == [200] * 3 and all("RateLimit" not in a.headers for a in free)
    assert server.client().get("rl:{api:127.0.0.1}").startswith(b"slide:")


def test_gcra_rule(server: Server, serve: Serve) -> None:
    with serve(server, [Rule(Gcra(1, 1, 60), name="smooth")]) as url:
        answers = [get(url + "/") for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 429]
    assert answers[2].headers["RateLimit-Policy"] == '"smooth";q=2;w=60'
    assert 59 <= int(answers[2].headers["Retry-After"]) <= 60


def test_several_limits_all_or_nothing(server: Server, serve: Serve) -> None:
    rules = [Rule(AllOf(FixedWindow(2, 60), FixedWindow(3, 3600)), name="both")]
    with serve(server, rules) as url:
        answers = [get(url + "/") for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 429]
    assert answers[0].headers["RateLimit-Policy"] == '"both-0";q=2;w=60, "both-1";q=3;w=3600'
    client = server.client()
    assert client.get("rl:{both:127.0.0.1}:0") == b"2" and client.get("rl:{both:127.0.0.1}:1") == b"2"


def test_windows_laid_on_the_clock(server: Server, serve: Serve) -> None:
    rules = [
        Rule(FixedWindow(2, "month", tz="+05:30"), name="monthly"),
        Rule(AllOf(FixedWindow(5, 3600, align=True), FixedWindow(9, "day")), name="clock"),
    ]
    with serve(server, rules) as url:
        answers = [get(url + "/") for _ in range(3)]
    assert [a.status for a in answers] == [200, 200, 429]
    # A calendar window names no length: its policy has no w=.
    assert answers[0].headers["RateLimit-Policy"].startswith('"monthly";q=2, ')
    client = server.client()
    assert client.pexpiretime("rl:{monthly:127.0.0.1}") % 86_400_000 == 66_600_000  # midnight at +05:30
    assert client.pexpiretime("rl:{clock:127.0.0.1}:0") % 3_600_000 == 0
    assert client.pexpiretime("rl:{clock:127.0.0.1}:1") % 86_400_000 == 0


def test_key_function(server: Server, serve: Serve) -> None:
    with serve(server, [Rule(FixedWindow(1, 60))], key=header("X-Api-Key")) as url:
        assert get(url + "/", {"X-Api-Key": "a"}).status == 200
        assert get(url + "/", {"X-Api-Key": "b"}).status == 200
        assert get(url + "/", {"X-Api-Key": "a"}).status == 429
        assert get(url + "/").status == 200  # no header: the client's address
    assert server.client().exists("rl:{default:a}", "rl:{default:b}", "rl:{default:127.0.0.1}") == 3


def test_in_flight_permit_held_while_streaming(server: Server, serve: Serve, request: pytest.FixtureRequest) -> None:
    # A key of its own per variant: a permit the previous variant's server still held when it
    # stopped cannot deny this one's first request (seen once, asgi then wsgi).
    name = f"streams-{request.node.callspec.id}"
    key = f"rl:{{{name}:127.0.0.1}}"
    rules = [Rule(InFlight(1, lease=0.3), path="/stream", name=name)]
    with serve(server, rules) as url:
        first: list[Any] = []
        streaming = threading.Thread(target=lambda: first.append(get(url + "/stream")))
        streaming.start()
        client = server.client()
        wait_until(lambda: client.exists(key), "the stream's permit", timeout=5)
        time.sleep(0.6)  # two leases into the stream: it holds the permit only by renewing it
        second = get(url + "/stream")
        streaming.join()
        assert first[0].status == 200 and first[0].body == b"0\n1\n2\n3\n4\n"
        assert second.status == 429 and second.headers["Retry-After"] == "1"
        # Released once the server is done with the response (a moment after the client has it).
        wait_until(lambda: not client.exists(key), "the permit's release", timeout=5)
        assert get(url + "/stream").status == 200


def test_the_user_key_on_both_kinds() -> None:
    class Authenticated:
        is_authenticated = True
        identity = "alice"

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/",
        "headers": [],
        "client": ("10.0.0.1", 5),
        "user": Authenticated(),
    }
    assert user(asgi.request_of(scope)) == "alice"
    assert user(asgi.request_of({**scope, "user": None})) == "10.0.0.1"
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/", "REMOTE_ADDR": "10.0.0.2", "HTTP_X_API_KEY": "k"}
    assert user(wsgi.request_of({**environ, "REMOTE_USER": "bob"})) == "bob"
    assert user(wsgi.request_of(environ)) == "10.0.0.2"
    assert header("X-Api-Key")(wsgi.request_of(environ)) == "k"


@pytest.mark.parametrize("fail_open", [True, False])
def test_server_stopped_under_traffic(
    own_server: Server, serve: Serve, fail_open: bool, caplog: pytest.LogCaptureFixture
) -> None:
    rules = [Rule(FixedWindow(1000, 60))]
    with serve(own_server, rules, fail_open=fail_open) as url:
        statuses: list[int] = []
        stop = threading.Event()

        def traffic() -> None:
            while not stop.is_set():
                statuses.append(get(url + "/").status)

        load = threading.Thread(target=traffic)
        load.start()
        while len(statuses) < 20:
            time.sleep(0.01)
        own_server.stop()
        stopped_at = len(statuses)
        while len(statuses) < stopped_at + 20:
            time.sleep(0.01)
        stop.set()
        load.join()
        after = [get(url + "/") for _ in range(3)]
        own_server.start()  # it answers again: limited as before, once retry_interval (1 s) is over
        wait_until(lambda: "RateLimit" in get(url + "/").headers, "limiting again", timeout=10)
    assert set(statuses[:20]) == {200}
    outage = 200 if fail_open else 503
    assert set(statuses) <= {200, outage}, "an error escaped the middleware"
    assert [a.status for a in after] == [outage] * 3
    assert all("RateLimit" not in a.headers for a in after)
    action = "admitting" if fail_open else "refusing"
    assert f"{action} requests until it answers" in caplog.text
    assert "rate limiter answers again" in caplog.text
