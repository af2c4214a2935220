// Express middleware that rate-limits every request with RATELIMIT.HIT (redis-ratelimit).
//
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60 }));
//
// Requests are counted per client (the X-Api-Key header, else the remote address). A denied
// request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
// RateLimit fields. Where the module is not loaded (managed Redis), the same hit goes through the
// Functions library (functions/ratelimit.lua), loaded on first use if the server does not have it
// yet: same reply, same counters.

const fs = require('node:fs');
const path = require('node:path');

const LIBRARY = path.join(__dirname, '..', '..', 'functions', 'ratelimit.lua');

function rateLimit(redis, { limit, window, prefix = 'rl:', library = LIBRARY }) {
  let useModule = null; // decided by the first hit

  // [allowed, count, remaining, reset_ms] from the module, else from the library.
  async function hit(key) {
    if (useModule !== false) {
      try {
        const reply = await redis.call('RATELIMIT.HIT', key, limit, window);
        useModule = true;
        return reply;
      } catch (err) {
        if (useModule || !/unknown command/i.test(err.message)) throw err;
        useModule = false;
        const loaded = await redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit');
        if (loaded.length === 0) await redis.call('FUNCTION', 'LOAD', fs.readFileSync(library, 'utf8'));
      }
    }
    return redis.call('FCALL', 'ratelimit_hit', 1, key, limit, window);
  }

  async function rateLimitMiddleware(req, res, next) {
    const identity = req.get('X-Api-Key') || req.ip;
    try {
      const [allowed, , remaining, resetMs] = await hit(prefix + identity);
      const resetSeconds = Math.ceil(resetMs / 1000);
      res.set('RateLimit-Policy', `"default";q=${limit};w=${window}`);
      res.set('RateLimit', `"default";r=${remaining};t=${resetSeconds}`);
      if (allowed === 1) return next();
      res.set('Retry-After', String(resetSeconds));
      res.status(429).send('Too Many Requests\n');
    } catch (err) {
      next(err);
    }
  }
  rateLimitMiddleware.usesModule = () => useModule;
  return rateLimitMiddleware;
}

module.exports = { rateLimit };
