"""The LiteLLM callback in the real LiteLLM proxy over HTTP (``litellm[proxy]``, no database), in
front of the tests' own OpenAI-compatible server (fake_openai.py), with the module and with the
library: 20 concurrent clients for three windows (a minute scaled down to 5 s), streaming and not.
Asserted: no window's admitted calls use more tokens than the model's ``tpm`` (each call's window
read from its reservation, which the callback sends the provider in a header), and its monthly
budget (``model_info: tokens_per_month``) counts exactly what they used; a denied call gets
429 with ``Retry-After`` and the RateLimit fields and never reaches the model; a call the model
fails gives its estimate back. Printed: the share of the limit used. Run in the ``litellm``
environment (requirements-litellm.txt); skipped elsewhere."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from servers import Server, free_port, wait_until

# The model prices LiteLLM fetches at import: its bundled copy instead (no network here).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("litellm")
import httpx  # a dependency of litellm's

WINDOW = 5.0
TPM = 6_000
MONTHLY = 10_000_000
HEADER = "x-ratelimit-reservation"
HERE = Path(__file__).resolve().parent
# The proxy refuses to start without a master key: the clients send it.
MASTER_KEY = "sk-" + "7f" * 32
AUTH = {"Authorization": f"Bearer {MASTER_KEY}"}


@contextmanager
def started(command: list[str], env: dict[str, str], ready: str, log: Path, status: int = 200) -> Iterator[None]:
    """A process of the test's own, until the block ends; ready when `ready` answers `status`."""
    with open(log, "wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:

        def answers() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited; see {log}")
            try:
                return httpx.get(ready, timeout=1).status_code == status
            except httpx.HTTPError:
                return False

        wait_until(answers, f"{command[0]} on {ready}", timeout=180)
        yield
    finally:
        process.terminate()
        process.wait(20)


@contextmanager
def proxy(server: Server, tmp_path: Path, ours: bool = True) -> Iterator[tuple[str, Path]]:
    """The LiteLLM proxy with the callback (or, not `ours`, with LiteLLM's own tpm limiting: its
    usage-based routing), in front of the fake model: its URL, and the fake's log of the calls
    it answered."""
    fake_port, proxy_port = free_port(), free_port()
    calls = tmp_path / "calls.jsonl"
    config = tmp_path / "config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: fake\n"
        "    litellm_params:\n"
        "      model: openai/fake\n"
        f"      api_base: http://127.0.0.1:{fake_port}/v1\n"
        "      api_key: none\n"
        f"      tpm: {TPM}\n"
        "      rpm: 10000\n"
        "    model_info:\n"
        f"      tokens_per_month: {MONTHLY}\n"
        "router_settings:\n"
        "  num_retries: 0\n"
        + ('litellm_settings:\n  callbacks: ["redis_ratelimit_client.litellm_callback.token_limits"]\n' if ours else "")
        + ("" if ours else "  routing_strategy: usage-based-routing-v2\n")
        + "general_settings:\n"
        f"  master_key: {MASTER_KEY}\n"
    )
    env = {
        **os.environ,
        "REDIS_URL": server.url(),
        "RATELIMIT_LITELLM_WINDOW": str(WINDOW),
        "RATELIMIT_LITELLM_RESERVATION_HEADER": HEADER,
        "LITELLM_LOG": "ERROR",
    }
    fake = [sys.executable, str(HERE / "fake_openai.py"), str(fake_port), str(calls)]
    litellm_cli = str(Path(sys.executable).parent / "litellm")
    serve = [litellm_cli, "--config", str(config), "--host", "127.0.0.1", "--port", str(proxy_port)]
    url = f"http://127.0.0.1:{proxy_port}"
    # The fake answers 404 where the proxy answers 200: either says it listens.
    with (
        started(fake, env, f"http://127.0.0.1:{fake_port}/", tmp_path / "fake.log", status=404),
        started(serve, env, f"{url}/health/liveliness", tmp_path / "proxy.log"),
    ):
        yield url, calls


async def load(url: str, clients: int, seconds: float, ours: bool = True) -> tuple[int, int, int]:
    """`clients` asking without pause for `seconds`: (admitted, denied, failed). Every denial by
    `ours` is checked. A call the proxy could not get answered (its connection to the model failed,
    on a machine this busy) counts as failed: the callback gives such a call's estimate back."""
    admitted = denied = failed = 0
    deadline = time.monotonic() + seconds

    async def client(seed: int) -> None:
        nonlocal admitted, denied, failed
        rng = random.Random(seed)
        async with httpx.AsyncClient(timeout=30, headers=AUTH) as http:
            while time.monotonic() < deadline:
                stream = rng.random() < 0.5
                content = f"use {rng.randint(50, 900)} delay {rng.randint(10, 40)}"
                body = {"model": "fake", "messages": [{"role": "user", "content": content}], "max_tokens": 1000}
                if stream:
                    body["stream"] = True
                reply = await http.post(f"{url}/v1/chat/completions", json=body)
                if reply.status_code == 429:
                    denied += 1
                    if ours:
                        assert int(reply.headers["retry-after"]) >= 1
                        assert "ratelimit-policy" in reply.headers and "ratelimit" in reply.headers
                    await asyncio.sleep(0.005)
                    continue
                if reply.status_code >= 500:
                    failed += 1
                    continue
                assert reply.status_code == 200, reply.text
                admitted += 1

    await asyncio.gather(*(client(i) for i in range(clients)))
    return admitted, denied, failed


def windows(calls: Path) -> dict[int, int]:
    """The tokens the answered calls used, per window of the model's tpm (its reservation's)."""
    used: dict[int, int] = {}
    for line in calls.read_text().splitlines():
        call = json.loads(line)
        entry = call["reservation"].split(",")[0]
        kind, limit, window_ms, end = entry.split(":")[:4]
        assert (kind, int(limit), int(window_ms)) == ("h", TPM, int(WINDOW * 1000)), entry
        used[int(end)] = used.get(int(end), 0) + call["used"]
    return used


# On the module: the callback on the Functions library is the SDK test's below, and the client's
# backends answer alike (its own tests); the proxy's load is what this one adds.
@pytest.mark.parametrize("backend", ["module"])
def test_the_proxy_holds_the_models_tpm_in_every_window(server: Server, tmp_path: Path) -> None:
    with proxy(server, tmp_path) as (url, calls):
        admitted, denied, failed = asyncio.run(load(url, 20, 3 * WINDOW))
        per_window = windows(calls)
        shares = " ".join(f"{used / TPM:.2f}" for _, used in sorted(per_window.items()))
        print(f"\n20 clients, {admitted} admitted, {denied} denied, {failed} failed; per window, x tpm: {shares}")
        answered = len(calls.read_text().splitlines())
        assert denied > 0 and admitted > 0 and admitted <= answered <= admitted + failed, (
            "a denied call reached the model"
        )
        assert all(used <= TPM for used in per_window.values()), per_window
        # The monthly budget held beside it: every call's tokens once settled (in one month).
        month, total = "rl:llm:{llm}:model:fake:tokens-per-month", sum(per_window.values())
        wait_until(lambda: int(server.client().get(month) or 0) == total, f"the month to count {total}", timeout=30)
        # A call the model fails gives its estimate back (checked while its window runs).
        key = "rl:llm:{llm}:model:fake:tpm"
        for _ in range(3):
            time.sleep(WINDOW)
            sent = time.monotonic()
            failed = httpx.post(
                f"{url}/v1/chat/completions",
                json={"model": "fake", "messages": [{"role": "user", "content": "fail"}], "max_tokens": 1000},
                headers=AUTH,
                timeout=30,
            )
            assert failed.status_code >= 500
            wait_until(lambda: server.client().get(key) in (b"0", None), "the failed call's refund", timeout=10)
            if time.monotonic() - sent < WINDOW:
                assert server.client().get(key) == b"0"
                break
        else:
            pytest.fail("no failed call could be checked within its window")
        # A client that goes away after the first chunk of a slow stream: settled with the prompt
        # and what was streamed, not the estimate (1,000 and more) nor what the model would report.
        for _ in range(3):
            time.sleep(WINDOW)
            sent = time.monotonic()
            slow = {"role": "user", "content": "use 800 chunkdelay 1000"}
            body = {"model": "fake", "messages": [slow], "max_tokens": 1000, "stream": True}
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=AUTH, timeout=30) as reply:
                next(reply.iter_lines())
            wait_until(lambda: int(server.client().get(key) or 0) < 100, "the stream's settle", timeout=10)
            if time.monotonic() - sent < WINDOW:
                assert 0 < int(server.client().get(key) or 0) < 100
                break
        else:
            pytest.fail("no stream left early could be checked within its window")
        # A call that can never fit (max_tokens above a whole window's tpm): the client's error, no
        # Retry-After that would invite a retry, and the limit that refused it named.
        never = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "fake", "messages": [{"role": "user", "content": "use 10"}], "max_tokens": TPM + 1},
            headers=AUTH,
            timeout=30,
        )
        assert never.status_code == 400 and "retry-after" not in never.headers, (never.status_code, never.headers)
        assert never.headers["ratelimit"].startswith('"model:fake:tpm"') and "can never fit" in never.text, never.text


@pytest.mark.skipif(
    os.environ.get("RATELIMIT_LITELLM_COMPARISON") != "1", reason="a measurement of LiteLLM's own, for make bench"
)
def test_litellms_own_tpm_limit_under_the_same_load_for_comparison(tmp_path: Path) -> None:
    """The same load through LiteLLM's own tpm limiting without a database (usage-based routing
    on the deployment's ``tpm``, counted per clock minute once a call is done): its tokens per
    minute, printed beside ours. It proves nothing of this package, so `make bench` runs it
    (RATELIMIT_LITELLM_COMPARISON=1), not `make test`."""
    server = Server(module=False)
    try:
        with proxy(server, tmp_path, ours=False) as (url, calls):
            admitted, denied, _ = asyncio.run(load(url, 20, 3 * WINDOW, ours=False))
            per_minute: dict[int, int] = {}
            for line in calls.read_text().splitlines():
                call = json.loads(line)
                per_minute[int(call["t"] // 60)] = per_minute.get(int(call["t"] // 60), 0) + call["used"]
        shares = " ".join(f"{used / TPM:.2f}" for _, used in sorted(per_minute.items()))
        print(f"\nLiteLLM's own: {admitted} admitted, {denied} denied; tokens per clock minute, x tpm: {shares}")
        assert admitted > 0 and admitted <= len(calls.read_text().splitlines())
    finally:
        server.close()


async def test_from_the_sdk_the_limits_given_hold_and_a_denied_call_never_runs(server: Server, tmp_path: Path) -> None:
    """From the SDK (``litellm.callbacks``, no proxy): a model's limits given to the callback,
    reserved before the call and settled with its usage; a call that does not fit raises LiteLLM's
    RateLimitError before the model runs, one that never can its BadRequestError."""
    import litellm
    import redis.asyncio

    from redis_ratelimit_client.litellm_callback import TokenLimits

    fake_port, calls = free_port(), tmp_path / "calls.jsonl"
    fake = [sys.executable, str(HERE / "fake_openai.py"), str(fake_port), str(calls)]
    client = redis.asyncio.Redis(port=server.port)
    # A prefix of its own: LiteLLM keeps one callback of a kind and settings per process.
    prefix = f"rl:{server.port}:"
    callback = TokenLimits(client, limits={"openai/fake": {"tpm": 3_000, "rpm": 100}}, prefix=prefix)
    ask = {"model": "openai/fake", "api_base": f"http://127.0.0.1:{fake_port}/v1", "api_key": "none"}
    key = prefix + "{llm}:model:openai/fake:tpm"
    with started(fake, dict(os.environ), f"http://127.0.0.1:{fake_port}/", tmp_path / "fake.log", status=404):
        litellm.callbacks = [callback]
        try:
            reply = await litellm.acompletion(**ask, messages=[{"role": "user", "content": "use 300"}], max_tokens=1000)
            assert reply.usage.total_tokens == 305
            for _ in range(200):
                if await client.get(key) == b"305":
                    break
                await asyncio.sleep(0.05)
            assert await client.get(key) == b"305"
            # Fits a window, not what is left of this one: LiteLLM's rate-limit error, naming tpm.
            with pytest.raises(litellm.RateLimitError, match=r"rate limit exceeded: .*tpm"):
                await litellm.acompletion(**ask, messages=[{"role": "user", "content": "use 10"}], max_tokens=2_800)
            # Above a whole window: no wait helps, so the caller's error.
            with pytest.raises(litellm.BadRequestError, match=r"can never fit .*tpm"):
                await litellm.acompletion(**ask, messages=[{"role": "user", "content": "use 10"}], max_tokens=5_000)
            assert await client.get(key) == b"305" and len(calls.read_text().splitlines()) == 1
        finally:
            litellm.callbacks = []
            await client.aclose()


async def test_a_deployments_adaptive_limits_learn_from_the_providers_answers(server: Server, tmp_path: Path) -> None:
    """Through a Router (as the proxy routes), a deployment's limits of requests and tokens start at
    its rpm and tpm; a call's tokens are reserved as estimated (prompt and max_tokens) and
    settled with its usage; a provider's 429 with a Retry-After cuts both once and holds every
    caller (the next call never reaches the provider); a stated limit caps them."""
    import litellm
    import redis.asyncio

    from redis_ratelimit_client.litellm_adaptive import AdaptiveLimits

    fake_port, calls = free_port(), tmp_path / "calls.jsonl"
    fake = [sys.executable, str(HERE / "fake_openai.py"), str(fake_port), str(calls)]
    client = redis.asyncio.Redis(port=server.port)
    prefix = f"rl:{server.port}:adaptive:"
    callback = AdaptiveLimits(client, prefix=prefix)
    params = {"model": "openai/fake", "api_base": f"http://127.0.0.1:{fake_port}/v1", "api_key": "none"}
    deployment = {
        "model_name": "fake",
        "litellm_params": {**params, "rpm": 600, "tpm": 100_000},
        "model_info": {"id": "d1"},
    }
    router = litellm.Router(model_list=[deployment], num_retries=0)

    async def field(counts: str, at: int) -> int:
        state = (await client.get(f"{prefix}{{d1}}:{counts}") or b"").decode()
        return int(state.split(":")[at]) if state else 0

    async def limit_of(counts: str) -> int:
        return await field(counts, 4)

    async def ask(content: str) -> Any:
        return await router.acompletion(model="fake", messages=[{"role": "user", "content": content}], max_tokens=100)

    with started(fake, dict(os.environ), f"http://127.0.0.1:{fake_port}/", tmp_path / "fake.log", status=404):
        litellm.callbacks = [callback]
        try:
            await ask("use 10")
            assert (await limit_of("requests"), await limit_of("tokens")) == (600, 100_000)
            # The epoch's use of tokens is what the call used (the fake's 5 of prompt and 10), not
            # its estimate (the prompt and max_tokens, 100).
            for _ in range(200):
                if await field("tokens", 8) == 15:
                    break
                await asyncio.sleep(0.05)
            assert await field("tokens", 8) == 15
            with pytest.raises(litellm.RateLimitError):
                await ask("throttle 20")
            for _ in range(200):
                if await limit_of("requests") == 420:
                    break
                await asyncio.sleep(0.05)
            assert (await limit_of("requests"), await limit_of("tokens")) == (420, 70_000)
            # Held by the 429's Retry-After: refused here, the provider never asked.
            with pytest.raises(litellm.RateLimitError, match="adaptive limit of requests"):
                await ask("use 10")
            assert len(calls.read_text().splitlines()) == 2
            # Past the hold, a provider that states a lower limit caps the fleet's.
            await client.delete(f"{prefix}{{d1}}:requests", f"{prefix}{{d1}}:tokens")
            await ask("use 10 stated 50")
            for _ in range(200):
                if await limit_of("requests") == 50:
                    break
                await asyncio.sleep(0.05)
            assert await limit_of("requests") == 50
        finally:
            litellm.callbacks = []
            await client.aclose()


async def test_the_adaptive_callbacks_pending_calls_are_bounded(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_PENDING calls decided and not yet answered, the oldest is dropped: its answer,
    when it comes, teaches nothing (a call that never ends holds no memory for ever)."""
    import litellm
    import redis.asyncio

    from redis_ratelimit_client import litellm_adaptive

    monkeypatch.setattr(litellm_adaptive, "MAX_PENDING", 3)
    client = redis.asyncio.Redis(port=server.port)
    prefix = f"rl:{server.port}:pending:"
    callback = litellm_adaptive.AdaptiveLimits(client, prefix=prefix)
    throttled = litellm.RateLimitError(message="429", llm_provider="openai", model="fake")

    def call(i: int) -> dict[str, Any]:
        messages = [{"role": "user", "content": "hi"}]
        return {"model_info": {"id": "d9"}, "rpm": 600, "litellm_call_id": f"c{i}", "messages": messages}

    async def limit() -> int:
        return int((await client.get(f"{prefix}{{d9}}:requests") or b"").decode().split(":")[4])

    try:
        for i in range(5):
            await callback.async_pre_call_deployment_hook(call(i), "completion")
        await callback.async_log_failure_event({**call(0), "exception": throttled}, None, None, None)
        assert await limit() == 600, "the oldest call was dropped: its 429 teaches nothing"
        await callback.async_log_failure_event({**call(2), "exception": throttled}, None, None, None)
        assert await limit() == 420
    finally:
        await client.aclose()


async def test_a_server_out_of_reach_lets_calls_through_or_refuses_them(caplog: pytest.LogCaptureFixture) -> None:
    """Fail open (the default) lets the call through and says so; fail closed refuses it with 503."""
    import types

    import redis.asyncio
    from fastapi import HTTPException

    from redis_ratelimit_client.litellm_callback import TokenLimits

    # A server that ran, then stopped.
    gone = Server(module=False)
    gone.close()
    nowhere = redis.asyncio.Redis(port=gone.port, socket_connect_timeout=1, retry_on_timeout=False)
    data = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "litellm_call_id": "c1"}
    key = types.SimpleNamespace()
    opened = TokenLimits(nowhere, limits={"fake": {"tpm": 1_000}})
    assert await opened.async_pre_call_hook(key, None, dict(data), "acompletion") is not None
    assert "rate limits not applied: the server is out of reach" in caplog.text
    closed = TokenLimits(nowhere, limits={"fake": {"tpm": 1_000}}, fail_open=False)
    with pytest.raises(HTTPException) as refused:
        await closed.async_pre_call_hook(key, None, dict(data), "acompletion")
    assert refused.value.status_code == 503
    await nowhere.aclose()


async def test_calls_that_never_end_hold_nothing_for_ever(server: Server) -> None:
    """A call admitted and never ended (no success, no failure, no stream's end) holds its
    reservation until its window ends, and at most ``max_open`` are held: the oldest are dropped
    unsettled, their estimates counted still (the safe side)."""
    import types

    import redis.asyncio

    from redis_ratelimit_client.litellm_callback import TokenLimits

    client = redis.asyncio.Redis(port=server.port)
    prefix = f"rl:never:{server.port}:"
    callback = TokenLimits(client, limits={"fake": {"tpm": 1_000_000}}, window=1, max_open=3, prefix=prefix)
    key = types.SimpleNamespace()
    tpm = prefix + "{llm}:model:fake:tpm"

    def call(i: int) -> dict[str, object]:
        message = {"role": "user", "content": "hi"}
        return {"model": "fake", "messages": [message], "max_tokens": 10, "litellm_call_id": f"c{i}"}

    try:
        await callback.async_pre_call_hook(key, None, call(0), "acompletion")
        estimate = int(await client.get(tpm))
        for i in range(1, 5):
            await callback.async_pre_call_hook(key, None, call(i), "acompletion")
        assert (callback.open_reservations, callback.dropped_reservations) == (3, 2)
        assert int(await client.get(tpm)) == 5 * estimate
        # Once their window has ended (1 s), the next admitted call finds them so and drops them.
        await asyncio.sleep(1.2)
        await callback.async_pre_call_hook(key, None, call(5), "acompletion")
        assert (callback.open_reservations, callback.dropped_reservations) == (1, 5)
    finally:
        await client.aclose()
