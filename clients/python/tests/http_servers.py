"""Real HTTP servers for the framework tests: a WSGI app on werkzeug's threaded server, an ASGI app
on uvicorn, each on a free loopback port in a thread; and a plain HTTP client."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from typing import Any

import uvicorn
from servers import free_port, wait_until
from werkzeug.serving import make_server


@dataclass
class Response:
    status: int
    headers: Message
    """Case-insensitive, as HTTP's names are (ASGI sends them in lower case)."""
    body: bytes


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 10) -> Response:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Response(response.status, response.headers, response.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, error.headers, error.read())


@contextmanager
def serve_wsgi(app: Any) -> Iterator[str]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "uvicorn")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        # Stopped for sure before the next test: a server still running would go on renewing
        # its permits, over that test's keys.
        server.should_exit = True
        thread.join(10)
        if thread.is_alive():
            server.force_exit = True
            thread.join(10)
        assert not thread.is_alive(), "uvicorn did not stop"
