// Express middlewares over redis-ratelimit. `rateLimit` limits requests per window with
// RATELIMIT.HIT (a fixed window), or RATELIMIT.SLIDE (a sliding window) with `algorithm: 'sliding'`.
// `inFlight` limits the requests in flight with RATELIMIT.ACQUIRE / RENEW / RELEASE.
//
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60 }));
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60, algorithm: 'sliding' }));
//   app.use(inFlight(new Redis(), { limit: 3, lease: 30 }));
//
// Requests are counted per client (the X-Api-Key header, else the remote address). A denied
// request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
// RateLimit fields. Where the module is not loaded (managed Redis), the same hit goes through the
// Functions library (functions/ratelimit.lua), loaded on first use if the server does not have it
// yet: same reply, same counters.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const LIBRARY = path.join(__dirname, '..', '..', 'functions', 'ratelimit.lua');

// The module's command and the library's function of each algorithm.
const ALGORITHMS = {
  fixed: ['RATELIMIT.HIT', 'ratelimit_hit'],
  sliding: ['RATELIMIT.SLIDE', 'ratelimit_slide'],
};

// Calls a command of the module, or where it is not loaded (managed Redis) the library's function,
// loading the library on first use if the server does not have it yet.
function commands(redis, library) {
  let useModule = null; // decided by the first call
  async function call(command, fn, key, ...args) {
    if (useModule !== false) {
      try {
        const reply = await redis.call(command, key, ...args);
        useModule = true;
        return reply;
      } catch (err) {
        if (useModule || !/unknown command/i.test(err.message)) throw err;
        useModule = false;
        const loaded = await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit');
        if (loaded.length === 0) await redis.call('FUNCTION', 'LOAD', fs.readFileSync(library, 'utf8'));
      }
    }
    return redis.call('FCALL', fn, 1, key, ...args);
  }
  return { call, usesModule: () => useModule };
}

function rateLimit(redis, { limit, window, prefix = 'rl:', library = LIBRARY, algorithm = 'fixed' }) {
  if (!Object.hasOwn(ALGORITHMS, algorithm)) {
    throw new Error(`algorithm must be one of ${Object.keys(ALGORITHMS).join(', ')}, not ${algorithm}`);
  }
  const [command, fn] = ALGORITHMS[algorithm];
  const server = commands(redis, library);

  // The command's reply from the module, else from the library: [allowed, count, remaining,
  // reset_ms] for the fixed window, [allowed, count, remaining, retry_after_ms, reset_ms] for the
  // sliding one.
  const hit = (key) => server.call(command, fn, key, limit, window);

  // { allowed, remaining, resetMs, retryMs }: when the window resets, and when a denied request
  // may retry (the fixed window's end; the sliding window's exact retry_after_ms).
  async function decide(key) {
    const reply = await hit(key);
    if (reply.length === 5) {
      const [allowed, , remaining, retryMs, resetMs] = reply;
      return { allowed, remaining, resetMs, retryMs };
    }
    const [allowed, , remaining, resetMs] = reply;
    return { allowed, remaining, resetMs, retryMs: resetMs };
  }

  async function rateLimitMiddleware(req, res, next) {
    const identity = req.get('X-Api-Key') || req.ip;
    try {
      const { allowed, remaining, resetMs, retryMs } = await decide(prefix + identity);
      const retrySeconds = Math.ceil(retryMs / 1000);
      const resetSeconds = allowed === 1 ? Math.ceil(resetMs / 1000) : retrySeconds;
      res.set('RateLimit-Policy', `"default";q=${limit};w=${window}`);
      res.set('RateLimit', `"default";r=${remaining};t=${resetSeconds}`);
      if (allowed === 1) return next();
      res.set('Retry-After', String(retrySeconds));
      res.status(429).send('Too Many Requests\n');
    } catch (err) {
      next(err);
    }
  }
  rateLimitMiddleware.usesModule = server.usesModule;
  return rateLimitMiddleware;
}

// At most `limit` requests in flight per client. Each request holds a permit, a lease of `lease`
// seconds (RATELIMIT.ACQUIRE), given back (RATELIMIT.RELEASE) when its response is finished, when
// the client goes away, or when the handler fails (Express then finishes the response with an
// error); while the response is open its lease is renewed every half lease (RATELIMIT.RENEW), so
// a long stream keeps it. If the process dies, the permit comes back by itself when its lease
// ends. A request over the limit gets 429 with Retry-After: when the earliest permit in use ends,
// at the latest.
function inFlight(redis, { limit, lease = 30, prefix = 'inflight:', library = LIBRARY }) {
  const server = commands(redis, library);

  return async function inFlightMiddleware(req, res, next) {
    const key = prefix + (req.get('X-Api-Key') || req.ip);
    const id = crypto.randomUUID();
    let reply;
    try {
      reply = await server.call('RATELIMIT.ACQUIRE', 'ratelimit_acquire', key, limit, lease, 'ID', id);
    } catch (err) {
      return next(err);
    }
    const [acquired, , , ms] = reply;
    if (acquired !== 1) {
      res.set('Retry-After', String(Math.ceil(ms / 1000)));
      return res.status(429).send('Too Many Requests\n');
    }
    let held = true;
    const renewal = setInterval(async () => {
      try {
        const left = await server.call('RATELIMIT.RENEW', 'ratelimit_renew', key, id, lease);
        // Lost (its lease ended): take a permit again if one is free; else the response goes on
        // without one, which the next renewal retries.
        if (left < 0) await server.call('RATELIMIT.ACQUIRE', 'ratelimit_acquire', key, limit, lease, 'ID', id);
      } catch {
        // The next renewal retries; the lease ends by itself if none succeeds.
      }
    }, (lease * 1000) / 2);
    renewal.unref();
    const giveBack = () => {
      if (!held) return;
      held = false;
      clearInterval(renewal);
      server.call('RATELIMIT.RELEASE', 'ratelimit_release', key, id).catch(() => {});
    };
    res.on('finish', giveBack);
    res.on('close', giveBack);
    return next();
  };
}

module.exports = { rateLimit, inFlight };
