"""WSGI middlewares over redis-ratelimit. RateLimitMiddleware limits requests per window with
RATELIMIT.HIT (a fixed window), or RATELIMIT.SLIDE (a sliding window) with algorithm="sliding".
InFlightMiddleware limits the requests in flight with RATELIMIT.ACQUIRE / RENEW / RELEASE.

Copy it into any WSGI app (Flask, Django, Falcon...):

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis.Redis(), limit=100, window=60)
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis.Redis(), limit=100, window=60, algorithm="sliding")
    app.wsgi_app = InFlightMiddleware(app.wsgi_app, redis.Redis(), limit=3, lease=30)

Where the module is not loaded (managed Redis), the same hit goes through the Functions library
(functions/ratelimit.lua), loaded on first use if the server does not have it yet: same reply,
same counters.

Requests are counted per client (the X-Api-Key header, else the remote address). A denied
request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
RateLimit fields.
"""

import math
import os
import time
import uuid

import redis

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "functions", "ratelimit.lua")

# The module's command and the library's function of each algorithm.
ALGORITHMS = {
    "fixed": ("RATELIMIT.HIT", "ratelimit_hit"),
    "sliding": ("RATELIMIT.SLIDE", "ratelimit_slide"),
}


class Commands:
    """Calls a command of the module, or where it is not loaded (managed Redis) the library's
    function, loading the library on first use if the server does not have it yet."""

    def __init__(self, redis_client, library=LIBRARY):
        self.redis = redis_client
        self.library = library
        self.use_module = None  # decided by the first call

    def call(self, command, function, key, *args):
        if self.use_module is not False:
            try:
                reply = self.redis.execute_command(command, key, *args)
                self.use_module = True
                return reply
            except redis.ResponseError as error:
                if self.use_module or "unknown command" not in str(error).lower():
                    raise
                self.use_module = False
                if not self.redis.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit"):
                    with open(self.library, encoding="utf-8") as source:
                        self.redis.execute_command("FUNCTION", "LOAD", source.read())
        return self.redis.execute_command("FCALL", function, 1, key, *args)


def identity(environ):
    """Requests are counted per client: the X-Api-Key header, else the remote address."""
    return environ.get("HTTP_X_API_KEY") or environ.get("REMOTE_ADDR", "unknown")


def too_many(start_response, headers, retry_s):
    body = b"Too Many Requests\n"
    start_response(
        "429 Too Many Requests",
        headers
        + [("Retry-After", str(retry_s)), ("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
    )
    return [body]


class RateLimitMiddleware:
    def __init__(self, app, redis_client, limit, window, prefix="rl:", library=LIBRARY, algorithm="fixed"):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, not {algorithm!r}")
        self.command, self.function = ALGORITHMS[algorithm]
        self.app = app
        self.commands = Commands(redis_client, library)
        self.limit = limit
        self.window = window
        self.prefix = prefix

    @property
    def use_module(self):
        return self.commands.use_module

    def hit(self, key):
        """The command's reply from the module, else from the library: [allowed, count, remaining,
        reset_ms] for the fixed window, [allowed, count, remaining, retry_after_ms, reset_ms] for the
        sliding one."""
        return self.commands.call(self.command, self.function, key, self.limit, self.window)

    def decide(self, key):
        """(allowed, remaining, reset_ms, retry_ms): when the window resets, and when a denied
        request may retry (the fixed window's end; the sliding window's exact retry_after_ms)."""
        reply = self.hit(key)
        if len(reply) == 5:
            allowed, _count, remaining, retry_ms, reset_ms = reply
            return allowed, remaining, reset_ms, retry_ms
        allowed, _count, remaining, reset_ms = reply
        return allowed, remaining, reset_ms, reset_ms

    def __call__(self, environ, start_response):
        key = self.prefix + identity(environ)
        allowed, remaining, reset_ms, retry_ms = self.decide(key)
        retry_s = math.ceil(retry_ms / 1000)
        reset_s = math.ceil(reset_ms / 1000) if allowed else retry_s
        headers = [
            ("RateLimit-Policy", f'"default";q={self.limit};w={self.window}'),
            ("RateLimit", f'"default";r={remaining};t={reset_s}'),
        ]
        if not allowed:
            return too_many(start_response, headers, retry_s)

        def start_with_headers(status, response_headers, exc_info=None):
            return start_response(status, response_headers + headers, exc_info)

        return self.app(environ, start_with_headers)


class InFlightMiddleware:
    """At most `limit` requests in flight per client. Each request holds a permit, a lease of
    `lease` seconds (RATELIMIT.ACQUIRE), given back (RATELIMIT.RELEASE) when its response is
    finished, when the client goes away, or when the app raises; a long (streaming) response
    renews its lease as it goes (RATELIMIT.RENEW). If the process dies, the permit comes back by
    itself when its lease ends. A request over the limit gets 429 with Retry-After: when the
    earliest permit in use ends, at the latest."""

    def __init__(self, app, redis_client, limit, lease=30, prefix="inflight:", library=LIBRARY):
        self.app = app
        self.commands = Commands(redis_client, library)
        self.limit = limit
        self.lease = lease
        self.prefix = prefix

    def acquire(self, key, lease_id):
        return self.commands.call("RATELIMIT.ACQUIRE", "ratelimit_acquire", key, self.limit, self.lease, "ID", lease_id)

    def renew(self, key, lease_id):
        """True while the permit is held: renewed, or (lost, its lease over) taken again."""
        ms = self.commands.call("RATELIMIT.RENEW", "ratelimit_renew", key, lease_id, self.lease)
        return ms >= 0 or self.acquire(key, lease_id)[0] == 1

    def release(self, key, lease_id):
        self.commands.call("RATELIMIT.RELEASE", "ratelimit_release", key, lease_id)

    def __call__(self, environ, start_response):
        key = self.prefix + identity(environ)
        lease_id = uuid.uuid4().hex
        acquired, _in_use, _remaining, ms, _id = self.acquire(key, lease_id)
        if not acquired:
            return too_many(start_response, [], math.ceil(ms / 1000))
        try:
            body = self.app(environ, start_response)
        except BaseException:
            self.release(key, lease_id)
            raise
        return Held(body, self, key, lease_id)


class Held:
    """A response holding its request's permit: renewed every half lease while it streams, given
    back when the server closes it (WSGI servers close a response once it is sent, and when
    sending it failed because the client went away)."""

    def __init__(self, body, middleware, key, lease_id):
        self.body, self.middleware, self.key, self.lease_id = body, middleware, key, lease_id
        self.renewed = time.monotonic()
        self.released = False

    def __iter__(self):
        for chunk in self.body:
            if time.monotonic() - self.renewed >= self.middleware.lease / 2:
                if not self.middleware.renew(self.key, self.lease_id):
                    return  # the permit is lost and another holds it: stop here
                self.renewed = time.monotonic()
            yield chunk

    def close(self):
        try:
            if hasattr(self.body, "close"):
                self.body.close()
        finally:
            if not self.released:
                self.released = True
                self.middleware.release(self.key, self.lease_id)
