// express-rate-limit with the package's RedisStore, and the package's own Express middleware, in
// real Express apps over HTTP, against real servers with the module and with the library.

import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';
import { rateLimit } from 'express-rate-limit';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { header, rateLimitMiddleware, RedisStore, type Rule } from 'redis-ratelimit';
import { get, listen, statuses, type Listening } from './http.js';
import { KINDS, Server } from './servers.js';

for (const kind of KINDS) {
  describe(`Express with the ${kind}`, () => {
    let server: Server;
    let redis: Awaited<ReturnType<typeof connect>>;
    let io: Redis;
    const connect = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect();
    const apps: Listening[] = [];
    before(async () => {
      server = await Server.start(kind);
      redis = await connect(server.port);
      io = new Redis(server.port, '127.0.0.1');
    });
    after(async () => {
      for (const app of apps) await app.close();
      await redis.close();
      io.disconnect();
      await server.stop();
    });

    async function serve(setUp: (app: express.Express) => void): Promise<string> {
      const app = express();
      setUp(app);
      app.get('/ok', (_req, res) => res.send('ok'));
      app.get('/fail', (_req, res) => res.status(500).send('no'));
      const listening = await listen(createServer(app));
      apps.push(listening);
      return listening.url;
    }

    describe('RedisStore under express-rate-limit', () => {
      for (const [name, store] of [
        ['node-redis sendCommand', () => new RedisStore({ sendCommand: (...args: string[]) => redis.sendCommand(args), prefix: `erl-a-${kind}:` })],
        ['ioredis call', () => new RedisStore({ sendCommand: (command: string, ...args: string[]) => io.call(command, ...args), prefix: `erl-b-${kind}:` })],
        ['a client', () => new RedisStore({ client: io, prefix: `erl-c-${kind}:` })],
      ] as const) {
        test(`${name}: counts every request in a window that expires, as express-rate-limit expects`, async () => {
          const made = store();
          const url = await serve((app) => app.use(rateLimit({ windowMs: 60_000, limit: 2, store: made, standardHeaders: 'draft-8', legacyHeaders: false })));
          assert.deepEqual(await statuses(`${url}/ok`, 4), [200, 200, 429, 429]);
          const key = `${made.prefix}127.0.0.1`;
          assert.equal(await redis.get(key), '4', 'denied requests count too, as express-rate-limit decides by the count');
          const ttl = await redis.pTTL(key);
          assert.ok(ttl > 50_000 && ttl <= 60_000, `the window expires (${String(ttl)} ms)`);
          const denied = await get(`${url}/ok`);
          assert.match(denied.headers.get('ratelimit') ?? '', /r=0; *t=(59|60)/);
          assert.equal((await made.get('127.0.0.1'))?.totalHits, 5);
          await made.resetKey('127.0.0.1');
          assert.equal(await made.get('127.0.0.1'), undefined);
          assert.equal((await get(`${url}/ok`)).status, 200);
        });
      }

      test('decrement gives back a failed request (skipFailedRequests), never below 0', async () => {
        const store = new RedisStore({ client: redis, prefix: `erl-skip-${kind}:` });
        const url = await serve((app) => app.use(rateLimit({ windowMs: 60_000, limit: 1, store, skipFailedRequests: true })));
        assert.deepEqual(await statuses(`${url}/fail`, 3), [500, 500, 500]);
        // The give-back runs after the response: wait until it has landed.
        for (let i = 0; i < 100 && (await redis.get('erl-skip-' + kind + ':127.0.0.1')) !== '0'; i++) await sleep(20);
        assert.equal(await redis.get(`erl-skip-${kind}:127.0.0.1`), '0');
        assert.ok((await redis.pTTL(`erl-skip-${kind}:127.0.0.1`)) > 0, 'the give-back keeps the expiry');
        await store.decrement('nobody');
        assert.equal(await redis.exists(`erl-skip-${kind}:nobody`), 0, 'a give-back creates no key');
      });

      test('calls sendCommand with `this` the store, as rate-limit-redis does', async () => {
        const seen: unknown[] = [];
        const store = new RedisStore({
          sendCommand: function (this: RedisStore, ...args: string[]) {
            seen.push(this);
            return redis.sendCommand(args);
          },
          prefix: `erl-this-${kind}:`,
        });
        const url = await serve((app) => app.use(rateLimit({ windowMs: 60_000, limit: 1, store })));
        assert.deepEqual(await statuses(`${url}/ok`, 2), [200, 429]);
        assert.ok(seen.length >= 2 && seen.every((self) => self === store), 'every call has the store as this');
      });

      test('takes exactly one of sendCommand, sendCommandCluster or client', () => {
        assert.throws(() => new RedisStore({}), /takes one of sendCommand, sendCommandCluster or client/);
      });
    });

    describe('rateLimitMiddleware', () => {
      const rules: Rule[] = [
        { fixed: { limit: 2, windowMs: 60_000 }, path: '/fixed' },
        { sliding: { limit: 2, windowMs: 60_000 }, path: '/sliding', name: 'sliding' },
        { gcra: { maxBurst: 1, tokensPerPeriod: 1, periodMs: 60_000 }, path: '/gcra', name: 'gcra' },
        { allOf: [{ limit: 2, windowMs: 1_000 }, { limit: 3, windowMs: 3_600_000 }], path: '/all', name: 'all' },
        { inFlight: { limit: 1, leaseMs: 1_500 }, path: '/slow', name: 'slow' },
      ];
      let url: string;
      const releases: (() => void)[] = [];
      before(async () => {
        url = await serve((app) => {
          app.use(rateLimitMiddleware({ client: redis, rules, key: header('x-api-key'), prefix: `mw-${kind}:` }));
          for (const path of ['/fixed', '/sliding', '/gcra', '/all']) app.get(path, (_req, res) => res.send('ok'));
          app.get('/slow', (_req, res) => {
            res.write('started\n');
            releases.push(() => res.end('done\n'));
          });
        });
      });

      test('each limiter denies with 429, Retry-After and the RateLimit fields, and a denied request writes nothing', async () => {
        for (const path of ['/fixed', '/sliding', '/gcra']) {
          const who = { 'x-api-key': `${path}-user` };
          assert.deepEqual(await statuses(`${url}${path}`, 3, who), [200, 200, 429], path);
          const denied = await get(`${url}${path}`, who);
          assert.equal(denied.status, 429);
          assert.ok(Number(denied.headers.get('retry-after')) > 0, path);
          assert.match(denied.headers.get('ratelimit') ?? '', /;r=0;t=\d+$/);
          assert.match(denied.headers.get('ratelimit-policy') ?? '', /;q=2;w=60$/);
        }
        assert.equal(await redis.get(`mw-${kind}:{default:/fixed-user}`), '2', 'the denied requests counted nothing');
      });

      test('allOf denies when one limit is spent, counting none', async () => {
        const who = { 'x-api-key': 'all-user' };
        assert.deepEqual(await statuses(`${url}/all`, 3, who), [200, 200, 429]);
        assert.equal(await redis.get(`mw-${kind}:{all:all-user}:1`), '2', 'the hourly limit counted only the admitted');
        const answer = await get(`${url}/all`, who);
        assert.match(answer.headers.get('ratelimit-policy') ?? '', /"all-0";q=2;w=1, "all-1";q=3;w=3600/);
      });

      test('inFlight holds a permit while the response streams, past its lease, then gives it back', async () => {
        const who = { 'x-api-key': 'streamer' };
        const first = await fetch(`${url}/slow`, { headers: who });
        assert.equal(first.status, 200);
        // Longer than the 1.5 s lease: the permit is renewed (every 0.5 s) while the response is open.
        await sleep(2_000);
        assert.equal((await fetch(`${url}/slow`, { headers: who })).status, 429);
        releases.shift()?.();
        assert.equal(await first.text(), 'started\ndone\n');
        for (let i = 0; i < 100 && (await redis.zCard(`mw-${kind}:{slow:streamer}`)) > 0; i++) await sleep(20);
        assert.equal(await redis.zCard(`mw-${kind}:{slow:streamer}`), 0, 'released when the response ended');
        const again = await fetch(`${url}/slow`, { headers: who });
        assert.equal(again.status, 200);
        releases.shift()?.();
        await again.text();
      });
    });
  });
}

describe('Express when the server goes away under traffic', () => {
  for (const failOpen of [true, false]) {
    test(failOpen ? 'fails open: requests are admitted, then limited again once it is back' : 'fails closed: 503 with Retry-After', async () => {
      const server = await Server.start('module');
      const redis = await createClient({ socket: { host: '127.0.0.1', port: server.port, reconnectStrategy: () => 50 } }).connect();
      redis.on('error', () => undefined);
      const outages: unknown[] = [];
      const app = express();
      app.use(rateLimitMiddleware({ client: redis, rules: [{ fixed: { limit: 1_000, windowMs: 60_000 } }], failOpen, timeoutMs: 300, retryIntervalMs: 200, onOutage: (e: unknown) => outages.push(e) }));
      app.get('/', (_req, res) => res.send('ok'));
      const http = await listen(createServer(app));
      try {
        assert.equal((await get(http.url)).status, 200);
        await server.down();
        const during = await statuses(http.url, 5);
        assert.deepEqual(during, Array<number>(5).fill(failOpen ? 200 : 503));
        if (!failOpen) assert.equal((await get(http.url)).headers.get('retry-after'), '1');
        await server.up();
        // Back within the client's reconnection: 10 s here, so that a stalled machine does not fail it.
        let answer = await get(http.url);
        for (let i = 0; i < 100 && !answer.headers.has('ratelimit'); i++) {
          await sleep(100);
          answer = await get(http.url);
        }
        assert.equal(answer.status, 200);
        assert.ok(answer.headers.has('ratelimit'), 'limited again');
        assert.ok(outages.length >= 2 && outages[0] instanceof Error && outages.at(-1) === null, 'told when it went and when it came back');
      } finally {
        await http.close();
        await redis.close().catch(() => undefined);
        await server.stop();
      }
    });
  }
});
