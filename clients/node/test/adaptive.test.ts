// The adaptive limit from Node: the providers' answers read as every client reads them
// (testkit/conformance/provider_answers.json), the calls on a real server (the module's and the
// library's), and the wrapper around real HTTP calls to a provider that answers 429s.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'redis';
import { AdaptiveLimit, commands, goDuration, RateLimitedError, RateLimiter, RateLimitError, readAnswer } from 'redis-ratelimit';
import { KINDS, Server } from './servers.js';

interface AnswerCase {
  name: string;
  status: number | null;
  now?: string;
  headers: Record<string, string>;
  throttled: boolean;
  retry_after_ms: number | null;
  requests: (number | null)[];
  tokens: (number | null)[];
}

const CASES = JSON.parse(readFileSync(new URL('../provider_answers.json', import.meta.url), 'utf8')) as AnswerCase[];

for (const c of CASES) {
  test(`a provider's answer reads as every client reads it: ${c.name}`, () => {
    const answer = readAnswer(c.status, c.headers, Date.parse(c.now ?? '2026-12-01T12:00:00Z'));
    const ms = (v: number | null) => (v === null ? null : Math.round(v));
    assert.equal(answer.throttled, c.throttled);
    assert.equal(ms(answer.retryAfterMs), c.retry_after_ms);
    for (const measure of ['requests', 'tokens'] as const) {
      const s = answer[measure];
      assert.deepEqual([s.limit, s.remaining, ms(s.resetAfterMs)], c[measure], measure);
    }
  });
}

test('Go durations', () => {
  assert.deepEqual(['6m0s', '1.5h', '.5s', '250us', '1h2m3.5s'].map(goDuration), [360_000, 5_400_000, 500, 0.25, 3_723_500]);
  assert.deepEqual(['', '5', '1d', '-1s', 's', '1s2'].map(goDuration), [null, null, null, null, null, null]);
});

test('bad terms are refused before a round trip', () => {
  const terms = { floor: 10, start: 5, ceiling: 100, windowMs: 60_000 };
  assert.throws(() => commands.adapt('k', terms), new RateLimitError('floor <= start <= ceiling must hold'));
  assert.throws(() => commands.adapt('k', { ...terms, floor: 1, ceiling: 2 ** 40 }), new RateLimitError('ceiling * window is too large'));
  assert.throws(() => commands.report('k', 'ok', { retryAfterMs: 1 }), new RateLimitError('syntax error: RETRY needs THROTTLED'));
  assert.throws(() => commands.report('k', 'ok', { remaining: 3 }), new RateLimitError('syntax error: REMAINING needs RESET'));
  assert.deepEqual(commands.adapt('k', { floor: 1, start: 2, ceiling: 3, windowMs: 1_500, cost: 2 }).args, [1, 2, 3, 1_500, 'MS', 'COST', 2]);
});

for (const kind of KINDS) {
  describe(`with the ${kind}`, () => {
    let server: Server;
    let provider: HttpServer;
    let calls = 0;
    const clients: { close(): Promise<unknown> }[] = [];
    const limiter = async () => {
      const client = await createClient({ socket: { host: '127.0.0.1', port: server.port } }).connect();
      clients.push(client);
      return new RateLimiter(client);
    };
    before(async () => {
      server = await Server.start(kind);
      // A provider whose capacity is 3 calls: then 429 with a Retry-After of 1 s.
      provider = createServer((_, res) => {
        calls += 1;
        const over = calls > 3;
        res.writeHead(over ? 429 : 200, { 'x-ratelimit-limit-requests': '100', ...(over ? { 'retry-after': '1' } : {}) });
        res.end('{}');
      });
      await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    });
    after(async () => {
      for (const client of clients) await client.close();
      provider.close();
      await server.stop();
    });

    test('the callers learn one limit', async () => {
      const fleet = await Promise.all([0, 1, 2, 3].map(async () => new AdaptiveLimit(await limiter(), 'llm', { floor: 6, start: 60, ceiling: 600 })));
      let admitted = 0;
      for (const limit of fleet) for (let i = 0; i < 5; i++) if ((await limit.decide()).allowed) admitted += 1;
      assert.equal(admitted, 10); // a sixth of 60 at once, whoever asks
      const learned = [];
      for (const limit of fleet) learned.push(await limit.report(429, { 'retry-after': '20' }));
      assert.deepEqual(learned.map((l) => [l?.limit, l?.decreased]), [[42, true], [42, false], [42, false], [42, false]]);
      assert.ok(learned[0] && learned[0].holdMs > 19_900 && learned[0].holdMs <= 20_000);
      const denied = await fleet[2]!.decide();
      assert.ok(!denied.allowed && denied.retryAfterMs !== null && denied.retryAfterMs > 19_900);
      assert.equal(await (await limiter()).report('nobody', 'throttled', { retryAfterMs: 5_000 }), null);
    });

    test('an estimate is reserved and settled with what was used', async () => {
      const limit = new AdaptiveLimit(await limiter(), 'tokens', { floor: 600, start: 6_000, ceiling: 60_000, measure: 'tokens' });
      const r = await limit.reserve(1_000);
      assert.ok(r.decision.allowed && r.token !== null && r.amount === 1_000 && r.decision.remaining === 0);
      // 300 used: the 700 unused back in the fleet's bucket, once; a retry applies nothing again.
      const s = await limit.settle(r, 300);
      assert.deepEqual([s.applied, s.decision.limit, s.decision.windowMs], [-700, 6_000, 60_000]);
      assert.ok(s.decision.remaining >= 700);
      assert.equal((await limit.settle(r, 300)).applied, -700);
      let denied = await limit.reserve(1_000);
      while (denied.decision.allowed) denied = await limit.reserve(1_000);
      assert.equal(denied.token, null);
      await assert.rejects(limit.settle(denied, 0), /no reservation/);
    });

    test('the wrapper reports what the call returned or threw', async () => {
      const limit = new AdaptiveLimit(await limiter(), 'wrapped', { floor: 1, start: 600, ceiling: 1_000 });
      const url = `http://127.0.0.1:${String((provider.address() as AddressInfo).port)}/v1/chat/completions`;
      const send = async () => {
        const res = await fetch(url, { method: 'POST', body: '{}' });
        await res.text();
        if (res.status === 429) throw Object.assign(new Error('429'), { status: res.status, headers: res.headers });
        return res;
      };
      calls = 0;
      for (let i = 0; i < 3; i++) assert.equal((await limit.call(send)).status, 200);
      await assert.rejects(limit.call(send), /429/);
      const held = await limit.decide();
      // The provider stated 100: the limit came down to it, then the cut took it to 70.
      assert.ok(!held.allowed && held.limit === 70 && held.retryAfterMs !== null && held.retryAfterMs > 900);
      await assert.rejects(limit.call(send, { maxWaitMs: 0 }), RateLimitedError);
      calls = 0;
      // Waited out, then asked again at the turn the denial told (TURN; the server's slow log keeps
      // every command's words).
      const admin = await createClient({ socket: { host: '127.0.0.1', port: server.port } }).connect();
      clients.push(admin);
      await admin.configSet('slowlog-log-slower-than', '0');
      await admin.sendCommand(['SLOWLOG', 'RESET']);
      assert.equal((await limit.call(send, { maxWaitMs: 5_000 })).status, 200);
      const logged = (await admin.sendCommand(['SLOWLOG', 'GET', '128'])) as [number, number, number, string[]][];
      await admin.configSet('slowlog-log-slower-than', '10000');
      const words = logged.reverse().map((entry) => entry[3].join(' '));
      const asked = words.filter((c) => c.startsWith('RATELIMIT.ADAPT') || c.startsWith('FCALL ratelimit_adapt'));
      assert.ok(asked.length >= 2 && !asked[0]!.endsWith(' TURN'), asked.join('; '));
      assert.ok(asked.slice(1).every((c) => c.endsWith(' TURN')), asked.join('; '));
      // Its answer reported with the call's age: the ms since it was admitted (AGE).
      const reported = words.filter((c) => c.startsWith('RATELIMIT.REPORT') || c.startsWith('FCALL ratelimit_report'));
      assert.ok(reported.length === 1 && / AGE \d+$/.test(reported[0]!), reported.join('; '));
    });
  });
}
