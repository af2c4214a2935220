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
const { rateLimit, inFlight } = require('./ratelimit');

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
    let inflightUrl;
    let inflightHttp;
    let shortUrl;
    let shortHttp;
    const holds = new Map(); // X-Hold value -> a resolve function the /slow request waits for

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
      // In flight: leases of a minute (a permit back early was given back, not expired), and
      // leases of a second, which a stream of two seconds must renew.
      const routes = (app) => {
        app.get('/slow', async (req, res) => {
          await new Promise((resolve) => holds.set(req.get('X-Hold'), resolve));
          res.send('done\n');
        });
        app.get('/boom', async () => {
          throw new Error('the handler failed');
        });
        app.get('/stream', (req, res) => {
          let left = Number(req.query.n || 1);
          const timer = setInterval(() => {
            if (left-- > 0) return res.write('x'.repeat(1024));
            clearInterval(timer);
            res.end();
          }, 50);
          res.on('close', () => clearInterval(timer));
        });
        return app;
      };
      const listen = (app) => new Promise((resolve) => {
        const server = app.listen(0, '127.0.0.1', () => resolve(server));
      });
      const longLeases = express();
      longLeases.use(inFlight(redis, { limit: 2, lease: 60 }));
      inflightHttp = await listen(routes(longLeases));
      inflightUrl = `http://127.0.0.1:${inflightHttp.address().port}/`;
      const shortLeases = express();
      shortLeases.use(inFlight(redis, { limit: 2, lease: 1, prefix: 'short:' }));
      shortHttp = await listen(routes(shortLeases));
      shortUrl = `http://127.0.0.1:${shortHttp.address().port}/`;
    });

    after(async () => {
      await new Promise((resolve) => http.close(resolve));
      await new Promise((resolve) => slidingHttp.close(resolve));
      for (const server of [inflightHttp, shortHttp]) {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
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

    // Waits (bounded) until `condition` resolves true.
    async function until(condition, what, ms = 10000) {
      const deadline = Date.now() + ms;
      while (!(await condition())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }

    test('in flight: at most the limit, then 429', async () => {
      const slow = ['a', 'b'].map((hold) =>
        fetch(`${inflightUrl}slow`, { headers: { 'X-Api-Key': 'alice', 'X-Hold': hold } }));
      await until(async () => (await redis.zcard('inflight:alice')) === 2, 'two requests in flight');
      const denied = await fetch(inflightUrl + 'stream', { headers: { 'X-Api-Key': 'alice' } });
      assert.equal(denied.status, 429);
      // Retry-After: when the earliest permit's lease (a minute) ends, at the latest.
      assert.ok([58, 59, 60].includes(Number(denied.headers.get('retry-after'))));
      const other = await fetch(inflightUrl + 'stream', { headers: { 'X-Api-Key': 'bob' } });
      assert.equal(other.status, 200, 'each client has its own permits');
      await other.text();
      for (const hold of ['a', 'b']) holds.get(hold)();
      assert.deepEqual((await Promise.all(slow)).map((r) => r.status), [200, 200]);
      await until(async () => (await redis.zcard('inflight:alice')) === 0, 'both permits given back');
    });

    test('in flight: the permit is given back when the handler fails', async () => {
      const res = await fetch(inflightUrl + 'boom', { headers: { 'X-Api-Key': 'carol' } });
      assert.equal(res.status, 500);
      await until(async () => (await redis.zcard('inflight:carol')) === 0, 'the permit back after a failure');
    });

    test('in flight: the permit is given back when the client goes away', async () => {
      const socket = net.connect(inflightHttp.address().port, '127.0.0.1');
      socket.write('GET /stream?n=1000 HTTP/1.1\r\nHost: x\r\nX-Api-Key: dave\r\n\r\n');
      await new Promise((resolve) => socket.once('data', resolve));
      assert.equal(await redis.zcard('inflight:dave'), 1);
      socket.destroy();
      // Well before its minute's lease could end.
      await until(async () => (await redis.zcard('inflight:dave')) === 0, 'the permit back after the client left');
    });

    test('in flight: a long stream renews its lease', async () => {
      const streaming = fetch(shortUrl + 'stream?n=40', { headers: { 'X-Api-Key': 'erin' } });
      await until(async () => (await redis.zcard('short:erin')) === 1, 'the stream\'s permit');
      // 1.5 s into a stream of 2 s, past its first 1-second lease: renewed, still held.
      await new Promise((r) => setTimeout(r, 1500));
      const [, expiry] = await redis.zrange('short:erin', 0, -1, 'WITHSCORES');
      const [seconds, micros] = await redis.time();
      assert.ok(Number(expiry) > Number(seconds) * 1000 + Math.floor(Number(micros) / 1000), 'the lease was renewed');
      const res = await streaming;
      assert.equal((await res.text()).length, 40 * 1024);
      await until(async () => (await redis.zcard('short:erin')) === 0, 'the permit back after the stream');
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
