// @fastify/rate-limit with the package's fastifyStore, and the package's own Fastify plugin, in
// real Fastify servers over HTTP, against real servers with the module and with the library.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fastifyRateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { fastifyStore, header, rateLimitPlugin } from 'redis-ratelimit';
import { get, statuses } from './http.js';
import { KINDS, Server } from './servers.js';

for (const kind of KINDS) {
  describe(`Fastify with the ${kind}`, () => {
    let server: Server;
    let redis: Redis;
    const apps: FastifyInstance[] = [];
    before(async () => {
      server = await Server.start(kind);
      redis = new Redis(server.port, '127.0.0.1');
    });
    after(async () => {
      for (const app of apps) await app.close();
      redis.disconnect();
      await server.stop();
    });

    async function serve(setUp: (app: FastifyInstance) => Promise<void>): Promise<string> {
      const app = Fastify();
      apps.push(app);
      await setUp(app);
      return app.listen({ port: 0, host: '127.0.0.1' });
    }

    test('@fastify/rate-limit with fastifyStore counts every request, per route, in windows that expire', async () => {
      const prefix = `frl-${kind}-`;
      const url = await serve(async (app) => {
        await app.register(fastifyRateLimit, { max: 2, timeWindow: 60_000, store: fastifyStore(redis, { prefix }) });
        app.get('/a', () => 'a');
        app.get('/b', { config: { rateLimit: { max: 1, timeWindow: 30_000 } } }, () => 'b');
      });
      assert.deepEqual(await statuses(`${url}/a`, 3), [200, 200, 429]);
      const denied = await get(`${url}/a`);
      assert.equal(denied.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(denied.headers.get('retry-after')) > 50);
      assert.equal(await redis.get(`${prefix}127.0.0.1`), '4');
      const ttl = await redis.pttl(`${prefix}127.0.0.1`);
      assert.ok(ttl > 50_000 && ttl <= 60_000, `the window expires (${String(ttl)} ms)`);
      assert.deepEqual(await statuses(`${url}/b`, 2), [200, 429]);
      const routeKey = `${prefix}GET/b-127.0.0.1`;
      assert.equal(await redis.get(routeKey), '2', 'the route counts under its own key');
      const routeTtl = await redis.pttl(routeKey);
      assert.ok(routeTtl > 20_000 && routeTtl <= 30_000);
      const Store = fastifyStore(redis, { prefix });
      const read = await new Promise((resolve, reject) => {
        new Store().read('127.0.0.1', (error, result) => (error ? reject(error) : resolve(result)));
      });
      assert.equal((read as { current: number }).current, 4, 'read counts nothing');
      assert.equal(await redis.get(`${prefix}127.0.0.1`), '4');
    });

    test("fastifyStore refuses what it cannot do (continueExceeding)", async () => {
      const app = Fastify();
      apps.push(app);
      await assert.rejects(async () => {
        await app.register(fastifyRateLimit, { max: 2, timeWindow: 1_000, continueExceeding: true, store: fastifyStore(redis) });
      }, /has no continueExceeding/);
    });

    describe('rateLimitPlugin', () => {
      let url: string;
      let release: (() => void) | undefined;
      before(async () => {
        url = await serve(async (app) => {
          await app.register(rateLimitPlugin, {
            client: redis,
            key: header('x-api-key'),
            prefix: `fp-${kind}:`,
            rules: [
              { sliding: { limit: 2, windowMs: 60_000 }, path: '/limited', name: 'api' },
              { inFlight: { limit: 1, leaseMs: 1_500 }, path: '/slow', name: 'slow' },
            ],
          });
          app.get('/limited', () => 'ok');
          app.get('/free', () => 'ok');
          app.get('/slow', async (_request, reply) => {
            await new Promise<void>((resolve) => (release = resolve));
            return reply.send('done');
          });
        });
      });

      test('denies with 429 and the RateLimit fields, and leaves other paths alone', async () => {
        const who = { 'x-api-key': 'fastify-user' };
        assert.deepEqual(await statuses(`${url}/limited`, 3, who), [200, 200, 429]);
        const denied = await get(`${url}/limited`, who);
        assert.equal(denied.body, 'Too Many Requests\n');
        assert.match(denied.headers.get('ratelimit') ?? '', /^"api";r=0;t=\d+$/);
        assert.equal(denied.headers.get('ratelimit-policy'), '"api";q=2;w=60');
        assert.ok(Number(denied.headers.get('retry-after')) > 0);
        assert.deepEqual(await statuses(`${url}/free`, 5, who), [200, 200, 200, 200, 200]);
        const counted = await redis.get(`fp-${kind}:{api:fastify-user}`);
        assert.ok(counted !== null && (await redis.pttl(`fp-${kind}:{api:fastify-user}`)) > 0, 'one key, with an expiry');
      });

      test('inFlight holds the permit for the request, past its lease, and gives it back after', async () => {
        const who = { 'x-api-key': 'slow-user' };
        const first = fetch(`${url}/slow`, { headers: who });
        for (let i = 0; i < 200 && release === undefined; i++) await sleep(10);
        await sleep(2_000);
        assert.equal((await get(`${url}/slow`, who)).status, 429);
        release?.();
        assert.equal((await first).status, 200);
        for (let i = 0; i < 100 && (await redis.zcard(`fp-${kind}:{slow:slow-user}`)) > 0; i++) await sleep(20);
        assert.equal(await redis.zcard(`fp-${kind}:{slow:slow-user}`), 0);
      });
    });
  });
}

test('Fastify fails open when the server goes away under traffic, and limits again once it is back', async () => {
  const server = await Server.start('module');
  const redis = new Redis(server.port, '127.0.0.1', { retryStrategy: () => 50, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  const app = Fastify();
  await app.register(rateLimitPlugin, { client: redis, rules: [{ fixed: { limit: 1_000, windowMs: 60_000 } }], timeoutMs: 300, retryIntervalMs: 200, onOutage: () => undefined });
  app.get('/', () => 'ok');
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    assert.ok((await get(url)).headers.has('ratelimit'));
    await server.down();
    const during = await Promise.all([get(url), get(url), get(url)]);
    assert.deepEqual(during.map((r) => [r.status, r.headers.has('ratelimit')]), [[200, false], [200, false], [200, false]]);
    await server.up();
    // Back within the client's reconnection: 10 s here, so that a stalled machine does not fail it.
    let answer = await get(url);
    for (let i = 0; i < 100 && !answer.headers.has('ratelimit'); i++) {
      await sleep(100);
      answer = await get(url);
    }
    assert.ok(answer.headers.has('ratelimit'), 'limited again');
  } finally {
    await app.close();
    redis.disconnect();
    await server.stop();
  }
});
