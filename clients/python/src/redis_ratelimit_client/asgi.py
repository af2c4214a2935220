"""ASGI middleware (Starlette, FastAPI, any ASGI app):

    app.add_middleware(RateLimitMiddleware, client=redis.asyncio.Redis(), rules=[Rule(FixedWindow(100, 60))])

Each request goes through the rules that match it (see redis_ratelimit_client.rules); a denied one gets
429 with ``Retry-After``, and every limited response carries the ``RateLimit-Policy`` and
``RateLimit`` fields. An InFlight rule holds its permit until the response has been sent, streamed
responses included, renewing it meanwhile. When the server cannot be reached, requests are
admitted (``fail_open=True``, the default) or refused with 503, and the outage is logged."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .aio import AsyncRateLimiter
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

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def request_of(scope: Scope) -> Request:
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
    client = scope.get("client")
    user = scope.get("user")
    name = None
    if user is not None and getattr(user, "is_authenticated", False):
        name = str(getattr(user, "identity", None) or getattr(user, "display_name", None) or user)
    return Request(scope.get("method", "GET"), scope.get("path", "/"), headers, client[0] if client else None, name)


class RateLimitMiddleware(Middleware[ASGIApp, AsyncRateLimiter]):
    def limiter_for(self, client: Any, load_library: bool) -> AsyncRateLimiter:
        return AsyncRateLimiter(client, load_library=load_library)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.outage.skipping():
            await self._unlimited(scope, receive, send)
            return
        async with contextlib.AsyncExitStack() as permits:
            try:
                verdict = await self._decide(request_of(scope), permits)
                self.outage.answered()
            except self.unreachable as error:
                self.outage.failed(error)
                await permits.aclose()
                await self._unlimited(scope, receive, send)
                return
            headers = verdict.headers()
            if verdict.denied:
                await permits.aclose()
                await _respond(send, 429, TOO_MANY, headers)
                return
            await self.app(scope, receive, _with_headers(send, headers))

    async def _unlimited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The server is out of reach: the request goes through, or gets 503."""
        if self.outage.fail_open:
            await self.app(scope, receive, send)
        else:
            await _respond(send, 503, UNAVAILABLE, self.outage.retry_headers())

    async def _decide(self, request: Request, permits: contextlib.AsyncExitStack) -> Verdict:
        steps = self.steps(request)
        answer: Any = None
        try:
            while True:
                step = steps.send(answer)
                if isinstance(step, PermitRequest):
                    answer = await self._hold(step, permits)
                else:
                    answer = await self.limiter.run(step)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _hold(self, step: PermitRequest, permits: contextlib.AsyncExitStack) -> Acquisition:
        try:
            permit = await permits.enter_async_context(self.limiter.permit(step.key, step.limit, step.lease))
        except PermitUnavailable as e:
            return Acquisition(False, step.limit, 0, e.retry_after, None)
        assert permit.acquisition is not None
        return permit.acquisition


def _with_headers(send: Send, headers: list[tuple[str, str]]) -> Send:
    extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = [*message.get("headers", ()), *extra]
        await send(message)

    return sending


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
    fields = [
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers),
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": fields})
    await send({"type": "http.response.body", "body": body})
