// What the Express and Fastify middlewares limit: rules, each a limiter on the requests it
// matches, counted per identity (a key function over the request), and the answer they give.
//
//   rules: [
//     { fixed: { limit: 100, windowMs: 60_000 } },                              // every request
//     { sliding: { limit: 10, windowMs: 1_000 }, path: '/api/*', name: 'api' }, // a glob over the path
//     { gcra: { maxBurst: 9, tokensPerPeriod: 10, periodMs: 60_000 }, methods: ['POST'], name: 'writes' },
//     { allOf: [{ limit: 10, windowMs: 1_000 }, { limit: 1_000, windowMs: 3_600_000 }], name: 'burst-and-hour' },
//     { inFlight: { limit: 3, leaseMs: 30_000 }, path: '/reports/*', name: 'reports' },
//   ]
//
// A request goes through the rules that match it, in order; the first that denies answers 429
// (the rules before it have counted the request: use allOf for several limits all or nothing).
// A denied request writes nothing: the module's own decision, not a count compared afterwards.

import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from './adapters.js';
import { RateLimiter, type HeldPermit, type Permit } from './client.js';
import * as commands from './commands.js';
import type { FixedWindowOptions, GcraOptions, WindowOptions } from './commands.js';
import { RateLimitError } from './errors.js';
import { Acquisition, combinedHeaders, wholeSeconds, type Decision, type MultiDecision } from './results.js';

/** What a key function sees of a request, the same from Express and from Fastify. */
export interface LimitedRequest {
  readonly method: string;
  /** The path, without the query. */
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  /** The peer's address (the framework's `ip`: behind a proxy, as its trust-proxy setting says). */
  readonly ip: string | undefined;
}

/** A request's identity; undefined leaves the request unlimited by that rule. */
export type KeyFunction = (request: LimitedRequest) => string | undefined;

export type Limiter =
  | { fixed: FixedWindowOptions }
  | { sliding: WindowOptions }
  | { gcra: GcraOptions }
  | { allOf: WindowOptions[]; sliding?: boolean }
  | { inFlight: { limit: number; leaseMs: number } };

export type Rule = Limiter & {
  /** A glob over the path (`*` within a segment, `**` across them); default: every path. */
  path?: string;
  /** Default: every method. */
  methods?: string[];
  /** Default: the middleware's `key`. */
  key?: KeyFunction;
  /** Names the limit in the headers and in its keys: `<prefix>{<name>:<identity>}` (default 'default'). */
  name?: string;
};

export interface MiddlewareOptions {
  /** A Redis client, as RateLimiter takes it. */
  client: Client;
  rules: Rule[];
  /** The identity a rule counts by where it names none (default: the peer's address). */
  key?: KeyFunction;
  /** Before every key (default `rl:`). */
  prefix?: string;
  /** When the server cannot be reached: admit (default) or refuse with 503. */
  failOpen?: boolean;
  /** A limiter call that takes longer is taken as the server unreachable (default 1000 ms). */
  timeoutMs?: number;
  /** After a failure, requests skip the server this long before one tries it again (default 1000 ms). */
  retryIntervalMs?: number;
  loadLibrary?: boolean;
  /** Told when the server becomes unreachable (`error`) and when it answers again (null). */
  onOutage?: (error: unknown) => void;
}

/** The peer's address. */
export const clientAddress: KeyFunction = (request) => request.ip ?? 'unknown';

/** The value of a request header (`x-api-key`, say), else `fallback`'s identity. */
export function header(name: string, fallback: KeyFunction = clientAddress): KeyFunction {
  const lowered = name.toLowerCase();
  return (request) => {
    const value = request.headers[lowered];
    return (Array.isArray(value) ? value[0] : value) ?? fallback(request);
  };
}

function glob(pattern: string): RegExp {
  const body = pattern.replace(/[.+?^${}()|[\]\\]|\*\*|\*/g, (m) => (m === '**' ? '.*' : m === '*' ? '[^/]*' : `\\${m}`));
  return new RegExp(`^${body}$`);
}

interface Compiled {
  rule: Rule;
  name: string;
  path: RegExp | null;
  methods: Set<string> | null;
  limit: ReturnType<typeof limiterOf>;
}

type Call = (key: string) => commands.Call<Decision | MultiDecision>;

/** A rule's limiter: the call it makes, or an inFlight rule's terms. */
function limiterOf(rule: Rule): Call | { limit: number; leaseMs: number } {
  if ('fixed' in rule) return (key) => commands.hit(key, rule.fixed);
  if ('gcra' in rule) return (key) => commands.gcra(key, rule.gcra);
  if ('allOf' in rule) {
    const costs = new Set(rule.allOf.map((l) => l.cost ?? 1));
    if (costs.size > 1) throw new RateLimitError("allOf's limits share one cost");
    const options = { cost: [...costs][0] ?? 1, slide: rule.sliding === true };
    return (key) => commands.hitAll(rule.allOf.map((l, i) => ({ key: `${key}:${String(i)}`, limit: l.limit, windowMs: l.windowMs })), options);
  }
  if ('sliding' in rule) return (key) => commands.slide(key, rule.sliding);
  if ('inFlight' in rule) return rule.inFlight;
  throw new RateLimitError('a rule needs one of fixed, sliding, gcra, allOf or inFlight');
}

function compile(rule: Rule): Compiled {
  const name = rule.name ?? 'default';
  const limit = limiterOf(rule);
  // Checked now, so that a bad rule fails at start-up, not on the first request.
  if (typeof limit === 'function') limit('k');
  else commands.acquire('k', limit);
  return {
    rule,
    name,
    path: rule.path === undefined ? null : glob(rule.path),
    methods: rule.methods === undefined ? null : new Set(rule.methods.map((m) => m.toUpperCase())),
    limit,
  };
}

/** What the rules decided for one request: the headers its response carries, whether it is
 * denied, and the permits it holds until its response is done. */
export interface Verdict {
  status: 200 | 429 | 503;
  headers: Record<string, string>;
  permits: Permit[];
  /** Gives the permits back (call when the response is done). */
  release: () => void;
}

class TimedOut extends Error {
  constructor(ms: number) {
    super(`the rate limiter did not answer within ${String(ms)} ms`);
  }
}

/** The middlewares' engine, the same for Express and Fastify. */
export class Rules {
  readonly limiter: RateLimiter;
  readonly rules: Compiled[];
  readonly #key: KeyFunction;
  readonly #prefix: string;
  readonly #failOpen: boolean;
  readonly #timeoutMs: number;
  readonly #retryIntervalMs: number;
  readonly #onOutage: (error: unknown) => void;
  #skipUntil = 0;
  #down = false;

  constructor(options: MiddlewareOptions) {
    this.limiter = new RateLimiter(options.client, { loadLibrary: options.loadLibrary ?? true });
    this.rules = options.rules.map(compile);
    this.#key = options.key ?? clientAddress;
    this.#prefix = options.prefix ?? 'rl:';
    this.#failOpen = options.failOpen ?? true;
    this.#timeoutMs = options.timeoutMs ?? 1_000;
    this.#retryIntervalMs = options.retryIntervalMs ?? 1_000;
    this.#onOutage =
      options.onOutage ??
      ((error: unknown) => {
        const what = this.#failOpen ? 'admitting' : 'refusing';
        console.warn(error === null ? 'redis-ratelimit: the rate limiter answers again' : `redis-ratelimit: the rate limiter is unreachable (${error instanceof Error ? error.message : 'no answer'}): ${what} requests until it answers`);
      });
  }

  async #timed<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new TimedOut(this.#timeoutMs));
      }, this.#timeoutMs);
    });
    try {
      return await Promise.race([work, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The verdict for `request`. A rule's error (other than the server unreachable) is thrown. */
  async decide(request: LimitedRequest): Promise<Verdict> {
    const held: HeldPermit[] = [];
    const release = () => {
      for (const permit of held.splice(0)) void permit.end();
    };
    if (this.#down && Date.now() < this.#skipUntil) return this.#unreachable(release);
    const named: [string, Decision][] = [];
    let denied: number | null | undefined;
    try {
      for (const rule of this.rules) {
        if ((rule.methods && !rule.methods.has(request.method.toUpperCase())) || (rule.path && !rule.path.test(request.path))) continue;
        const identity = (rule.rule.key ?? this.#key)(request);
        if (identity === undefined) continue;
        const key = `${this.#prefix}{${rule.name}:${identity}}`;
        if (typeof rule.limit !== 'function') {
          const got = await this.#hold(key, rule.limit);
          if (got instanceof Acquisition) {
            denied = got.expiresAfterMs;
            break;
          }
          held.push(got);
          continue;
        }
        const answer = await this.#timed(this.limiter.run(rule.limit(key)));
        if ('decisions' in answer) named.push(...answer.decisions.map((d, i): [string, Decision] => [`${rule.name}-${String(i)}`, d]));
        else named.push([rule.name, answer]);
        if (!answer.allowed) {
          denied = answer.retryAfterMs;
          break;
        }
      }
    } catch (error) {
      release();
      if (error instanceof RateLimitError) throw error;
      this.#skipUntil = Date.now() + this.#retryIntervalMs;
      if (!this.#down) {
        this.#down = true;
        this.#onOutage(error);
      }
      return this.#unreachable(release);
    }
    if (this.#down) {
      this.#down = false;
      this.#onOutage(null);
    }
    const headers = named.length > 0 ? combinedHeaders(named) : {};
    if (denied !== undefined) {
      release();
      if (!('Retry-After' in headers) && denied !== null && Number.isFinite(denied)) headers['Retry-After'] = String(wholeSeconds(denied));
      return { status: 429, headers, permits: [], release };
    }
    return { status: 200, headers, permits: [...held], release };
  }

  #unreachable(release: () => void): Verdict {
    if (this.#failOpen) return { status: 200, headers: {}, permits: [], release };
    return { status: 503, headers: { 'Retry-After': String(Math.max(wholeSeconds(this.#retryIntervalMs), 1)) }, permits: [], release };
  }

  /** A permit held (see RateLimiter.hold), or the denied Acquisition, within the time-out. */
  async #hold(key: string, terms: { limit: number; leaseMs: number }): Promise<HeldPermit | Acquisition> {
    const holding = this.limiter.hold(key, terms);
    let got: HeldPermit | Acquisition;
    try {
      got = await this.#timed(holding);
    } catch (error) {
      // A permit that arrives after the time-out is given back at once.
      holding.then((late) => (late instanceof Acquisition ? undefined : late.end()), () => undefined).catch(() => undefined);
      throw error;
    }
    return got;
  }
}

/** The response's end, finished or cut short: when a request's permits go back. */
export function onResponseEnd(response: ServerResponse, end: () => void): void {
  let ended = false;
  const once = () => {
    if (!ended) {
      ended = true;
      end();
    }
  };
  response.once('finish', once);
  response.once('close', once);
}

export function pathOf(request: IncomingMessage): string {
  const url = request.url ?? '/';
  const query = url.indexOf('?');
  return query < 0 ? url : url.slice(0, query);
}

