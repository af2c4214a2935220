// One limit a whole fleet learns from its provider's answers (RATELIMIT.ADAPT and
// RATELIMIT.REPORT): decide before calling the provider, report how it answered, or let `call` do
// both around the call. The rules are the module's (docs/adaptive.md); this only reads the
// provider's answer (`readAnswer`) and sends it.

import { setTimeout as sleep } from 'node:timers/promises';
import type { RateLimiter } from './client.js';
import * as commands from './commands.js';
import { RateLimitError } from './errors.js';
import { readAnswer, type HeadersLike, type ProviderAnswer } from './provider-answers.js';
import type { Decision, Learned, Reservation, Settlement } from './results.js';

export interface AdaptiveLimitOptions {
  floor: number;
  start: number;
  ceiling: number;
  /** The limit is per window (default a minute). */
  windowMs?: number;
  /** What the limit counts: requests, or tokens (each call's cost). */
  measure?: 'requests' | 'tokens';
  /** The longest a provider's Retry-After holds the fleet (default 60 s, as the SDKs honour). */
  maxHoldMs?: number;
}

/** `call` waited its longest and the fleet's limit still had no room. */
export class RateLimitedError extends RateLimitError {
  override name = 'RateLimitedError';
  constructor(
    readonly key: string,
    readonly retryAfterMs: number,
  ) {
    super(`'${key}' has no room for ${String(retryAfterMs)} ms`);
  }
}

/** The status and headers of what a provider call returned or threw: a fetch `Response`, or an
 * error carrying one (`status` and `headers`, as the OpenAI and Anthropic SDKs' APIError, or
 * `response`); nothing for anything else, as a timeout. */
export function answerOf(outcome: unknown): [number | null, HeadersLike] {
  const holder = outcome as { status?: unknown; headers?: unknown; response?: { status?: unknown; headers?: unknown } } | null;
  const source = holder !== null && typeof holder === 'object' && typeof holder.status !== 'number' && holder.response ? holder.response : holder;
  if (source === null || typeof source !== 'object') return [null, {}];
  const status = typeof source.status === 'number' ? source.status : null;
  const headers = source.headers !== null && typeof source.headers === 'object' ? (source.headers as HeadersLike) : {};
  return [status, headers];
}

/** A limit per window (`measure`: requests, or tokens with each call's cost) that every process
 * using `key` learns together, between `floor` and `ceiling`, starting at `start`. */
export class AdaptiveLimit {
  readonly #terms: commands.AdaptOptions;
  readonly measure: 'requests' | 'tokens';
  readonly maxHoldMs: number;

  constructor(
    readonly limiter: RateLimiter,
    readonly key: string,
    o: AdaptiveLimitOptions,
  ) {
    const { floor, start, ceiling, windowMs = 60_000, measure = 'requests', maxHoldMs = 60_000 } = o;
    this.#terms = { floor, start, ceiling, windowMs };
    commands.adapt(key, this.#terms); // the terms checked once, here
    this.measure = measure;
    this.maxHoldMs = maxHoldMs;
  }

  /** Whether a call of `cost` may go to the provider now. `turn`: asked again at the
   * `retryAfterMs` a denial told (TURN: admitted on a bucket not in debt). */
  decide(cost = 1, o: { turn?: boolean } = {}): Promise<Decision> {
    return this.limiter.adapt(this.key, { ...this.#terms, cost, turn: o.turn ?? false });
  }

  /** Whether a call estimated at `estimate` (tokens, say) may go now, and if so its reservation:
   * `settle` it with what the call used once the answer says. */
  reserve(estimate: number, o: { turn?: boolean } = {}): Promise<Reservation> {
    return this.limiter.reserveAdapt(this.key, { ...this.#terms, cost: estimate, turn: o.turn ?? false });
  }

  /** The reservation settled with `used`: the unused part back to the fleet (at most once). */
  async settle(reservation: Reservation, used: number): Promise<Settlement> {
    if (reservation.token === null) throw new RateLimitError('a denied call has no reservation to settle');
    return this.limiter.settle(this.key, reservation.token, used);
  }

  /** How the provider answered (`status` null: no answer); `throttled` overrides its status (a
   * timeout counted as a throttle); `ageMs`, the ms since the call was decided: a throttle on a
   * call decided after the epoch's cut cuts again (no remaining stated). */
  report(
    status: number | null,
    headers: HeadersLike = {},
    o: { throttled?: boolean; nowMs?: number; ageMs?: number } = {},
  ): Promise<Learned | null> {
    return this.limiter.report(this.key, ...this.#reported(readAnswer(status, headers, o.nowMs), o.throttled, o.ageMs));
  }

  #reported(answer: ProviderAnswer, throttled?: boolean, ageMs?: number): [commands.Outcome, commands.ReportOptions] {
    const stated = this.measure === 'requests' ? answer.requests : answer.tokens;
    const hit = throttled ?? answer.throttled;
    const o: commands.ReportOptions = {};
    if (ageMs !== undefined) o.ageMs = ageMs;
    if (hit && answer.retryAfterMs !== null) o.retryAfterMs = Math.min(answer.retryAfterMs, this.maxHoldMs);
    if (stated.limit !== null) o.limit = stated.limit;
    if (stated.remaining !== null && stated.resetAfterMs !== null) {
      o.remaining = stated.remaining;
      o.resetAfterMs = stated.resetAfterMs;
    }
    return [hit ? 'throttled' : 'ok', o];
  }

  /** `send()` once the fleet's limit has room (waiting up to `maxWaitMs`, else RateLimitedError),
   * its answer reported whether it resolves or throws. */
  async call<R>(send: () => Promise<R>, o: { cost?: number; maxWaitMs?: number } = {}): Promise<R> {
    const { cost = 1, maxWaitMs = 30_000 } = o;
    const deadline = Date.now() + maxWaitMs;
    for (let turn = false; ; turn = true) {
      const d = await this.decide(cost, { turn });
      if (d.allowed) break;
      const pause = d.retryAfterMs ?? 0;
      if (Date.now() + pause > deadline) throw new RateLimitedError(this.key, pause);
      await sleep(pause);
    }
    const decided = performance.now();
    const age = () => ({ ageMs: performance.now() - decided });
    let result: R;
    try {
      result = await send();
    } catch (error) {
      await this.report(...answerOf(error), age());
      throw error;
    }
    await this.report(...answerOf(result), age());
    return result;
  }
}
