// The AI SDK (`ai` on npm): a language-model middleware for `wrapLanguageModel` that holds a model's
// calls to the adaptive limits a whole fleet learns from its provider's answers (RATELIMIT.ADAPT and
// RATELIMIT.REPORT; see docs/adaptive.md): before the model runs, its requests (one) and its tokens
// (the call's estimate, reserved) are decided; after, the provider's answer is reported: the
// response's headers, or an error's status and headers (the SDK's APICallError), and the tokens
// settled with the usage the model reports (a stream's at its finish). The package does not depend
// on `ai`.

import type { Client } from './adapters.js';
import { AdaptiveLimit, RateLimitedError } from './adaptive.js';
import { RateLimiter } from './client.js';
import type { HeadersLike } from './provider-answers.js';
import type { Admit, ModelCall, TokenLimitMiddleware } from './ai-sdk.js';
import { estimateTokens, settlingMiddleware } from './ai-sdk.js';
import type { Reservation } from './results.js';

/** One adaptive limit's bounds, per window. */
export interface AdaptiveBounds {
  floor: number;
  start: number;
  ceiling: number;
}

export interface AdaptiveLimitMiddlewareOptions {
  /** A node-redis or ioredis client, a cluster, a `sendCommand` function, or a RateLimiter. */
  client: Client | RateLimiter;
  /** The provider account (or deployment) the fleet shares: its limits' key. */
  key: string;
  requests?: AdaptiveBounds;
  tokens?: AdaptiveBounds;
  /** The limits are per window (default a minute). */
  windowMs?: number;
  /** The tokens a call may use, counted before it runs (default: its prompt at 4 characters a
   * token, plus its `maxOutputTokens` or `defaultMaxTokens`). */
  estimate?: (call: ModelCall) => number;
  defaultMaxTokens?: number;
  /** The longest a provider's Retry-After holds the fleet (default 60 s). */
  maxHoldMs?: number;
}

interface Answered {
  readonly response?: { readonly headers?: unknown };
}

/** The status and headers an AI SDK error carries (APICallError: `statusCode`, `responseHeaders`). */
function failure(error: unknown): [number | null, HeadersLike] {
  const e = error as { statusCode?: unknown; responseHeaders?: unknown } | null;
  const status = e !== null && typeof e === 'object' && typeof e.statusCode === 'number' ? e.statusCode : null;
  const headers = e !== null && typeof e === 'object' && typeof e.responseHeaders === 'object' && e.responseHeaders !== null ? e.responseHeaders : {};
  return [status, headers as HeadersLike];
}

/** A model held to adaptive limits: `wrapLanguageModel({ model, middleware:
 * adaptiveLimitMiddleware({ client, key: 'openai', requests: {...}, tokens: {...} }) })`. A call
 * the fleet's limits have no room for throws RateLimitedError (`retryAfterMs`) before the model
 * runs. */
export function adaptiveLimitMiddleware(options: AdaptiveLimitMiddlewareOptions): TokenLimitMiddleware {
  const rl = options.client instanceof RateLimiter ? options.client : new RateLimiter(options.client);
  const { windowMs = 60_000, maxHoldMs = 60_000, defaultMaxTokens = 4096 } = options;
  const estimate = options.estimate ?? ((call: ModelCall) => estimateTokens(call, defaultMaxTokens));
  const limits = (['requests', 'tokens'] as const).flatMap((measure) => {
    const bounds = options[measure];
    // One hash tag: the account's two limits in one slot of a cluster.
    return bounds ? [new AdaptiveLimit(rl, `${options.key}:{${options.key}}:${measure}`, { ...bounds, windowMs, measure, maxHoldMs })] : [];
  });

  /** The call decided on each limit, its tokens reserved; what settles them, once. */
  const decided = async (call: ModelCall) => {
    const reserved: [AdaptiveLimit, Reservation][] = [];
    for (const limit of limits) {
      let d;
      if (limit.measure === 'requests') d = await limit.decide(1);
      else {
        const r = await limit.reserve(Math.max(1, Math.ceil(estimate(call))));
        if (r.token !== null) reserved.push([limit, r]);
        d = r.decision;
      }
      if (!d.allowed) throw new RateLimitedError(limit.key, d.retryAfterMs ?? 0);
    }
    let done = false;
    return async (used: number) => {
      if (done) return;
      done = true;
      // A settle that fails keeps the estimate counted: the safe side.
      for (const [limit, r] of reserved) await limit.settle(r, Math.max(0, Math.round(used))).catch(() => undefined);
    };
  };
  /** The answer reported to each limit, with the ms since the call was decided. */
  const reported = async (status: number | null, headers: HeadersLike, decidedAt: number) => {
    const ageMs = performance.now() - decidedAt;
    for (const limit of limits) await limit.report(status, headers, { ageMs });
  };
  const admitted: Admit = async <T>(call: ModelCall, model: () => PromiseLike<T>): Promise<[T, (used: number) => Promise<void>]> => {
    const settle = await decided(call);
    const decidedAt = performance.now();
    let result: T;
    try {
      result = await model();
    } catch (error) {
      const [status, headers] = failure(error);
      await reported(status, headers, decidedAt);
      // An error the provider answered used no tokens; with no answer (a timeout), the estimate stays.
      if (status !== null) await settle(0);
      throw error;
    }
    const headers = (result as Answered | null)?.response?.headers;
    await reported(200, typeof headers === 'object' && headers !== null ? (headers as HeadersLike) : {}, decidedAt);
    return [result, settle];
  };
  return settlingMiddleware(admitted, estimate);
}
