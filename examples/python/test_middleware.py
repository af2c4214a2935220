"""Runs the middleware against a real redis-server and real HTTP requests: with the module, and
without it (the middleware then loads and calls the Functions library).

REDIS_SERVER and RATELIMIT_MODULE say which server and module to use (make test sets them).
"""

import math
import os
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis

from ratelimit_middleware import InFlightMiddleware, RateLimitMiddleware


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


class ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


def start_redis(module):
    """A redis-server of its own (with the module or without it), its folder and a client."""
    folder = tempfile.TemporaryDirectory()
    port = free_port()
    process = subprocess.Popen(
        [
            os.environ.get("REDIS_SERVER", "redis-server"),
            "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", folder.name,
        ] + (["--loadmodule", os.environ["RATELIMIT_MODULE"]] if module else []),
        stdout=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    return process, folder, client


def serve(app):
    """Serves `app` on a free port, a thread per request; returns the server and its URL."""
    http = make_server("127.0.0.1", 0, app, server_class=ThreadingServer, handler_class=QuietHandler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, f"http://127.0.0.1:{http.server_port}/"


def wait_until(condition, what, timeout=10):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


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


class InFlightTest(unittest.TestCase):
    """InFlightMiddleware: permits taken per request, given back however the request ends."""

    module = True

    @classmethod
    def setUpClass(cls):
        cls.server, cls.dir, cls.redis = start_redis(cls.module)
        cls.holds = {}  # X-Hold value -> an Event the /slow request waits for

        def app(environ, start_response):
            path = environ["PATH_INFO"]
            if path == "/boom":
                raise RuntimeError("the handler failed")
            if path == "/slow":
                cls.holds[environ["HTTP_X_HOLD"]].wait(10)
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"done\n"]

            def stream(chunks):
                for _ in range(chunks):
                    time.sleep(0.05)
                    yield b"x" * 1024

            start_response("200 OK", [("Content-Type", "text/plain")])
            return stream(int(environ.get("QUERY_STRING") or "1"))

        # Leases of a minute: a permit that comes back early was given back, not expired. And
        # leases of a second, which a stream of two seconds must renew.
        cls.http, cls.url = serve(InFlightMiddleware(app, cls.redis, limit=2, lease=60))
        cls.short_http, cls.short_url = serve(InFlightMiddleware(app, cls.redis, limit=2, lease=1, prefix="short:"))

    @classmethod
    def tearDownClass(cls):
        cls.http.shutdown()
        cls.short_http.shutdown()
        cls.server.kill()
        cls.server.wait()
        cls.dir.cleanup()

    def request(self, path, api_key, url=None, hold=None):
        headers = {"X-Api-Key": api_key}
        if hold:
            headers["X-Hold"] = hold
        request = urllib.request.Request((url or self.url) + path, headers=headers)
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()

    def held(self, key):
        return self.redis.zcard(key)

    def test_at_most_limit_in_flight_then_429(self):
        results = []
        for name in ("a", "b"):
            self.holds[name] = threading.Event()
            threading.Thread(target=lambda n=name: results.append(self.request("slow", "alice", hold=n)[0])).start()
        wait_until(lambda: self.held("inflight:alice") == 2, "two requests in flight")
        status, headers, _ = self.request("", "alice")
        self.assertEqual(status, 429)
        # Retry-After: when the earliest permit's lease (a minute) ends, at the latest.
        self.assertIn(int(headers["Retry-After"]), range(58, 61))
        self.assertEqual(self.request("", "bob")[0], 200, "each client has its own permits")
        for event in self.holds.values():
            event.set()
        wait_until(lambda: len(results) == 2, "both slow requests to finish")
        self.assertEqual(results, [200, 200])
        wait_until(lambda: self.held("inflight:alice") == 0, "both permits given back")

    def test_the_permit_is_given_back_when_the_app_raises(self):
        self.assertEqual(self.request("boom", "carol")[0], 500)
        self.assertEqual(self.held("inflight:carol"), 0)

    def test_the_permit_is_given_back_when_the_client_goes_away(self):
        with socket.create_connection(("127.0.0.1", self.http.server_port)) as client:
            client.sendall(b"GET /stream?1000 HTTP/1.0\r\nX-Api-Key: dave\r\n\r\n")
            self.assertTrue(client.recv(1024))
            self.assertEqual(self.held("inflight:dave"), 1)
        # Well before its minute's lease could end.
        wait_until(lambda: self.held("inflight:dave") == 0, "the permit back after the client left", timeout=10)

    def test_a_long_stream_renews_its_lease(self):
        finished = []
        threading.Thread(target=lambda: finished.append(self.request("stream?40", "erin", url=self.short_url))).start()
        wait_until(lambda: self.held("short:erin") == 1, "the stream's permit")
        # 1.5 s into a stream of 2 s, past its first 1-second lease: renewed, still held, alive.
        time.sleep(1.5)
        (_member, expiry), = self.redis.zrange("short:erin", 0, -1, withscores=True)
        seconds, micros = self.redis.time()
        self.assertGreater(expiry, seconds * 1000 + micros // 1000, "the lease was renewed")
        wait_until(lambda: finished, "the stream to end")
        self.assertEqual((finished[0][0], len(finished[0][2])), (200, 40 * 1024))
        self.assertEqual(self.held("short:erin"), 0)


class LibraryInFlightTest(InFlightTest):
    """The same tests against a server without the module."""

    module = False


if __name__ == "__main__":
    unittest.main()
