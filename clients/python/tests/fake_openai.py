"""An OpenAI-compatible chat completions server of the tests' own, for LiteLLM's proxy to call: the
last message says what the answer reports (``use 730``: 730 completion tokens; ``delay 20``: after
20 ms; ``chunkdelay 500``: a stream's chunks 500 ms apart; ``fail``: HTTP 500; ``throttle 20``: HTTP
429 with a Retry-After of 20 s; ``stated 50``: OpenAI's ``x-ratelimit-limit-requests: 50``), streamed or not,
always with its usage. Every call it answers is
written as a JSON line to the log file: when, the tokens it reports, and the reservation header
the proxy's callback sent (``x-ratelimit-reservation``).

    python fake_openai.py PORT LOG"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

PROMPT_TOKENS = 5
LOG: list[Any] = []


def number(text: str, name: str, default: int) -> int:
    found = re.search(rf"\b{name} (\d+)", text)
    return int(found.group(1)) if found else default


def asked(body: dict[str, Any]) -> tuple[int, int, int, bool]:
    text = str((body.get("messages") or [{}])[-1].get("content", ""))
    return number(text, "use", 10), number(text, "delay", 0), number(text, "chunkdelay", 0), "fail" in text


def provider_says(body: dict[str, Any]) -> tuple[int, dict[str, str]]:
    """A 429's Retry-After asked for (0: none), and the limit headers to state."""
    text = str((body.get("messages") or [{}])[-1].get("content", ""))
    stated = number(text, "stated", 0)
    return number(text, "throttle", 0), {"x-ratelimit-limit-requests": str(stated)} if stated else {}


async def completions(request: Request) -> Response:
    body = await request.json()
    completion, delay_ms, chunk_delay_ms, fail = asked(body)
    throttle, headers = provider_says(body)
    await asyncio.sleep(delay_ms / 1000)
    if fail:
        return JSONResponse({"error": {"message": "the model failed", "type": "server_error"}}, status_code=500)
    if throttle:
        with open(LOG[0], "a", encoding="utf-8") as log:
            log.write(json.dumps({"t": time.time(), "used": 0, "status": 429}) + "\n")
        error = {"error": {"message": "rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
        return JSONResponse(error, status_code=429, headers={"retry-after": str(throttle), **headers})
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": completion,
        "total_tokens": PROMPT_TOKENS + completion,
    }
    record = {
        "t": time.time(),
        "used": usage["total_tokens"],
        "reservation": request.headers.get("x-ratelimit-reservation"),
    }
    with open(LOG[0], "a", encoding="utf-8") as log:
        log.write(json.dumps({**record, "stream": bool(body.get("stream"))}) + "\n")
    base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body.get("model", "fake")}
    if not body.get("stream"):
        message = {"role": "assistant", "content": "ok " * 4}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return JSONResponse({**base, "object": "chat.completion", "choices": [choice], "usage": usage}, headers=headers)

    async def chunks() -> AsyncIterator[str]:
        for i in range(4):
            if i:
                await asyncio.sleep(chunk_delay_ms / 1000)
            delta = {"role": "assistant", "content": "ok "} if i == 0 else {"content": "ok "}
            chunk = {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
            yield f"data: {json.dumps(chunk)}\n\n"
        done = {"index": 0, "delta": {}, "finish_reason": "stop"}
        yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [done]})}\n\n"
        yield f"data: {json.dumps({**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage})}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


app = Starlette(
    routes=[Route(path, completions, methods=["POST"]) for path in ("/v1/chat/completions", "/chat/completions")]
)

if __name__ == "__main__":
    port, LOG[:] = int(sys.argv[1]), [sys.argv[2]]
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
