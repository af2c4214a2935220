"""`make bench`'s run of the adaptive limit through LiteLLM: 3 LiteLLM proxies on one server with
the module, each with ``litellm_adaptive.adaptive_limits`` in its config.yaml, routing one
deployment to the fake provider of ``adaptive_fleet`` (a hidden capacity of 600 calls a minute,
then halved, then tripled; it states 1,200 and its remaining). Callers (8 per proxy) send chat
completions to the proxies; a call a proxy refuses with its adaptive limit is retried when the
refusal says, a provider's 429 the proxy passes on is backed off as the SDKs do. The same proxies
without the callback (LiteLLM's own handling: its cooldowns, each proxy alone) for comparison.

Figures per phase, at the provider, as ``adaptive_fleet``'s: 429s, use, what followed the change
of capacity; and Jain's index of the calls answered per proxy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import redis
from adaptive_fleet import PHASES, STATED, TABLE_HEAD, Bucket, phase_rows, provider, sdk_backoff, table_rows
from measuring import arguments, progress, server_name, write_report
from servers import Server, free_port

PROXIES, CALLERS = 3, 8
KEY = "sk-bench"
RETRY_IN = re.compile(r"retry in ([0-9.]+) s")


def config(provider_port: int, ours: bool) -> str:
    """A proxy's config.yaml: one deployment at the fake provider, its rpm the account's stated
    limit (the adaptive limit's ceiling and start), a tpm beside it (reserved and settled)."""
    deployment = {
        "model_name": "fake",
        "litellm_params": {
            "model": "openai/fake",
            "api_base": f"http://127.0.0.1:{provider_port}/v1",
            "api_key": "none",
            "rpm": STATED,
            "tpm": 1_000_000,
            "max_retries": 0,
        },
        "model_info": {"id": "fake-east"},
    }
    settings: dict[str, Any] = {
        "model_list": [deployment],
        "router_settings": {"num_retries": 0},
        "general_settings": {"master_key": KEY},
    }
    if ours:
        settings["litellm_settings"] = {"callbacks": ["redis_ratelimit_client.litellm_adaptive.adaptive_limits"]}
    return json.dumps(settings)  # YAML reads JSON


def start_proxies(folder: Path, redis_port: int, provider_port: int, ours: bool) -> list[tuple[int, Any]]:
    """The proxies, started together and waited for (each answers its liveliness check)."""
    (folder / "config.yaml").write_text(config(provider_port, ours))
    litellm = Path(sys.executable).parent / "litellm"
    env = {**os.environ, "REDIS_URL": f"redis://127.0.0.1:{redis_port}"}
    started = []
    for i in range(PROXIES):
        port = free_port()
        log = open(folder / f"proxy-{i}.log", "w")  # noqa: SIM115 (closed with the process)
        command = [str(litellm), "--config", str(folder / "config.yaml"), "--port", str(port), "--num_workers", "1"]
        started.append((port, subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder)))
    deadline = time.monotonic() + 180
    for port, process in started:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health/liveliness", timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a LiteLLM proxy did not start: see {folder}") from None
                time.sleep(0.5)
    return started


def caller(port: int, until: float, answered: list[float]) -> None:
    """One caller of one proxy until `until` (time.monotonic()), the times of its answered calls."""
    body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10}).encode()
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}
    backoff = 0
    while (now := time.monotonic()) < until:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/chat/completions", body, headers)
        try:
            urllib.request.urlopen(request, timeout=30).read()
            answered.append(now)
            backoff = 0
            continue
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            status = e.code
        except OSError:
            time.sleep(0.5)
            continue
        told = RETRY_IN.search(text)
        if status == 429 and told:
            # The fleet's limit refused it, and said when its turn comes.
            time.sleep(min(float(told.group(1)), max(until - time.monotonic(), 0)) + 0.001)
        else:
            # The provider's 429 (or another error) passed on: backed off as the SDKs do.
            time.sleep(sdk_backoff(now, backoff))
            backoff += 1


def run(redis_port: int, phase_s: float, ours: bool) -> list[dict[str, Any]]:
    redis.Redis(port=redis_port).flushall()
    with tempfile.TemporaryDirectory(prefix="adaptive-proxies-") as folder:
        bucket = Bucket(time.monotonic())
        http = provider(bucket, phase_s)
        proxies = start_proxies(Path(folder), redis_port, http.server_address[1], ours)
        try:
            bucket.begin(time.monotonic())  # the phases start once every proxy answers
            until = bucket.start + phase_s * len(PHASES)
            answered: list[list[float]] = [[] for _ in proxies]
            threads = [
                threading.Thread(target=caller, args=(port, until, answered[i]))
                for i, (port, _) in enumerate(proxies)
                for _ in range(CALLERS)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            for _, process in proxies:
                process.terminate()
            for _, process in proxies:
                process.wait(timeout=30)
            http.shutdown()
    return phase_rows(bucket, phase_s, answered)


def main() -> None:
    args = arguments(__doc__ or "")
    phase_s = 10.0 if args.quick else 30.0
    server = Server(module=True, binary=args.servers[0], module_path=args.module)
    try:
        name = server_name(redis.Redis(port=server.port))
        results = {}
        for label, ours in (("ours (adaptive_limits)", True), ("LiteLLM alone", False)):
            progress(f"{PROXIES} LiteLLM proxies, {label}: {len(PHASES)} phases of {phase_s:.0f} s")
            results[label] = run(server.port, phase_s, ours)
    finally:
        server.close()
    lines = [
        f"# The adaptive limit through LiteLLM, a real run ({name}, {PROXIES} proxies, {CALLERS} callers "
        f"each, phases of {phase_s:.0f} s)",
        "",
        f"| proxies | {TABLE_HEAD} | Jain (per proxy) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    write_report([*lines, *table_rows(results), ""], args.out, args.quick, "the adaptive limit's LiteLLM run")


if __name__ == "__main__":
    main()
