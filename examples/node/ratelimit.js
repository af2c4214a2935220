// Express middleware that rate-limits every request with redis-ratelimit: RATELIMIT.HIT (a fixed
// window), or RATELIMIT.SLIDE (a sliding window) with `algorithm: 'sliding'`.
//
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60 }));
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60, algorithm: 'sliding' }));
//
// Requests are counted per client (the X-Api-Key header, else the remote address). A denied
// request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
// RateLimit fields. Where the module is not loaded (managed Redis), the same hit goes through the
// Functions library (functions/ratelimit.lua), loaded on first use if the server does not have it
// yet: same reply, same counters.

const fs = require('node:fs');
const path = require('node:path');

const LIBRARY = path.join(__dirname, '..', '..', 'functions', 'ratelimit.lua');

// The module's command and the library's function of each algorithm.
const ALGORITHMS = {
  fixed: ['RATELIMIT.HIT', 'ratelimit_hit'],
  sliding: ['RATELIMIT.SLIDE', 'ratelimit_slide'],
};

function rateLimit(redis, { limit, window, prefix = 'rl:', library = LIBRARY, algorithm = 'fixed' }) {
  if (!Object.hasOwn(ALGORITHMS, algorithm)) {
    throw new Error(`algorithm must be one of ${Object.keys(ALGORITHMS).join(', ')}, not ${algorithm}`);
  }
  const [command, fn] = ALGORITHMS[algorithm];
  let useModule = null; // decided by the first hit

  // The command's reply from the module, else from the library: [allowed, count, remaining,
  // reset_ms] for the fixed window, [allowed, count, remaining, retry_after_ms, reset_ms] for the
  // sliding one.
  async function hit(key) {
    if (useModule !== false) {
      try {
        const reply = await redis.call(command, key, limit, window);
        useModule = true;
        return reply;
      } catch (err) {
        if (useModule || !/unknown command/i.test(err.message)) throw err;
        useModule = false;
        const loaded = await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit');
        if (loaded.length === 0) await redis.call('FUNCTION', 'LOAD', fs.readFileSync(library, 'utf8'));
      }
    }
    return redis.call('FCALL', fn, 1, key, limit, window);
  }

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
  rateLimitMiddleware.usesModule = () => useModule;
  return rateLimitMiddleware;
}

module.exports = { rateLimit };
