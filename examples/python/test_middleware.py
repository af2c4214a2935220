"""Runs the middleware against a real redis-server and real HTTP requests: with the module, and
without it (the middleware then loads and calls the Functions library).

REDIS_SERVER and RATELIMIT_MODULE say which server and module to use (make test sets them).
"""

import math
import os
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import redis

from ratelimit_middleware import RateLimitMiddleware


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hello(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello\n"]


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class MiddlewareTest(unittest.TestCase):
    module = True

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.redis_port = free_port()
        cls.server = subprocess.Popen(
            [
                os.environ.get("REDIS_SERVER", "redis-server"),
                "--port", str(cls.redis_port), "--bind", "127.0.0.1", "--save", "",
                "--dir", cls.dir.name,
            ] + (["--loadmodule", os.environ["RATELIMIT_MODULE"]] if cls.module else []),
            stdout=subprocess.DEVNULL,
        )
        cls.redis = redis.Redis(port=cls.redis_port)
        for _ in range(100):
            try:
                cls.redis.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        app = RateLimitMiddleware(hello, cls.redis, limit=3, window=60)
        cls.app = app
        cls.http = make_server("127.0.0.1", 0, app, handler_class=QuietHandler)
        threading.Thread(target=cls.http.serve_forever, daemon=True).start()
        cls.url = f"http://127.0.0.1:{cls.http.server_port}/"
        # A sliding window of 10^9 s: the one that holds now began in 2001, so no test crosses
        # into the next.
        sliding = RateLimitMiddleware(hello, cls.redis, limit=3, window=10**9, prefix="rl:s:", algorithm="sliding")
        cls.sliding_http = make_server("127.0.0.1", 0, sliding, handler_class=QuietHandler)
        threading.Thread(target=cls.sliding_http.serve_forever, daemon=True).start()
        cls.sliding_url = f"http://127.0.0.1:{cls.sliding_http.server_port}/"

    @classmethod
    def tearDownClass(cls):
        cls.http.shutdown()
        cls.sliding_http.shutdown()
        cls.server.kill()
        cls.server.wait()
        cls.dir.cleanup()

    def get(self, api_key, url=None):
        request = urllib.request.Request(url or self.url, headers={"X-Api-Key": api_key})
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers
        except urllib.error.HTTPError as error:
            return error.code, error.headers

    def test_admits_up_to_the_limit_then_answers_429(self):
        statuses = []
        for expected_remaining in (2, 1, 0):
            status, headers = self.get("alice")
            statuses.append(status)
            self.assertEqual(headers["RateLimit-Policy"], '"default";q=3;w=60')
            self.assertRegex(headers["RateLimit"], rf'^"default";r={expected_remaining};t=(59|60)$')
        status, headers = self.get("alice")
        statuses.append(status)
        self.assertEqual(statuses, [200, 200, 200, 429])
        # Retry-After is reset_ms rounded up to whole seconds: the window's remaining life (read
        # again here a moment later, so it may have crossed a second).
        ttl_seconds = math.ceil(self.redis.pttl("rl:alice") / 1000)
        self.assertIn(int(headers["Retry-After"]), (ttl_seconds, ttl_seconds + 1))
        self.assertEqual(self.redis.get("rl:alice"), b"3", "denied requests do not count")

    def test_the_sliding_window_answers_429_with_its_exact_retry(self):
        statuses = [self.get("erin", self.sliding_url)[0] for _ in range(3)]
        status, headers = self.get("erin", self.sliding_url)
        self.assertEqual(statuses + [status], [200, 200, 200, 429])
        value = self.redis.get("rl:s:erin").decode()
        self.assertRegex(value, r"^slide:1000000000000:1000000000000:0:3$")
        # 3 of 3 in this window: one more fits once the next one has let a third go, which is
        # the key's PTTL less 2/3 of a window (read a moment later: it may have crossed a second).
        retry_s = math.ceil((self.redis.pttl("rl:s:erin") - 2 * 10**12 // 3) / 1000)
        self.assertIn(int(headers["Retry-After"]), (retry_s, retry_s + 1))
        self.assertEqual(headers["RateLimit"], f'"default";r=0;t={headers["Retry-After"]}')
        with self.assertRaises(ValueError):
            RateLimitMiddleware(hello, self.redis, limit=3, window=60, algorithm="leaky")

    def test_each_client_has_its_own_budget(self):
        for _ in range(3):
            self.assertEqual(self.get("bob")[0], 200)
        self.assertEqual(self.get("bob")[0], 429)
        self.assertEqual(self.get("carol")[0], 200)

    def test_it_uses_the_module_where_loaded_else_the_library(self):
        self.get("dave")
        self.assertEqual(self.app.use_module, self.module)
        libraries = self.redis.execute_command("FUNCTION", "LIST", "LIBRARYNAME", "ratelimit")
        self.assertEqual(bool(libraries), not self.module)


class LibraryMiddlewareTest(MiddlewareTest):
    """The same tests against a server without the module."""

    module = False


if __name__ == "__main__":
    unittest.main()
