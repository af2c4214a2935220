"""RateLimiter against real servers, with the module and with the Functions library, in RESP2 and
RESP3, through redis-py and valkey-py."""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import redis
import valkey
from servers import Server

from redis_ratelimit_client import LibraryNotLoaded, PermitUnavailable, RateLimiter, RateLimitError


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def rl(server: Server, request: pytest.FixtureRequest) -> RateLimiter:
    return RateLimiter(server.client(protocol=request.param))


def test_backend_is_the_module_where_loaded_else_the_library(rl: RateLimiter, backend: str) -> None:
    assert rl.backend == backend
    if backend == "library":
        assert rl.client.function_list(library="ratelimit")


def test_hit_counts_then_denies_until_the_window_ends(rl: RateLimiter) -> None:
    first = rl.hit("user:1", limit=2, window=60)
    assert (first.allowed, first.count, first.remaining, first.reset_after, first.retry_after) == (True, 1, 1, 60, None)
    assert rl.hit("user:1", 2, 60).remaining == 0
    denied = rl.hit("user:1", 2, 60)
    assert (denied.allowed, denied.count, denied.remaining) == (False, 2, 0)
    assert denied.retry_after is not None and 59 < denied.retry_after <= 60
    seconds = str(-int(-denied.retry_after // 1))  # rounded up: 60 unless a second went by
    assert denied.headers() == {
        "RateLimit-Policy": '"default";q=2;w=60',
        "RateLimit": f'"default";r=0;t={seconds}',
        "Retry-After": seconds,
    }
    assert 59_000 < rl.client.pttl("user:1") <= 60_000


def test_hit_cost_and_windows_in_ms_or_timedelta(rl: RateLimiter) -> None:
    assert rl.hit("a", 10, 1.5, cost=4).count == 4
    assert rl.client.pttl("a") == pytest.approx(1500, abs=50)
    assert rl.hit("b", 10, timedelta(minutes=2)).reset_after == 120
    never = rl.hit("c", 3, 60, cost=4)
    assert not never.allowed and never.retry_after == math.inf and "Retry-After" not in never.headers()
    assert rl.client.exists("c") == 0


def test_peek_counts_nothing_and_shows_a_counter_without_ttl(rl: RateLimiter) -> None:
    assert rl.peek("p", 5).count == 0
    rl.client.set("p", 5)
    leaked = rl.peek("p", 5, cost=1)
    assert (leaked.allowed, leaked.count, leaked.reset_after, leaked.retry_after) == (False, 5, math.inf, math.inf)
    assert rl.client.get("p") == b"5" and rl.client.ttl("p") == -1


def test_slide_gives_the_exact_retry(rl: RateLimiter) -> None:
    for _ in range(3):
        assert rl.slide("s", 3, 60).allowed
    denied = rl.slide("s", 3, 60)
    assert not denied.allowed and denied.count == 3 and denied.retry_after is not None
    assert 0 < denied.retry_after <= 120
    looked = rl.slide("s", 3, 60, peek=True)
    assert not looked.allowed and looked.count == 3
    assert rl.client.get("s").startswith(b"slide:60000:")


def test_gcra_bursts_then_waits(rl: RateLimiter) -> None:
    answers = [rl.gcra("g", max_burst=1, tokens_per_period=1, period=10) for _ in range(3)]
    assert [a.allowed for a in answers] == [True, True, False]
    assert answers[0].limit == 2 and answers[0].remaining == 1 and answers[0].count == 1
    assert answers[2].retry_after is not None and 9 < answers[2].retry_after <= 10
    assert rl.gcra("g2", 0, 10, timedelta(seconds=0.5), tokens=1).allowed
    assert rl.gcra("g3", 4, 1, 60, tokens=6).retry_after == math.inf


def test_gcra_aligned_refills_at_the_periods_boundary(rl: RateLimiter) -> None:
    def server_time() -> float:
        seconds, micros = rl.client.time()
        return float(seconds) + micros / 1e6

    # One a day, back at each UTC midnight: the denial waits for midnight, not for a day.
    before = server_time()
    assert rl.gcra("ga", 0, 1, 86400, align=True).allowed
    denied = rl.gcra("ga", 0, 1, 86400, align=True)
    after = server_time()
    midnight = (before // 86400 + 1) * 86400
    assert not denied.allowed and denied.retry_after is not None
    assert midnight - after - 0.001 <= denied.retry_after <= midnight - before + 0.001
    with pytest.raises(RateLimitError, match="align"):
        rl.gcra("ga", 0, 1, 86400, align=1)  # type: ignore[arg-type]


def test_gcra_up_to_grants_what_the_bucket_has(rl: RateLimiter) -> None:
    first = rl.gcra_up_to("gp", 4, 1, 60, tokens=3)
    assert first.allowed and first.granted == 3 and first.decision.remaining == 2
    rest = rl.gcra_up_to("gp", 4, 1, 60, tokens=3)
    assert rest.allowed and rest.granted == 2 and rest.decision.remaining == 0
    none = rl.gcra_up_to("gp", 4, 1, 60, tokens=3)
    assert not none.allowed and none.granted == 0
    assert none.retry_after is not None and 59 < none.retry_after <= 60
    with pytest.raises(RateLimitError, match="TOKENS"):
        rl.gcra_up_to("gp", 4, 1, 60, tokens=0)


def test_hit_all_is_all_or_nothing(rl: RateLimiter) -> None:
    keys = ["rl:{u}:s", "rl:{u}:h"]
    first = rl.hit_all(keys, [(1, 1), (100, 3600)])
    assert first.allowed and [d.count for d in first.decisions] == [1, 1]
    denied = rl.hit_all(keys, [(1, 1), (100, 3600)])
    assert not denied.allowed and [d.count for d in denied.decisions] == [1, 1]
    assert [d.allowed for d in denied.decisions] == [False, True]
    assert denied.retry_after is not None and 0 < denied.retry_after <= 1
    assert denied.headers(["second", "hour"]) == {
        "RateLimit-Policy": '"second";q=1;w=1, "hour";q=100;w=3600',
        "RateLimit": '"second";r=0;t=1',
        "Retry-After": "1",
    }
    sliding = rl.hit_all(["{v}:m", "{v}:d"], [(2, 60), (5, timedelta(milliseconds=86_400_500))], slide=True)
    assert sliding.allowed and [d.window for d in sliding.decisions] == [60, 86_400.5]


def test_acquire_renew_release(rl: RateLimiter) -> None:
    held = rl.acquire("inflight:1", limit=1, lease=30, id="req-1")
    assert (held.acquired, held.in_use, held.remaining, held.expires_after, held.id) == (True, 1, 0, 30, "req-1")
    again = rl.acquire("inflight:1", 1, 30, id="req-1")
    assert again.acquired and again.in_use == 1  # a retry with the same id is counted once
    denied = rl.acquire("inflight:1", 1, 30)
    assert not denied.acquired and denied.id is None and 29 < (denied.retry_after or 0) <= 30
    assert rl.renew("inflight:1", "req-1", 0.5) == 0.5
    assert rl.renew("inflight:1", "gone", 10) is None
    assert rl.release("inflight:1", "req-1") is True
    assert rl.release("inflight:1", "req-1") is False
    assert rl.client.exists("inflight:1") == 0
    made = rl.acquire("inflight:2", 2, 10)
    assert made.acquired and made.id and len(made.id) == 32


def test_top_is_the_modules(rl: RateLimiter, backend: str) -> None:
    if backend == "module":
        rl.top(reset=True)  # the summaries outlive FLUSHALL
    for _ in range(3):
        rl.hit("noisy", 1, 60)
    if backend == "module":
        entries = rl.top(count=5)
        assert entries and entries[0].key == "noisy" and entries[0].count == 2 and entries[0].error == 0
        assert [e.key for e in rl.top("admitted")] == ["noisy"]
        # Shadow mode: a call its limit would deny is admitted, and shown in the SHADOWED view.
        rl.client.config_set("ratelimit.shadow", "shadowed:")
        try:
            rl.hit("shadowed:k", 1, 60)
            assert rl.hit("shadowed:k", 1, 60).allowed
            assert [(e.key, e.count) for e in rl.top("shadowed")] == [("shadowed:k", 1)]
        finally:
            rl.client.config_set("ratelimit.shadow", "")
    else:
        with pytest.raises(RateLimitError, match="needs the module"):
            rl.top()


def test_reserve_then_settle_gives_back_or_charges(rl: RateLimiter) -> None:
    r = rl.reserve_hit("tpm", 50_000, 60, cost=4_000)
    assert r.allowed and r.token and r.token.startswith("h:50000:60000:") and r.amount == 4_000
    assert r.decision.count == 4_000
    settled = rl.settle("tpm", r.token, 730)
    assert (settled.applied, settled.decision.count, settled.decision.remaining) == (-3_270, 730, 49_270)
    assert settled.decision.allowed and settled.decision.limit == 50_000 and settled.decision.window == 60
    over = rl.settle("tpm", rl.reserve_hit("tpm", 50_000, 60, cost=100).token or "", 300)
    assert (over.applied, over.decision.count) == (200, 1_030)
    # A sliding window and a bucket, the same way.
    s = rl.reserve_slide("s", 10, 60, cost=8)
    assert rl.settle("s", s.token or "", 2).applied == -6
    g = rl.reserve_gcra("g", 4, 1, 3600, tokens=5)
    settled_g = rl.settle("g", g.token or "", 1)
    assert (settled_g.applied, settled_g.decision.remaining, settled_g.decision.limit) == (-4, 4, 5)
    # Denied: no reservation.
    denied = rl.reserve_hit("tpm", 50_000, 60, cost=50_000)
    assert (denied.allowed, denied.token) == (False, None) and denied.retry_after
    with pytest.raises(RateLimitError, match="the reservation is for another key"):
        rl.settle("other", r.token, 1)
    with pytest.raises(RateLimitError, match="invalid reservation"):
        rl.settle("tpm", "made up", 1)


def test_reserve_hit_up_to_reserves_what_was_granted(rl: RateLimiter) -> None:
    rl.hit("block", 100, 3600, cost=45)
    r = rl.reserve_hit_up_to("block", 100, 3600, cost=70)
    assert (r.allowed, r.amount, r.decision.count, r.decision.remaining) == (True, 55, 100, 0)
    settled = rl.settle("block", r.token or "", 50)
    assert (settled.applied, settled.decision.count) == (-5, 95)
    none = rl.reserve_hit_up_to("block", 95, 3600, cost=70)
    assert (none.allowed, none.amount, none.token) == (False, 0, None)
    assert none.retry_after is not None and 3590 < none.retry_after <= 3600
    with pytest.raises(RateLimitError, match="PARTIAL needs COST >= 1"):
        rl.reserve_hit_up_to("block", 95, 3600, cost=-1)


def test_reserve_slide_up_to_reserves_what_the_estimate_had_room_for(rl: RateLimiter) -> None:
    # A window of 10^9 s: the previous one weighs nothing, the estimate is the count.
    long = 10**9
    granted = [rl.reserve_slide_up_to("sliding block", 100, long, cost=70) for _ in range(2)]
    assert [(r.allowed, r.amount, r.decision.count) for r in granted] == [(True, 70, 70), (True, 30, 100)]
    settled = rl.settle("sliding block", granted[1].token or "", 10)
    assert (settled.applied, settled.decision.count) == (-20, 80)
    none = rl.reserve_slide_up_to("sliding block", 80, long, cost=70)
    assert (none.allowed, none.amount, none.token) == (False, 0, None)
    with pytest.raises(RateLimitError, match="PARTIAL needs COST >= 1"):
        rl.reserve_slide_up_to("sliding block", 95, long, cost=0)


def test_requests_and_tokens_reserved_together_and_settled_on_every_token_limit(rl: RateLimiter) -> None:
    keys = ["{u}:rpm", "{u}:tpm", "{u}:tpd"]
    limits = [(2, 60), (10_000, 60), (20_000, "day")]
    r = rl.reserve_all(keys, limits, tokens=4_000, token_keys=2)
    assert r.allowed and r.keys == ("{u}:tpm", "{u}:tpd") and r.amount == 4_000
    assert [d.count for d in r.decision.decisions] == [1, 4_000, 4_000]
    assert r.token and r.token.startswith("h:10000:60000:") and ",c:20000:0:" in r.token
    with rl.settling(r) as s:
        s.used = 1_000
    assert isinstance(s.settlement, tuple)
    assert [(x.applied, x.decision.count) for x in s.settlement] == [(-3_000, 1_000), (-3_000, 1_000)]
    assert s.settlement[0].decision.limit == 10_000 and s.settlement[1].decision.limit == 20_000
    # Settled by hand the same way, on the token keys; the request limit then refuses.
    again = rl.reserve_all(keys, limits, tokens=4_000, token_keys=2)
    assert [x.applied for x in rl.settle(list(again.keys), again.token or "", 5_000)] == [1_000, 1_000]
    denied = rl.reserve_all(keys, limits, tokens=1, token_keys=2)
    assert (denied.allowed, denied.token) == (False, None) and denied.retry_after
    # One token limit: one Settlement, in a tuple all the same.
    one = rl.reserve_all(["{x}:r", "{x}:t"], [(5, 60), (100, 60)], tokens=30)
    assert [x.applied for x in rl.settle(list(one.keys), one.token or "", 10)] == [-20]
    # Counted without reserving; costs per key shape each limit's own answer.
    plain = rl.hit_all(["{v}:r", "{v}:t"], [(5, 60), (100, 60)], tokens=30)
    assert [(d.count, d.remaining) for d in plain.decisions] == [(1, 4), (30, 70)]
    for bad, message in [
        ({"tokens": 0}, "TOKENS must be an integer >= 1"),
        ({"tokens": 5, "token_keys": 4}, "TOKENS' key count must be between 1 and numkeys"),
        ({"tokens": 5, "token_keys": 0}, "TOKENS' key count must be between 1 and numkeys"),
    ]:
        with pytest.raises(RateLimitError, match=message):
            rl.reserve_all(keys, limits, **bad)
    with pytest.raises(RateLimitError, match="each key may be given only once"):
        rl.settle(["{u}:tpm", "{u}:tpm"], r.token, 1)
    assert rl.client.exists("{w}:r") == 0


def test_a_monthly_budget_reserves_and_settles(rl: RateLimiter) -> None:
    r = rl.reserve_hit("month", 1_000_000, "month", cost=4_000, tz="+05:30")
    assert r.allowed and r.token and r.token.startswith("c:1000000:2:") and r.token.endswith(":+05:30")
    settled = rl.settle("month", r.token, 1_500)
    assert (settled.applied, settled.decision.count, settled.decision.limit) == (-2_500, 1_500, 1_000_000)
    a = rl.reserve_hit("aligned", 100, 60, cost=10, align=True)
    assert a.token and a.token.startswith("a:100:60000:")
    assert rl.settle("aligned", a.token, 4).decision.count == 4


def test_refund_and_negative_costs_give_back(rl: RateLimiter) -> None:
    rl.hit("h", 10, 60, cost=7)
    assert rl.refund_hit("h", 10, 60, amount=3).count == 4
    assert rl.hit("h", 10, 60, cost=-100).count == 0
    rl.slide("s", 10, 60, cost=5)
    assert rl.refund_slide("s", 10, 60, amount=2).count == 3
    rl.gcra("g", 4, 1, 3600, tokens=5)
    assert rl.refund_gcra("g", 4, 1, 3600, amount=2).remaining == 2
    assert rl.client.exists("none") == 0 and rl.refund_hit("none", 10, 60, amount=1).allowed
    assert rl.client.exists("none") == 0
    with pytest.warns(DeprecationWarning):
        assert rl.refund("s", 1, limit=10, window=60, sliding=True).count == 2


def test_every_limiter_decides_up_to_its_cost(rl: RateLimiter) -> None:
    """Each limiter's four calls: decide, decide up to, reserve, reserve up to."""
    rl.hit("uh", 10, 60, cost=8)
    g = rl.hit_up_to("uh", 10, 60, cost=5)
    assert (g.granted, g.decision.allowed, g.decision.count) == (2, True, 10)
    none = rl.hit_up_to("uh", 10, 60, cost=5)
    assert (none.granted, none.decision.allowed) == (0, False)
    rl.slide("us", 10, 60, cost=9)
    g = rl.slide_up_to("us", 10, 60, cost=5)
    assert (g.granted, g.decision.count) == (1, 10)
    r = rl.reserve_gcra_up_to("ug", 2, 1, 60, tokens=5)
    assert (r.amount, r.decision.allowed, r.token is not None) == (3, True, True)
    settled = rl.settle("ug", r.token or "", 1)
    assert (settled.applied, settled.decision.remaining) == (-2, 2)
    empty = rl.reserve_gcra_up_to("ug", 2, 1, 60, tokens=5)
    assert (empty.amount, empty.decision.allowed) == (2, True)
    assert rl.reserve_gcra_up_to("ug", 2, 1, 60, tokens=5).token is None


def test_settling_settles_once_when_the_block_ends(rl: RateLimiter) -> None:
    r = rl.reserve_hit("tpm", 10_000, 60, cost=4_000)
    with rl.settling(r) as s:
        s.used = 1_000
    assert s.settlement is not None and s.settlement.applied == -3_000
    assert rl.peek("tpm", 10_000).count == 1_000
    # The block raised, with what was used known: still settled, the block's error goes on.
    r = rl.reserve_hit("tpm", 10_000, 60, cost=4_000)
    with pytest.raises(ZeroDivisionError), rl.settling(r) as s:
        s.used = 0
        _ = 1 / 0
    assert rl.peek("tpm", 10_000).count == 1_000
    # Left unset: nothing sent, the estimate stays counted; a denied reservation sends nothing.
    r = rl.reserve_hit("tpm", 10_000, 60, cost=4_000)
    with rl.settling(r) as s:
        pass
    assert s.settlement is None and rl.peek("tpm", 10_000).count == 5_000
    with rl.settling(rl.reserve_hit("tpm", 10_000, 60, cost=9_000)) as s:
        s.used = 1
    assert s.settlement is None and rl.peek("tpm", 10_000).count == 5_000
    # A settle the server refuses raises after a block that did not.
    r = rl.reserve_hit("tpm", 10_000, 60, cost=1)
    rl.client.set("tpm", "text")
    with pytest.raises(RateLimitError, match="not an integer"), rl.settling(r) as s:
        s.used = 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda rl: rl.hit("k", 0, 60), "limit must be an integer >= 1"),
        (lambda rl: rl.hit("k", 10, -1), "window must be an integer >= 1"),
        (lambda rl: rl.hit("k", 10, 0.0001), "window must be a whole number of milliseconds"),
        (lambda rl: rl.hit("k", True, 60), "limit must be an integer >= 1"),
        (lambda rl: rl.hit("k", 10, 60, cost=0), "COST must be a nonzero integer"),
        (lambda rl: rl.peek("k", 10, cost=-1), "COST must be an integer >= 1"),
        (lambda rl: rl.gcra("k", 1, 1, 1, tokens=0), "TOKENS must be a nonzero integer"),
        (lambda rl: rl.reserve_hit("k", 10, 60, cost=-1), "RESERVE needs COST >= 1"),
        (lambda rl: rl.reserve_gcra("k", 1, 1, 1, tokens=0), "RESERVE needs TOKENS >= 1"),
        (lambda rl: rl.refund_hit("k", 10, 60, amount=0), "amount must be an integer >= 1"),
        (lambda rl: rl.hit_up_to("k", 10, 60, cost=0), "PARTIAL needs COST >= 1"),
        (lambda rl: rl.reserve_gcra_up_to("k", 1, 1, 1, tokens=0), "PARTIAL needs TOKENS >= 1"),
        (lambda rl: rl.settle("k", "h:1:1:1:1:01234567", -1), "used must be an integer >= 0"),
        (lambda rl: rl.slide("k", 10.0, 60), "limit must be an integer >= 1"),
        (lambda rl: rl.gcra("k", -1, 1, 1), "max_burst must be an integer >= 0"),
        (lambda rl: rl.gcra("k", 1, 1, 0), "period must be > 0"),
        (lambda rl: rl.gcra("k", 1, 1, float("nan")), "period is not a valid float"),
        (lambda rl: rl.acquire("k", 1, 30, id=""), "ID must be 1 to 256 bytes"),
        (lambda rl: rl.acquire("k", 1, 30, id="x" * 257), "ID must be 1 to 256 bytes"),
        (lambda rl: rl.hit_all(["a", "a"], [(1, 1), (2, 2)]), "each key may be given only once"),
        (lambda rl: rl.hit_all(["a", "b"], [(1, 1)]), "2 keys need 2"),
        (lambda rl: rl.top("all"), "view must be"),
        (lambda rl: rl.hit("k", 10, "fortnight"), "window must be a number of seconds or day, week, month or year"),
        (lambda rl: rl.hit("k", 10, 60, tz="UTC"), "TZ needs a calendar window"),
        (lambda rl: rl.hit_all(["a"], [(1, 60)], slide=True, align=True), "SLIDE and ALIGN cannot"),
        (lambda rl: rl.hit_all(["a"], [(1, "day")], slide=True), "SLIDE and a calendar window cannot"),
    ],
)
def test_bad_input_is_refused_before_a_round_trip(call: Any, message: str) -> None:
    nowhere = RateLimiter(redis.Redis(port=1, socket_connect_timeout=0.2))  # nothing listens on port 1
    with pytest.raises(RateLimitError, match=message):
        call(nowhere)


def test_server_errors_in_its_own_words_and_nothing_written(rl: RateLimiter) -> None:
    rl.client.rpush("list", "x")
    with pytest.raises(RateLimitError, match=r"^WRONGTYPE Operation against a key holding the wrong kind of value"):
        rl.hit("list", 10, 60)
    rl.client.set("text", "abc")
    with pytest.raises(RateLimitError, match="value is not an integer or out of range"):
        rl.hit("text", 10, 60)
    with pytest.raises(RateLimitError, match="window is too large"):
        rl.hit("k", 10, 2**62)
    assert rl.client.get("text") == b"abc" and rl.client.exists("k") == 0


def test_windows_laid_on_the_clock(rl: RateLimiter, backend: str) -> None:
    # Hour-long windows: one that ended between the call and the check would fail it.
    aligned = rl.hit("a", 10, 3600, align=True)
    assert rl.client.pexpiretime("a") % 3_600_000 == 0 and 0 < aligned.reset_after <= 3600 and aligned.window == 3600
    month = rl.hit("m", 10, "month", tz="+05:30")
    # The month ends at midnight at +05:30: 18:30 UTC.
    assert rl.client.pexpiretime("m") % 86_400_000 == 66_600_000
    assert month.window is None and "w=" not in month.headers()["RateLimit-Policy"]
    both = rl.hit_all(["{t}:m", "{t}:d"], [(5, 3600), (100, "day")], align=True)
    assert both.allowed and [d.remaining for d in both.decisions] == [4, 99]
    assert rl.client.pexpiretime("{t}:d") % 86_400_000 == 0
    if backend == "module":
        assert rl.hit("ny", 10, "day", tz="America/New_York").allowed
        return
    with pytest.raises(RateLimitError, match="named time zones need the module"):
        rl.hit("ny", 10, "day", tz="America/New_York")


def test_module_and_library_answer_alike(servers: dict[str, Server]) -> None:
    answers = []
    for name in ("module", "library"):
        servers[name].reset()
        rl = RateLimiter(servers[name].client())
        answers.append(
            [
                *(rl.hit("h", 3, 60, cost=2) for _ in range(3)),
                rl.peek("h", 3),
                *(rl.slide("s", 2, 60) for _ in range(3)),
                *(rl.gcra("g", 1, 1, 60) for _ in range(3)),
                *(rl.hit_all(["{x}a", "{x}b"], [(2, 60), (1, 60)]) for _ in range(2)),
                *(rl.acquire("l", 1, 60, id=f"id{i}") for i in range(2)),
                rl.refund_hit("h", 3, 60, amount=5),
                rl.reserve_slide("s2", 10, 60, cost=4).decision,
                rl.settle("s2", rl.reserve_slide("s2", 10, 60, cost=4).token or "", 1).decision,
                rl.gcra("g", 1, 1, 60, tokens=-1),
            ]
        )

    def shape(answer: Any) -> Any:
        if hasattr(answer, "decisions"):
            return answer.allowed, [shape(d) for d in answer.decisions]
        fields = ("allowed", "acquired", "count", "in_use", "remaining", "limit", "id")
        return tuple(getattr(answer, f) for f in fields if hasattr(answer, f))

    assert [shape(a) for a in answers[0]] == [shape(a) for a in answers[1]]


def test_the_backend_is_found_out_once_per_pool(server: Server) -> None:
    client = server.client()
    probes = []
    execute = client.execute_command

    def counting(*args: Any, **options: Any) -> Any:
        if args[:1] == ("RATELIMIT.PEEK",) and len(args) == 1:
            probes.append(args)
        return execute(*args, **options)

    client.execute_command = counting  # type: ignore[method-assign]
    for _ in range(3):
        RateLimiter(client).hit("k", 10, 60)
    assert len(probes) == 1


def test_without_the_library_and_not_allowed_to_load_it(servers: dict[str, Server]) -> None:
    servers["library"].reset()
    rl = RateLimiter(servers["library"].client(), load_library=False)
    with pytest.raises(LibraryNotLoaded, match="FUNCTION LOAD"):
        rl.hit("k", 10, 60)
    assert servers["library"].client().function_list() == []


def test_valkey_py_client(server: Server, backend: str) -> None:
    rl = RateLimiter(valkey.Valkey(port=server.port, decode_responses=True))
    assert rl.backend == backend
    assert rl.hit("v", 1, 60).allowed and not rl.hit("v", 1, 60).allowed
    assert rl.acquire("vl", 1, 10, id="x").id == "x"


def test_pipeline_answers_in_order_and_raises_after_all_ran(rl: RateLimiter) -> None:
    rl.client.rpush("list", "x")
    with rl.pipeline() as p:
        answers = p.hit("a", 1, 60).hit("a", 1, 60).slide("b", 5, 60).gcra("c", 1, 1, 1).execute()
    assert [a.allowed for a in answers] == [True, False, True, True]
    with rl.pipeline() as p:
        p.hit("list", 1, 60).hit("d", 1, 60)
        with pytest.raises(RateLimitError, match="WRONGTYPE"):
            p.execute()
    assert rl.client.get("d") == b"1"
    with rl.pipeline() as p:
        failed, done = p.hit("list", 1, 60).peek("d", 1).execute(raise_on_error=False)
    assert isinstance(failed, RateLimitError) and done.count == 1


def test_permit_is_renewed_while_the_block_runs_and_released_after(rl: RateLimiter) -> None:
    with rl.permit("jobs", limit=1, lease=0.3) as permit:
        time.sleep(1.0)  # three leases: only renewal keeps it
        assert not rl.acquire("jobs", 1, 10).acquired
        assert not permit.lost
    assert rl.client.exists("jobs") == 0
    assert rl.acquire("jobs", 1, 10).acquired


def test_permit_released_when_the_block_raises(rl: RateLimiter) -> None:
    with pytest.raises(KeyError), rl.permit("jobs", 1, 30):
        raise KeyError("boom")
    assert rl.client.exists("jobs") == 0


def test_permit_unavailable_says_when_one_frees_itself(rl: RateLimiter) -> None:
    rl.acquire("jobs", 1, 20, id="other")
    with pytest.raises(PermitUnavailable) as caught, rl.permit("jobs", 1, 30):
        pass
    assert 19 < caught.value.retry_after <= 20 and "frees itself" in str(caught.value)


def test_permit_waits_for_one_within_its_timeout(rl: RateLimiter) -> None:
    rl.acquire("jobs", 1, 0.2, id="short")
    with rl.permit("jobs", 1, 30, wait=True, timeout=5) as permit:
        assert permit.id and permit.id != "short"
    rl.acquire("jobs", 1, 30, id="long")
    started = time.monotonic()
    with pytest.raises(PermitUnavailable), rl.permit("jobs", 1, 30, wait=True, timeout=0.3):
        pass
    assert time.monotonic() - started >= 0.3


def test_permits_hold_the_limit_across_threads(rl: RateLimiter) -> None:
    inside = []
    most = []
    lock = threading.Lock()

    def work() -> None:
        with rl.permit("pool", 2, 5, wait=True, timeout=20):
            with lock:
                inside.append(1)
                most.append(len(inside))
            time.sleep(0.05)
            with lock:
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(most) == 6 and max(most) <= 2


def test_cluster_hit_all_keys_in_one_slot_or_refused_before_sending(cluster: Server, backend: str) -> None:
    client = redis.RedisCluster(host="127.0.0.1", port=cluster.port)
    rl = RateLimiter(client)
    assert rl.backend == backend
    assert rl.hit("c:1", 1, 60).allowed
    assert rl.hit_all(["rl:{u}:a", "rl:{u}:b"], [(1, 1), (2, 2)]).allowed
    with pytest.raises(RateLimitError, match="CROSSSLOT"):
        rl.hit_all(["rl:a", "rl:b"], [(1, 1), (2, 2)])
    assert client.exists("rl:a") == 0 and client.exists("rl:b") == 0
    with rl.pipeline() as p:
        assert [d.allowed for d in p.hit("c:1", 1, 60).slide("c:2", 1, 60).execute()] == [False, True]
    client.close()


def test_a_server_that_lost_the_library_gets_it_again(servers: dict[str, Server]) -> None:
    servers["library"].reset()
    rl = RateLimiter(servers["library"].client())
    assert rl.hit("k", 10, 60).count == 1
    rl.client.function_flush()  # as a restart without persistence would
    assert rl.hit("k", 10, 60).count == 2 and rl.backend == "library"
