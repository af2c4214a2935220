// The package under test is the installed tarball (node_modules/redis-ratelimit), whole: both
// builds, the type declarations, and the Functions library embedded.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as esm from 'redis-ratelimit';

const require = createRequire(import.meta.url);

test('the ESM build is the installed copy, with its declarations', () => {
  const entry = fileURLToPath(import.meta.resolve('redis-ratelimit'));
  assert.match(entry, /node_modules\/redis-ratelimit\/dist\/esm\/index\.js$/);
  assert.ok(existsSync(join(dirname(entry), 'index.d.ts')));
  assert.equal(typeof esm.RateLimiter, 'function');
});

test('the CommonJS build answers require()', () => {
  assert.match(require.resolve('redis-ratelimit'), /node_modules\/redis-ratelimit\/dist\/cjs\/index\.js$/);
  const cjs = require('redis-ratelimit') as typeof esm;
  assert.equal(typeof cjs.RateLimiter, 'function');
  assert.deepEqual(cjs.commands.hit('k', { limit: 1, windowMs: 1_000 }).args, [1, 1_000, 'MS']);
});

test('the Functions library is embedded', () => {
  assert.match(esm.LIBRARY_SOURCE, /^#!lua name=ratelimit/);
});
