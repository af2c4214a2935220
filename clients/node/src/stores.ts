// Stores for the rate limiters Node services already use: express-rate-limit (RedisStore, which
// takes rate-limit-redis's options, so that switching is one import) and @fastify/rate-limit
// (fastifyStore). Those libraries decide by themselves (`totalHits > limit`) and count denied
// requests too, so the stores count every request: RATELIMIT.HIT with a limit no count reaches,
// which sets the window's expiry in the same step as the count (an INCR that finds its key gone
// never leaves a counter without TTL). A give-back is HIT's refund: never below 0, no key
// created, the window's end kept.

import type { Client, SendCommand, SendCommandCluster } from './adapters.js';
import { fromSendCommand, fromSendCommandCluster } from './adapters.js';
import { RateLimiter } from './client.js';
import * as commands from './commands.js';
import { RateLimitError } from './errors.js';
import type { Decision } from './results.js';

/** A limit no count reaches: the stores' HIT counts every request, denying none. */
const UNLIMITED = Number.MAX_SAFE_INTEGER;

export interface RedisStoreOptions {
  /** rate-limit-redis's: `(...args) => client.sendCommand(args)` (node-redis) or
   * `(command, ...args) => client.call(command, ...args)` (ioredis). Called with `this` the
   * store, as rate-limit-redis calls it. */
  sendCommand?: (this: RedisStore, ...args: Parameters<SendCommand>) => ReturnType<SendCommand>;
  /** rate-limit-redis's cluster form: `({ key, isReadOnly, command }) => cluster.sendCommand(key, isReadOnly, command)`;
   * `this` the store too. */
  sendCommandCluster?: (this: RedisStore, ...args: Parameters<SendCommandCluster>) => ReturnType<SendCommandCluster>;
  /** Or the client itself (node-redis, ioredis, iovalkey, a cluster of either). */
  client?: Client;
  /** Before every key (default `rl:`, as rate-limit-redis). */
  prefix?: string;
  /** As for RateLimiter (default true). */
  loadLibrary?: boolean;
}

/** What express-rate-limit reads of a count. */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

function limiterOf(options: RedisStoreOptions, store: RedisStore): RateLimiter {
  const { sendCommand, sendCommandCluster, client } = options;
  const given = [sendCommand, sendCommandCluster, client].filter((o) => o !== undefined);
  if (given.length !== 1) throw new TypeError('redis-ratelimit: RedisStore takes one of sendCommand, sendCommandCluster or client');
  // Bound to the store, as rate-limit-redis binds them (its 4.3.1), so that options written as
  // `function (...args) { ... this ... }` work here too.
  const connection = sendCommand
    ? fromSendCommand(sendCommand.bind(store))
    : sendCommandCluster
      ? fromSendCommandCluster(sendCommandCluster.bind(store))
      : client;
  return new RateLimiter(connection ?? {}, { loadLibrary: options.loadLibrary ?? true });
}

const info = (d: Decision): ClientRateLimitInfo => ({
  totalHits: d.count,
  resetTime: Number.isFinite(d.resetAfterMs) ? new Date(Date.now() + d.resetAfterMs) : undefined,
});

/** express-rate-limit's store: `rateLimit({ store: new RedisStore({ sendCommand }) })`. */
export class RedisStore {
  readonly prefix: string;
  readonly localKeys = false;
  readonly limiter: RateLimiter;
  /** express-rate-limit's `windowMs`, given to `init`. */
  windowMs = 60_000;

  constructor(options: RedisStoreOptions) {
    this.limiter = limiterOf(options, this);
    this.prefix = options.prefix ?? 'rl:';
  }

  init(options: { windowMs: number }): void {
    commands.hit('k', { limit: UNLIMITED, windowMs: options.windowMs }); // checked once, at start-up
    this.windowMs = options.windowMs;
  }

  async increment(key: string): Promise<{ totalHits: number; resetTime: Date }> {
    const counted = info(await this.limiter.hit(this.prefix + key, { limit: UNLIMITED, windowMs: this.windowMs }));
    return { totalHits: counted.totalHits, resetTime: counted.resetTime ?? new Date(Date.now() + this.windowMs) };
  }

  async decrement(key: string): Promise<void> {
    await this.limiter.refundHit(this.prefix + key, { limit: UNLIMITED, windowMs: this.windowMs, amount: 1 });
  }

  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const counted = await this.limiter.peek(this.prefix + key, { limit: UNLIMITED });
    return counted.count === 0 ? undefined : info(counted);
  }

  async resetKey(key: string): Promise<void> {
    await this.limiter.connection.send(['DEL', this.prefix + key], [this.prefix + key], false);
  }
}

type Callback = (error: Error | null, result?: { current: number; ttl: number }) => void;

/** What @fastify/rate-limit gives a store: its settings, and per route its route's options. */
interface FastifyOptions {
  continueExceeding?: boolean;
  exponentialBackoff?: boolean;
  routeInfo?: { method: string; url: string };
}

export interface FastifyStoreOptions {
  /** Before every key (default `fastify-rate-limit-`, as @fastify/rate-limit's Redis store). */
  prefix?: string;
  loadLibrary?: boolean;
}

/** @fastify/rate-limit's store, over `client`: `fastify.register(rateLimit, { store: fastifyStore(client) })`.
 * @fastify/rate-limit constructs the store itself, so the class is made here, around the client. */
export function fastifyStore(client: Client, options: FastifyStoreOptions = {}) {
  const limiter = new RateLimiter(client, { loadLibrary: options.loadLibrary ?? true });
  const answer = (cb: Callback, decided: Promise<Decision>) => {
    decided.then(
      (d) => {
        cb(null, { current: d.count, ttl: Number.isFinite(d.resetAfterMs) ? d.resetAfterMs : 0 });
      },
      (error: unknown) => {
        cb(error instanceof Error ? error : new RateLimitError('the store failed'));
      },
    );
  };
  return class FastifyStore {
    constructor(
      settings: object = {},
      readonly prefix = options.prefix ?? 'fastify-rate-limit-',
    ) {
      for (const name of ['continueExceeding', 'exponentialBackoff'] as const) {
        if ((settings as FastifyOptions)[name] === true) throw new RateLimitError(`redis-ratelimit's fastify store has no ${name}: a window ends when it ends`);
      }
    }

    incr(key: string, cb: Callback, timeWindow: number): void {
      answer(cb, limiter.hit(this.prefix + key, { limit: UNLIMITED, windowMs: Math.max(1, Math.trunc(timeWindow)) }));
    }

    read(key: string, cb: Callback): void {
      answer(cb, limiter.peek(this.prefix + key, { limit: UNLIMITED }));
    }

    child(route: object): FastifyStore {
      const info = (route as FastifyOptions).routeInfo;
      return new FastifyStore(route, info ? `${this.prefix}${info.method}${info.url}-` : this.prefix);
    }
  };
}
