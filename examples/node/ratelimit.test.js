// Runs the middleware against a real redis-server and real HTTP requests: with the module, and
// without it (the middleware then loads and calls the Functions library).
// REDIS_SERVER and RATELIMIT_MODULE say which server and module to use (make test sets them).

const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const express = require('express');
const Redis = require('ioredis');
const { rateLimit } = require('./ratelimit');

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

// Resolves once something accepts connections on `port` (the server has started).
async function listening(port) {
  for (let i = 0; i < 200; i++) {
    const up = await new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => resolve(socket.end() && true));
      socket.on('error', () => resolve(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

for (const withModule of [true, false]) {
  describe(withModule ? 'with the module' : 'with the Functions library', () => {
    let redisServer;
    let redis;
    let http;
    let slidingHttp;
    let baseUrl;
    let dir;
    let limiter;
    let slidingUrl;

    before(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelimit-node-'));
      const port = await freePort();
      const module = withModule ? ['--loadmodule', process.env.RATELIMIT_MODULE] : [];
      redisServer = spawn(process.env.REDIS_SERVER || 'redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, ...module,
      ], { stdio: 'ignore' });
      await listening(port);
      redis = new Redis({ port, lazyConnect: true });
      await redis.connect();
      const app = express();
      limiter = rateLimit(redis, { limit: 3, window: 60 });
      app.use(limiter);
      app.get('/', (req, res) => res.send('hello\n'));
      await new Promise((resolve) => {
        http = app.listen(0, '127.0.0.1', resolve);
      });
      baseUrl = `http://127.0.0.1:${http.address().port}/`;
      // A sliding window of 10^9 s: the one that holds now began in 2001, so no test crosses into
      // the next.
      const sliding = express();
      sliding.use(rateLimit(redis, { limit: 3, window: 1e9, prefix: 'rl:s:', algorithm: 'sliding' }));
      sliding.get('/', (req, res) => res.send('hello\n'));
      await new Promise((resolve) => {
        slidingHttp = sliding.listen(0, '127.0.0.1', resolve);
      });
      slidingUrl = `http://127.0.0.1:${slidingHttp.address().port}/`;
    });

    after(async () => {
      await new Promise((resolve) => http.close(resolve));
      await new Promise((resolve) => slidingHttp.close(resolve));
      redis.disconnect();
      redisServer.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    });

    const get = (apiKey, url = baseUrl) => fetch(url, { headers: { 'X-Api-Key': apiKey } });

    test('admits up to the limit, then answers 429 with Retry-After', async () => {
      const statuses = [];
      for (const expectedRemaining of [2, 1, 0]) {
        const res = await get('alice');
        statuses.push(res.status);
        assert.equal(res.headers.get('ratelimit-policy'), '"default";q=3;w=60');
        assert.match(res.headers.get('ratelimit'), new RegExp(`^"default";r=${expectedRemaining};t=(59|60)$`));
      }
      const denied = await get('alice');
      statuses.push(denied.status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      // Retry-After is reset_ms rounded up to whole seconds: the window's remaining life (read
      // again here a moment later, so it may have crossed a second).
      const ttlSeconds = Math.ceil((await redis.pttl('rl:alice')) / 1000);
      assert.ok([ttlSeconds, ttlSeconds + 1].includes(Number(denied.headers.get('retry-after'))));
      assert.equal(await redis.get('rl:alice'), '3', 'denied requests do not count');
    });

    test('the sliding window answers 429 with its exact retry', async () => {
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get('erin', slidingUrl)).status);
      const denied = await get('erin', slidingUrl);
      statuses.push(denied.status);
      assert.deepEqual(statuses, [200, 200, 200, 429]);
      assert.equal(await redis.get('rl:s:erin'), 'slide:1000000000000:1000000000000:0:3');
      // 3 of 3 in this window: one more fits once the next one has let a third go, which is the
      // key's PTTL less 2/3 of a window (read a moment later: it may have crossed a second).
      const retrySeconds = Math.ceil(((await redis.pttl('rl:s:erin')) - 666666666666) / 1000);
      const retryAfter = Number(denied.headers.get('retry-after'));
      assert.ok([retrySeconds, retrySeconds + 1].includes(retryAfter), `${retryAfter} vs ${retrySeconds}`);
      assert.equal(denied.headers.get('ratelimit'), `"default";r=0;t=${retryAfter}`);
      assert.throws(() => rateLimit(redis, { limit: 3, window: 60, algorithm: 'leaky' }), /algorithm/);
    });

    test('each client has its own budget', async () => {
      for (let i = 0; i < 3; i++) assert.equal((await get('bob')).status, 200);
      assert.equal((await get('bob')).status, 429);
      assert.equal((await get('carol')).status, 200);
    });

    test('uses the module where loaded, else the library', async () => {
      await get('dave');
      assert.equal(limiter.usesModule(), withModule);
      const libraries = await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit');
      assert.equal(libraries.length > 0, !withModule);
    });
  });
}
