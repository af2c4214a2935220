"""A WSGI middleware that rate-limits every request with redis-ratelimit: RATELIMIT.HIT (a fixed
window), or RATELIMIT.SLIDE (a sliding window) with algorithm="sliding".

Copy it into any WSGI app (Flask, Django, Falcon...):

    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis.Redis(), limit=100, window=60)
    app.wsgi_app = RateLimitMiddleware(app.wsgi_app, redis.Redis(), limit=100, window=60, algorithm="sliding")

Where the module is not loaded (managed Redis), the same hit goes through the Functions library
(functions/ratelimit.lua), loaded on first use if the server does not have it yet: same reply,
same counters.

Requests are counted per client (the X-Api-Key header, else the remote address). A denied
request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
RateLimit fields.
"""

import math
import os

import redis

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "functions", "ratelimit.lua")

# The module's command and the library's function of each algorithm.
ALGORITHMS = {
    "fixed": ("RATELIMIT.HIT", "ratelimit_hit"),
    "sliding": ("RATELIMIT.SLIDE", "ratelimit_slide"),
}


class RateLimitMiddleware:
    def __init__(self, app, redis_client, limit, window, prefix="rl:", library=LIBRARY, algorithm="fixed"):
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, not {algorithm!r}")
        self.command, self.function = ALGORITHMS[algorithm]
        self.app = app
        self.redis = redis_client
        self.limit = limit
        self.window = window
        self.prefix = prefix
        self.library = library
        self.use_module = None  # decided by the first hit

    def hit(self, key):
        """The command's reply from the module, else from the library: [allowed, count, remaining,
        reset_ms] for the fixed window, [allowed, count, remaining, retry_after_ms, reset_ms] for the
        sliding one."""
        if self.use_module is not False:
            try:
                reply = self.redis.execute_command(self.command, key, self.limit, self.window)
                self.use_module = True
                return reply
            except redis.ResponseError as error:
                if self.use_module or "unknown command" not in str(error).lower():
                    raise
                self.use_module = False
                if not self.redis.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit"):
                    with open(self.library, encoding="utf-8") as source:
                        self.redis.execute_command("FUNCTION", "LOAD", source.read())
        return self.redis.execute_command("FCALL", self.function, 1, key, self.limit, self.window)

    def decide(self, key):
        """(allowed, remaining, reset_ms, retry_ms): when the window resets, and when a denied
        request may retry (the fixed window's end; the sliding window's exact retry_after_ms)."""
        reply = self.hit(key)
        if len(reply) == 5:
            allowed, _count, remaining, retry_ms, reset_ms = reply
            return allowed, remaining, reset_ms, retry_ms
        allowed, _count, remaining, reset_ms = reply
        return allowed, remaining, reset_ms, reset_ms

    def identity(self, environ):
        return environ.get("HTTP_X_API_KEY") or environ.get("REMOTE_ADDR", "unknown")

    def __call__(self, environ, start_response):
        key = self.prefix + self.identity(environ)
        allowed, remaining, reset_ms, retry_ms = self.decide(key)
        retry_s = math.ceil(retry_ms / 1000)
        reset_s = math.ceil(reset_ms / 1000) if allowed else retry_s
        headers = [
            ("RateLimit-Policy", f'"default";q={self.limit};w={self.window}'),
            ("RateLimit", f'"default";r={remaining};t={reset_s}'),
        ]
        if not allowed:
            body = b"Too Many Requests\n"
            start_response(
                "429 Too Many Requests",
                headers
                + [
                    ("Retry-After", str(retry_s)),
                    ("Content-Type", "text/plain"),
                    ("Content-Length", str(len(body))),
                ],
            )
            return [body]

        def start_with_headers(status, response_headers, exc_info=None):
            return start_response(status, response_headers + headers, exc_info)

        return self.app(environ, start_with_headers)
