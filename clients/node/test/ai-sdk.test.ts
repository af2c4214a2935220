// tokenLimitMiddleware in the AI SDK (`ai`'s wrapLanguageModel, generateText and streamText, over
// the SDK's own mock model), with the module and with the library: requests and tokens decided
// together, each call settled with the usage the model reports (a stream's at its finish part, or
// what was streamed when the reader stopped), a failed call settled at 0, a denied one thrown as a
// 429 before the model runs, a stopped server letting calls through or refusing them; and under 20
// concurrent calls, the tokens of the admitted calls never pass the limit. And
// adaptiveLimitMiddleware: the provider's answers teach the fleet's limits, a held call never
// reaches the model.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { APICallError, generateText, simulateReadableStream, streamText, wrapLanguageModel } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { createClient } from 'redis';
import { adaptiveLimitMiddleware, LimitExceededError, RateLimitedError, tokenLimitMiddleware, type ModelLimit } from 'redis-ratelimit';
import { KINDS, Server } from './servers.js';

type Node = Awaited<ReturnType<typeof connect>>;
const connect = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect();

const usage = (input: number, output: number) => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});
const STOP = { unified: 'stop' as const, raw: 'stop' };

/** A model answering `text` and reporting `input + output` tokens, after `delayMs`. */
function model(input: number, output: number, delayMs = 0) {
  return new MockLanguageModelV4({
    doGenerate: async () => {
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return { content: [{ type: 'text', text: 'fine' }], finishReason: STOP, usage: usage(input, output), warnings: [] };
    },
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: 'stream-start' as const, warnings: [] },
          { type: 'text-start' as const, id: 't' },
          ...Array.from({ length: 10 }, () => ({ type: 'text-delta' as const, id: 't', delta: 'abcdefgh' })),
          { type: 'text-end' as const, id: 't' },
          { type: 'finish' as const, finishReason: STOP, usage: usage(input, output) },
        ],
        chunkDelayInMs: delayMs,
      }),
    }),
  });
}

const LIMITS: ModelLimit[] = [
  { counts: 'requests', limit: 100, windowMs: 60_000, name: 'rpm' },
  { counts: 'tokens', limit: 10_000, windowMs: 60_000, name: 'tpm' },
  { counts: 'tokens', limit: 1_000_000, calendar: 'month', name: 'tpmonth' },
];

let serial = 0;

for (const kind of KINDS) {
  describe(`the AI SDK middlewares with the ${kind}`, () => {
    let server: Server;
    let client: Node;
    before(async () => {
      server = await Server.start(kind);
      client = await connect(server.port);
    });
    after(async () => {
      await client.close();
      await server.stop();
    });
    const counts = async (who: string) => (await client.mGet(['rpm', 'tpm', 'tpmonth'].map((n) => `rl:ai:{${who}}:${n}`))).map(Number);

    test('a call counts its estimate, then what the model reports', async () => {
      const who = `g${String(++serial)}`;
      const middleware = tokenLimitMiddleware({ client, limits: LIMITS, key: who });
      const wrapped = wrapLanguageModel({ model: model(120, 380), middleware });
      const reply = await generateText({ model: wrapped, prompt: 'say something', maxOutputTokens: 2_000 });
      assert.equal(reply.text, 'fine');
      assert.deepEqual(await counts(who), [1, 500, 500]);
      // Streamed: settled with the finish part's usage.
      const stream = streamText({ model: wrapLanguageModel({ model: model(100, 200), middleware }), prompt: 'more', maxOutputTokens: 2_000 });
      assert.equal((await stream.text).length, 80);
      assert.deepEqual(await counts(who), [2, 800, 800]);
    });

    test('a stream left early settles what was streamed, a failed call gives all back', async () => {
      const who = `s${String(++serial)}`;
      const middleware = tokenLimitMiddleware({ client, limits: LIMITS, key: who, estimate: () => 3_000 });
      // The middleware's stream read as a consumer that stops after two text parts.
      const { stream } = await middleware.wrapStream({
        doStream: () => model(100, 200).doStream({ prompt: [] }),
        params: { prompt: [{ role: 'user', content: [{ type: 'text', text: 'x'.repeat(40) }] }] },
      });
      const reader = stream.getReader();
      let texts = 0;
      while (texts < 2) {
        const { value } = await reader.read();
        if (value?.type === 'text-delta') texts++;
      }
      await reader.cancel();
      // 40 characters of prompt and 16 streamed, at 4 a token: not the estimate, nor the model's 300.
      assert.deepEqual(await counts(who), [1, 14, 14]);
      const failing = new MockLanguageModelV4({
        doGenerate: () => Promise.reject(new Error('the model is down')),
      });
      await assert.rejects(generateText({ model: wrapLanguageModel({ model: failing, middleware }), prompt: 'x', maxRetries: 0 }), /the model is down/);
      assert.deepEqual(await counts(who), [2, 14, 14]);
    });

    test('a denied call is a 429 before the model runs, and counts nothing', async () => {
      const who = `d${String(++serial)}`;
      const middleware = tokenLimitMiddleware({ client, limits: LIMITS, key: who, estimate: () => 6_000 });
      const ran = model(1, 5_999);
      const wrapped = wrapLanguageModel({ model: ran, middleware });
      await generateText({ model: wrapped, prompt: 'x' });
      await assert.rejects(generateText({ model: wrapped, prompt: 'x', maxRetries: 0 }), (error: unknown) => {
        const cause: unknown = error instanceof LimitExceededError ? error : (error as { lastError?: unknown }).lastError;
        assert.ok(cause instanceof LimitExceededError, String(error));
        assert.equal(cause.statusCode, 429);
        assert.ok(cause.retryAfterMs > 0 && cause.retryAfterMs <= 60_000);
        assert.match(cause.headers['RateLimit-Policy'] ?? '', /"tpm";q=10000;w=60/);
        // The limit that refused, not rpm, which has fewer left but admitted.
        assert.match(cause.headers.RateLimit ?? '', /^"tpm";r=4000;/);
        assert.match(cause.message, /rate limited by tpm:/);
        assert.ok(Number(cause.headers['Retry-After']) >= 1);
        return true;
      });
      assert.equal(ran.doGenerateCalls.length, 1);
      assert.deepEqual(await counts(who), [1, 6_000, 6_000]);
    });

    test('a call that can never fit is a 400 without Retry-After, naming the limit', async () => {
      const who = `n${String(++serial)}`;
      const middleware = tokenLimitMiddleware({ client, limits: LIMITS, key: who, estimate: () => 10_001 });
      const ran = model(1, 1);
      await assert.rejects(generateText({ model: wrapLanguageModel({ model: ran, middleware }), prompt: 'x', maxRetries: 0 }), (error: unknown) => {
        const cause: unknown = error instanceof LimitExceededError ? error : (error as { lastError?: unknown }).lastError;
        assert.ok(cause instanceof LimitExceededError, String(error));
        assert.equal(cause.statusCode, 400);
        assert.equal(cause.retryAfterMs, Infinity);
        assert.equal(cause.headers['Retry-After'], undefined);
        assert.match(cause.headers.RateLimit ?? '', /^"tpm";/);
        assert.match(cause.message, /can never fit tpm:/);
        return true;
      });
      assert.equal(ran.doGenerateCalls.length, 0);
      assert.deepEqual(await counts(who), [0, 0, 0]);
    });

    test('with the server stopped, calls go through (fail open) or are refused (fail closed), told to onError', async () => {
      const gone = await Server.start(kind);
      const lost = createClient({ socket: { host: '127.0.0.1', port: gone.port, reconnectStrategy: false }, disableOfflineQueue: true });
      lost.on('error', () => undefined);
      await lost.connect();
      await gone.down();
      const told: unknown[] = [];
      const open = tokenLimitMiddleware({ client: lost, limits: LIMITS, key: 'gone', onError: (e) => told.push(e) });
      const reply = await generateText({ model: wrapLanguageModel({ model: model(1, 1), middleware: open }), prompt: 'x' });
      assert.equal(reply.text, 'fine');
      assert.equal(told.length, 1);
      const closed = tokenLimitMiddleware({ client: lost, limits: LIMITS, key: 'gone', failOpen: false, onError: (e) => told.push(e) });
      const ran = model(1, 1);
      await assert.rejects(generateText({ model: wrapLanguageModel({ model: ran, middleware: closed }), prompt: 'x', maxRetries: 0 }));
      assert.equal(ran.doGenerateCalls.length, 0, 'refused before the model ran');
      await gone.stop();
    });

    test('20 concurrent calls never use more tokens than the limit', async () => {
      const who = `c${String(++serial)}`;
      const limit = 20_000;
      const limits: ModelLimit[] = [{ counts: 'tokens', limit, windowMs: 60_000, name: 'tpm' }];
      const middleware = tokenLimitMiddleware({ client, limits, key: who });
      let used = 0;
      let denied = 0;
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          for (let call = 0; call < 5; call++) {
            const output = 100 + ((i * 37 + call * 101) % 1_900);
            const wrapped = wrapLanguageModel({ model: model(10, output, 2), middleware });
            try {
              await generateText({ model: wrapped, prompt: 'go', maxOutputTokens: 2_000, maxRetries: 0 });
              used += 10 + output;
            } catch {
              denied++;
            }
          }
        }),
      );
      const counted = Number(await client.get(`rl:ai:{${who}}:tpm`));
      console.log(`20 clients, 100 calls: ${String(100 - denied)} admitted using ${String(used)} tokens, ${(used / limit).toFixed(2)} of the limit`);
      assert.ok(used <= limit, `${String(used)} tokens used under a limit of ${String(limit)}`);
      assert.equal(counted, used, 'every admitted call settled to what it used');
      assert.ok(denied > 0 && used > limit / 2);
    });

    test("the provider's answers teach the fleet's limits, and a held call never reaches the model", async () => {
      const key = `acct${String(++serial)}`;
      const field = async (measure: string, at: number) => Number((await client.get(`${key}:{${key}}:${measure}`))?.split(':')[at]);
      const limitOf = (measure: string) => field(measure, 4);
      let calls = 0;
      let throttled = false;
      const provider = new MockLanguageModelV4({
        doGenerate: async () => {
          calls += 1;
          if (throttled) {
            const headers = { 'retry-after': '20' };
            throw new APICallError({ message: 'Too Many Requests', url: 'http://provider', requestBodyValues: {}, statusCode: 429, responseHeaders: headers, isRetryable: true });
          }
          const response = { headers: { 'x-ratelimit-limit-requests': '50' } };
          return { content: [{ type: 'text', text: 'fine' }], finishReason: STOP, usage: usage(5, 5), warnings: [], response };
        },
      });
      const middleware = adaptiveLimitMiddleware({
        client,
        key,
        requests: { floor: 6, start: 60, ceiling: 600 },
        tokens: { floor: 1_000, start: 90_000, ceiling: 450_000 },
      });
      const model = wrapLanguageModel({ model: provider, middleware });
      // Every command's words in the server's slow log: each answer is reported with the call's age (AGE).
      await client.configSet('slowlog-log-slower-than', '0');
      await client.sendCommand(['SLOWLOG', 'RESET']);
      await generateText({ model, prompt: 'hi', maxOutputTokens: 100, maxRetries: 0 });
      const logged = (await client.sendCommand(['SLOWLOG', 'GET', '128'])) as [number, number, number, string[]][];
      await client.configSet('slowlog-log-slower-than', '10000');
      const reported = logged.map((entry) => entry[3].join(' ')).filter((c) => /^(RATELIMIT\.REPORT|FCALL ratelimit_report) /.test(c));
      assert.ok(reported.length === 2 && reported.every((c) => / AGE \d+$/.test(c)), reported.join('; '));
      assert.deepEqual([await limitOf('requests'), await limitOf('tokens')], [50, 90_000], 'the stated limit caps the requests');
      assert.equal(await field('tokens', 8), 10, "the epoch's use of tokens is the usage, not the estimate of 100 more");
      throttled = true;
      await assert.rejects(generateText({ model, prompt: 'hi', maxOutputTokens: 100, maxRetries: 0 }), /Too Many Requests/);
      assert.deepEqual([await limitOf('requests'), await limitOf('tokens')], [35, 63_000], 'one 429: both cut once');
      await assert.rejects(generateText({ model, prompt: 'hi', maxOutputTokens: 100, maxRetries: 0 }), (error: unknown) => {
        const e = (error as { cause?: unknown }).cause ?? error;
        return e instanceof RateLimitedError && e.retryAfterMs > 19_000;
      });
      assert.equal(calls, 2, 'held by the Retry-After: the third call never reached the model');
    });
  });
}
