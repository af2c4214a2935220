"""The adaptive limit from Python: the providers' answers read as every client reads them
(testkit/conformance/provider_answers.json), the calls on a real server (the module's and the
library's), and the wrapper around real HTTP calls to a provider that answers 429s."""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio
from servers import Server

from redis_ratelimit_client import (
    AdaptiveLimit,
    AsyncAdaptiveLimit,
    AsyncRateLimiter,
    RateLimited,
    RateLimiter,
    RateLimitError,
    commands,
)
from redis_ratelimit_client.provider_answers import go_duration, read_answer

CASES = json.loads((Path(__file__).parents[3] / "testkit/conformance/provider_answers.json").read_text())


def ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_providers_answer_reads_as_every_client_reads_it(case: dict[str, Any]) -> None:
    now = datetime.fromisoformat(case.get("now", "2026-12-01T12:00:00Z").replace("Z", "+00:00"))
    answer = read_answer(case["status"], case["headers"], now=now)
    assert answer.throttled == case["throttled"]
    assert ms(answer.retry_after) == case["retry_after_ms"]
    for measure in ("requests", "tokens"):
        stated = getattr(answer, measure)
        assert [stated.limit, stated.remaining, ms(stated.reset_after)] == case[measure], measure


def test_go_durations() -> None:
    assert [go_duration(t) for t in ("6m0s", "1.5h", ".5s", "250us", "1h2m3.5s")] == [360, 5400, 0.5, 0.00025, 3723.5]
    assert [go_duration(t) for t in ("", "5", "1d", "-1s", "s", "1s2")] == [None] * 6


def test_bad_terms_are_refused_before_a_round_trip() -> None:
    for build, error in [
        (lambda: commands.adapt("k", 10, 5, 100, 60), "floor <= start <= ceiling must hold"),
        (lambda: commands.adapt("k", 1, 1, 2**40, 60), "ceiling * window is too large"),
        (lambda: commands.adapt("k", 1, 1, 10, 60, cost=0), "COST must be an integer >= 1"),
        (lambda: commands.report("k", "ok", retry_after=1), "syntax error: RETRY needs THROTTLED"),
        (lambda: commands.report("k", "ok", remaining=3), "syntax error: REMAINING needs RESET"),
        (lambda: commands.report("k", "429"), "outcome must be OK or THROTTLED"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(RateLimitError, match=re.escape(error)):
            build()


def test_the_callers_learn_one_limit(server: Server) -> None:
    fleet = [
        AdaptiveLimit(RateLimiter(redis.Redis(port=server.port)), "llm", floor=6, start=60, ceiling=600)
        for _ in range(4)
    ]
    admitted = sum(limit.decide().allowed for limit in fleet for _ in range(5))
    assert admitted == 10  # a sixth of 60 at once, whoever asks
    # Four callers see the same burst's 429s: one cut, and the first one's Retry-After holds them all.
    learned = [limit.report(429, {"retry-after": "20"}) for limit in fleet]
    assert [(x.limit, x.decreased) for x in learned if x] == [(42, True), (42, False), (42, False), (42, False)]
    assert learned[0] is not None and 19.9 < learned[0].hold <= 20
    denied = fleet[2].decide()
    assert not denied.allowed and denied.retry_after is not None and denied.retry_after > 19.9
    # The provider's stated limit caps the fleet's; nothing remaining would cut it, but this
    # epoch had its cut. Its turn comes after the caller denied before it (the hold's 20 s and
    # a token at 42 a minute), then a token's time (1.429 s).
    headers = {
        "x-ratelimit-limit-requests": "30",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "45s",
    }
    stated = fleet[1].report(200, headers)
    assert stated is not None and (stated.limit, stated.decreased) == (30, False)
    assert fleet[0].decide().retry_after == pytest.approx(22.858, abs=0.05)


def test_an_estimate_is_reserved_and_settled_with_what_was_used(server: Server) -> None:
    limit = AdaptiveLimit(
        RateLimiter(redis.Redis(port=server.port)), "tokens", floor=600, start=6_000, ceiling=60_000, measure="tokens"
    )
    r = limit.reserve(1_000)
    assert r.decision.allowed and r.token is not None and r.amount == 1_000 and r.decision.remaining == 0
    # 300 used: the 700 unused back in the fleet's bucket, once; a retry applies nothing again.
    s = limit.settle(r, 300)
    assert (s.applied, s.decision.limit, s.decision.window) == (-700, 6_000, 60)
    assert s.decision.remaining >= 700
    assert limit.settle(r, 300).applied == -700
    # Denied: no reservation to settle.
    while (denied := limit.reserve(1_000)).decision.allowed:
        pass
    assert denied.token is None
    with pytest.raises(RateLimitError, match="no reservation"):
        limit.settle(denied, 0)
    up_to = RateLimiter(redis.Redis(port=server.port)).reserve_adapt_up_to("tokens", 600, 6_000, 60_000, 60, cost=5_000)
    assert up_to.amount < 5_000


def test_a_report_on_a_limit_nobody_learned_writes_nothing(server: Server) -> None:
    r = redis.Redis(port=server.port)
    assert RateLimiter(r).report("nobody", "throttled", retry_after=5) is None
    assert r.dbsize() == 0


class Provider(BaseHTTPRequestHandler):
    """A provider whose capacity is 3 calls: then 429 with a Retry-After of 1 s."""

    calls = 0

    def do_POST(self) -> None:
        type(self).calls += 1
        over = type(self).calls > 3
        self.send_response(429 if over else 200)
        if over:
            self.send_header("retry-after", "1")
        self.send_header("x-ratelimit-limit-requests", "100")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    Provider.calls = 0
    http = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{http.server_address[1]}/v1/chat/completions"
    http.shutdown()


def test_the_wrapper_reports_what_the_call_returned_or_raised(server: Server, provider: str) -> None:
    limit = AdaptiveLimit(RateLimiter(redis.Redis(port=server.port)), "llm", floor=1, start=600, ceiling=1000)

    def send() -> Any:
        return urllib.request.urlopen(urllib.request.Request(provider, b"{}"))

    for _ in range(3):
        assert limit.call(send).status == 200
    # The provider's 4th call answers 429: reported (a cut, a hold of 1 s), then raised.
    with pytest.raises(urllib.error.HTTPError):
        limit.call(send)
    held = limit.decide()
    # The provider stated 100: the limit came down to it, then the cut took it to 70.
    assert not held.allowed and held.limit == 70
    assert held.retry_after is not None and held.retry_after > 0.9
    with pytest.raises(RateLimited):
        limit.call(send, max_wait=0)
    # Waited out: the hold, then the first token back (one every 60/70 s), asked again at the turn
    # the denial told (TURN; the server's slow log keeps every command's words).
    Provider.calls = 0
    r = redis.Redis(port=server.port)
    r.config_set("slowlog-log-slower-than", 0)
    r.slowlog_reset()
    assert limit.call(send, max_wait=5).status == 200
    logged = [e["command"] for e in reversed(r.slowlog_get(128))]
    asked = [c for c in logged if c.startswith((b"RATELIMIT.ADAPT", b"FCALL ratelimit_adapt"))]
    reported = [c for c in logged if c.startswith((b"RATELIMIT.REPORT", b"FCALL ratelimit_report"))]
    r.config_set("slowlog-log-slower-than", 10_000)
    assert len(asked) >= 2 and not asked[0].endswith(b" TURN"), asked
    assert all(a.endswith(b" TURN") for a in asked[1:]), asked
    # Its answer reported with the call's age: the ms since it was admitted (AGE).
    assert len(reported) == 1 and re.search(rb" AGE \d+$", reported[0]), reported


async def test_the_async_limit_decides_and_reports(server: Server) -> None:
    rl = AsyncRateLimiter(redis.asyncio.Redis(port=server.port))
    limit = AsyncAdaptiveLimit(rl, "llm:tokens", floor=600, start=6_000, ceiling=60_000, measure="tokens")
    assert (await limit.decide(1_000)).allowed
    learned = await limit.report(200, {"x-ratelimit-limit-tokens": "3000"})
    assert learned is not None and learned.limit == 3_000
    assert await limit.report(None, throttled=True) is not None
