// Runs the middleware against a real redis-server with the module and real HTTP requests.
// REDIS_SERVER and RATELIMIT_MODULE say which server and module to use (make test sets them).

const { test, before, after } = require('node:test');
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

let redisServer;
let redis;
let http;
let baseUrl;
let dir;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ratelimit-node-'));
  const port = await freePort();
  redisServer = spawn(process.env.REDIS_SERVER || 'redis-server', [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir,
    '--loadmodule', process.env.RATELIMIT_MODULE,
  ], { stdio: 'ignore' });
  redis = new Redis({ port, lazyConnect: true, retryStrategy: (times) => (times > 50 ? null : 50) });
  for (let i = 0; ; i++) {
    try {
      await redis.connect();
      break;
    } catch (err) {
      if (i > 50) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const app = express();
  app.use(rateLimit(redis, { limit: 3, window: 60 }));
  app.get('/', (req, res) => res.send('hello\n'));
  await new Promise((resolve) => {
    http = app.listen(0, '127.0.0.1', resolve);
  });
  baseUrl = `http://127.0.0.1:${http.address().port}/`;
});

after(async () => {
  await new Promise((resolve) => http.close(resolve));
  redis.disconnect();
  redisServer.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

const get = (apiKey) => fetch(baseUrl, { headers: { 'X-Api-Key': apiKey } });

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

test('each client has its own budget', async () => {
  for (let i = 0; i < 3; i++) assert.equal((await get('bob')).status, 200);
  assert.equal((await get('bob')).status, 429);
  assert.equal((await get('carol')).status, 200);
});
