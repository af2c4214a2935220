// Express middleware that rate-limits every request with RATELIMIT.HIT (redis-ratelimit).
//
//   app.use(rateLimit(new Redis(), { limit: 100, window: 60 }));
//
// Requests are counted per client (the X-Api-Key header, else the remote address). A denied
// request gets 429 with Retry-After; every response carries the IETF RateLimit-Policy and
// RateLimit fields.

function rateLimit(redis, { limit, window, prefix = 'rl:' }) {
  return async function rateLimitMiddleware(req, res, next) {
    const identity = req.get('X-Api-Key') || req.ip;
    try {
      const [allowed, , remaining, resetMs] = await redis.call('RATELIMIT.HIT', prefix + identity, limit, window);
      const resetSeconds = Math.ceil(resetMs / 1000);
      res.set('RateLimit-Policy', `"default";q=${limit};w=${window}`);
      res.set('RateLimit', `"default";r=${remaining};t=${resetSeconds}`);
      if (allowed === 1) return next();
      res.set('Retry-After', String(resetSeconds));
      res.status(429).send('Too Many Requests\n');
    } catch (err) {
      next(err);
    }
  };
}

module.exports = { rateLimit };
