"""WSGI middleware (Flask, Django, Falcon, any WSGI app):

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, client=redis.Redis(), rules=[Rule(FixedWindow(100, 60))])

The same rules, headers and failure modes as redis_ratelimit_client.asgi. An InFlight rule holds its
permit until the server closes the response (WSGI servers close it once it is sent, or when the
client went away), renewing it meanwhile from a background thread."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .client import RateLimiter
from .errors import PermitUnavailable
from .results import Acquisition
from .rules import (
    TOO_MANY,
    UNAVAILABLE,
    Middleware,
    PermitRequest,
    Request,
    Verdict,
)

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def request_of(environ: dict[str, Any]) -> Request:
    headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
    for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(name):
            headers[name.replace("_", "-").lower()] = environ[name]
    return Request(
        environ.get("REQUEST_METHOD", "GET"),
        environ.get("PATH_INFO", "/") or "/",
        headers,
        environ.get("REMOTE_ADDR"),
        environ.get("REMOTE_USER") or None,
    )


class RateLimitMiddleware(Middleware[WSGIApp, RateLimiter]):
    def limiter_for(self, client: Any, load_library: bool) -> RateLimiter:
        return RateLimiter(client, load_library=load_library)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if self.outage.skipping():
            return self._unlimited(environ, start_response)
        permits = contextlib.ExitStack()
        try:
            verdict = self._decide(request_of(environ), permits)
            self.outage.answered()
        except self.unreachable as error:
            self.outage.failed(error)
            permits.close()
            return self._unlimited(environ, start_response)
        headers = verdict.headers()
        if verdict.denied:
            permits.close()
            return _respond(start_response, "429 Too Many Requests", TOO_MANY, headers)

        def starting(status: str, response_headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, [*response_headers, *headers], exc_info)

        try:
            body = self.app(environ, starting)
        except BaseException:
            permits.close()
            raise
        return Held(body, permits)

    def _unlimited(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """The server is out of reach: the request goes through, or gets 503."""
        if self.outage.fail_open:
            return self.app(environ, start_response)
        return _respond(start_response, "503 Service Unavailable", UNAVAILABLE, self.outage.retry_headers())

    def _decide(self, request: Request, permits: contextlib.ExitStack) -> Verdict:
        steps = self.steps(request)
        answer: Any = None
        try:
            while True:
                step = steps.send(answer)
                answer = self._hold(step, permits) if isinstance(step, PermitRequest) else self.limiter.run(step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _hold(self, step: PermitRequest, permits: contextlib.ExitStack) -> Acquisition:
        try:
            permit = permits.enter_context(self.limiter.permit(step.key, step.limit, step.lease))
        except PermitUnavailable as e:
            return Acquisition(False, step.limit, 0, e.retry_after, None)
        assert permit.acquisition is not None
        return permit.acquisition


class Held:
    """A response body that holds its request's permits until the server closes it."""

    def __init__(self, body: Iterable[bytes], permits: contextlib.ExitStack) -> None:
        self.body = body
        self.permits = permits

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.permits.close()


def _respond(start_response: StartResponse, status: str, body: bytes, headers: list[tuple[str, str]]) -> list[bytes]:
    start_response(
        status, [*headers, ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]
