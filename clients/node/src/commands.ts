// One builder per command: it checks the arguments (throwing RateLimitError before any round trip
// where the client can tell) and returns a Call: the module's command, the library's function, the
// same arguments for both, and how to read the reply. No I/O here: RateLimiter sends the Calls.
//
// Each builder's parameters are the command's arguments as COMMAND DOCS names them, in camelCase,
// except that durations are milliseconds (`windowMs`, `leaseMs`, `periodMs`: sent with MS, as Node's
// timers count), `numkeys` is the length of HITALL's list, and RESERVE is the reserve* builders'.
// `params` lists them: test/command-docs.test.ts holds them to the module's COMMAND DOCS.

import { RateLimitError } from './errors.js';
import { Acquisition, Decision, Grant, MultiDecision, MultiReservation, Reservation, type Learned, type Settlement, type TopEntry } from './results.js';

export type Arg = string | number;

/** A command ready to send, to the module or to the Functions library. */
export interface Call<T> {
  readonly command: string;
  /** The library's function ('' when only the module has the command). */
  readonly fn: string;
  readonly keys: readonly string[];
  readonly args: readonly Arg[];
  readonly parse: (reply: unknown) => T;
  /** Sent as a read (FCALL_RO): PEEK, TOP. */
  readonly readonly?: boolean;
  /** Writes nothing (a replica-waiting limiter waits only after writes): reads, SLIDE's `peek`. */
  readonly writesNothing?: boolean;
  /** The module's command takes `numkeys` before its keys (HITALL). */
  readonly numkeys?: boolean;
}

export function moduleArgs(call: Call<unknown>): Arg[] {
  return [call.command, ...(call.numkeys === true ? [call.keys.length] : []), ...call.keys, ...call.args];
}

export function libraryArgs(call: Call<unknown>): Arg[] {
  if (call.fn === '') throw new RateLimitError(`${call.command} needs the module: the Functions library cannot do it`);
  return [call.readonly === true ? 'FCALL_RO' : 'FCALL', call.fn, call.keys.length, ...call.keys, ...call.args];
}

/** A builder, and the names it takes (for the COMMAND DOCS test). */
type Builder<A extends unknown[], T> = ((...args: A) => Call<T>) & { readonly params: readonly string[] };

function define<A extends unknown[], T>(params: readonly string[], build: (...args: A) => Call<T>): Builder<A, T> {
  return Object.assign(build, { params });
}

// Argument checks, worded as the module words its errors.

const isInteger = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);

function integer(value: unknown, name: string, minimum = 1): number {
  if (!isInteger(value) || value < minimum) {
    throw new RateLimitError(`${name} must be an integer >= ${String(minimum)}`);
  }
  return value;
}

function duration(value: unknown, name: string): number {
  if (!isInteger(value) || value < 1) {
    throw new RateLimitError(`${name} must be a whole number of milliseconds >= 1`);
  }
  return value;
}

function text(value: unknown, name: string): string {
  if (typeof value !== 'string') throw new RateLimitError(`${name} must be a string, not ${typeof value}`);
  return value;
}

/** An options object: each name it holds must be one the builder takes (a misspelt option is an
 * error, not a default silently kept). */
function options<O extends object>(value: O | undefined, known: readonly string[], command: string): Partial<O> {
  const given: unknown = value;
  if (given === undefined) return {};
  if (typeof given !== 'object' || given === null) throw new RateLimitError(`${command}'s options must be an object`);
  for (const name of Object.keys(given)) {
    if (!known.includes(name)) throw new RateLimitError(`${command} takes no option '${name}' (it takes ${known.join(', ')})`);
  }
  return value ?? {};
}

function costArgs(cost: unknown, token = 'COST'): Arg[] {
  const value = integer(cost ?? 1, token);
  return value === 1 ? [] : [token, value];
}

/** A cost (or tokens) that may be negative, to give back; never 0. */
function signedCostArgs(cost: unknown, token = 'COST'): Arg[] {
  const value = cost ?? 1;
  if (!isInteger(value) || value === 0) {
    throw new RateLimitError(`${token} must be a nonzero integer`);
  }
  return value === 1 ? [] : [token, value];
}

function reserved(amount: unknown, token: string): number {
  if (!isInteger(amount) || amount < 1) {
    throw new RateLimitError(`RESERVE needs ${token} >= 1`);
  }
  return amount;
}

const leaseId = (value: unknown): string => {
  const id = value ?? crypto.randomUUID();
  if (typeof id !== 'string' || id.length === 0 || Buffer.byteLength(id) > 256) {
    throw new RateLimitError('ID must be 1 to 256 bytes');
  }
  return id;
};

// Reading the replies.

function int(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

function row(reply: unknown, length: number): unknown[] {
  if (!Array.isArray(reply) || reply.length !== length) {
    throw new RateLimitError(`unexpected reply: ${JSON.stringify(reply)}`);
  }
  return reply;
}

function replyText(value: unknown): string {
  return Buffer.isBuffer(value) ? value.toString() : String(value);
}

/** A bulk string that may be nil (RESERVE's reservation, ACQUIRE's id). */
function optionalText(value: unknown): string | null {
  return value === null || value === undefined ? null : replyText(value);
}

/** HIT's and PEEK's [allowed, count, remaining, reset_ms]. */
function fixed(limit: number, windowMs: number | null, cost: number) {
  return (reply: unknown): Decision => {
    const [allowed, count, remaining, resetMs] = row(reply, 4).map(int) as [number, number, number, number];
    const reset = resetMs < 0 ? Infinity : resetMs;
    const retry = allowed === 1 ? null : cost > limit ? Infinity : reset;
    return new Decision(allowed === 1, count, remaining, reset, retry, limit, windowMs);
  };
}

/** SLIDE's [allowed, count, remaining, retry_after_ms, reset_ms]. */
function sliding(limit: number, windowMs: number | null) {
  return (reply: unknown): Decision => {
    const [allowed, count, remaining, retryMs, resetMs] = row(reply, 5).map(int) as [number, number, number, number, number];
    const retry = allowed === 1 ? null : retryMs < 0 ? Infinity : retryMs;
    return new Decision(allowed === 1, count, remaining, resetMs < 0 ? Infinity : resetMs, retry, limit, windowMs);
  };
}

/** GCRA's [limited, capacity, remaining, retry_after_ms, full_after_ms]. */
function bucket(periodMs: number | null) {
  return (reply: unknown): Decision => {
    const [limited, capacity, remaining, retryMs, fullMs] = row(reply, 5).map(int) as [number, number, number, number, number];
    const retry = limited === 0 ? null : retryMs < 0 ? Infinity : retryMs;
    return new Decision(limited === 0, capacity - remaining, remaining, fullMs, retry, capacity, periodMs);
  };
}

// The commands.

export interface WindowOptions {
  /** At most this much cost per window. */
  limit: number;
  /** The window, in milliseconds. */
  windowMs: number;
  /** What the call counts (default 1); a negative cost gives back. */
  cost?: number;
}

/** A calendar window: a day, an ISO week (from Monday), a month or a year, in the call's `tz`. */
export type CalendarUnit = 'day' | 'week' | 'month' | 'year';
const CALENDAR_UNITS: readonly string[] = ['day', 'week', 'month', 'year'];

/** A fixed window: `windowMs` long (from the first hit, or with `align` at multiples of it since
 * the Unix epoch), or a `calendar` window in `tz` (UTC, '+05:30', or an IANA name such as
 * 'America/New_York'). */
export type FixedWindow = { windowMs: number; calendar?: undefined } | { calendar: CalendarUnit; windowMs?: undefined };

export type FixedWindowOptions = FixedWindow & {
  /** At most this much cost per window. */
  limit: number;
  /** What the call counts (default 1); a negative cost gives back. */
  cost?: number;
  /** Windows start at multiples of `windowMs` since the Unix epoch, not at the first hit. */
  align?: boolean;
  /** A calendar window's time zone (default UTC). */
  tz?: string;
};

/** A fixed window as sent (its length in ms, or a calendar unit) and its length (null for a
 * calendar window, whose length varies). */
function fixedWindow(windowMs: unknown, calendar: unknown): [Arg, number | null] {
  if (calendar === undefined) {
    const window = duration(windowMs, 'windowMs');
    return [window, window];
  }
  if (windowMs !== undefined) throw new RateLimitError('give windowMs or calendar, not both');
  if (typeof calendar !== 'string' || !CALENDAR_UNITS.includes(calendar)) {
    throw new RateLimitError('calendar must be day, week, month or year');
  }
  return [calendar, null];
}

/** ALIGN and TZ as sent; TZ needs a calendar window among the call's. */
function laidOnClock(calendar: boolean, align: unknown, tz: unknown): Arg[] {
  if (align !== undefined && typeof align !== 'boolean') throw new RateLimitError('align must be a boolean');
  if (tz !== undefined && !calendar) throw new RateLimitError('TZ needs a calendar window (day, week, month or year)');
  return [...(align === true ? ['ALIGN'] : []), ...(tz === undefined ? [] : ['TZ', text(tz, 'tz')])];
}

const HIT = ['limit', 'windowMs', 'calendar', 'cost', 'align', 'tz'] as const;

/** RATELIMIT.HIT: `cost` against `limit` per fixed window (see FixedWindow); a denied hit counts
 * nothing. A negative `cost` gives that much back (never below 0, never denied, the window's end
 * kept). */
export const hit = define(['key', ...HIT], (key: string, o: FixedWindowOptions): Call<Decision> => {
  const { limit, windowMs, calendar, cost, align, tz } = options(o, HIT, 'hit');
  const [quota, [window, length]] = [integer(limit, 'limit'), fixedWindow(windowMs, calendar)];
  const args = [quota, window, ...signedCostArgs(cost), ...(length === null ? [] : ['MS']), ...laidOnClock(length === null, align, tz)];
  return { command: 'RATELIMIT.HIT', fn: 'ratelimit_hit', keys: [text(key, 'key')], args, parse: fixed(quota, length, cost ?? 1) };
});

export interface PeekOptions {
  limit: number;
  cost?: number;
}

const PEEK = ['limit', 'cost'] as const;

/** RATELIMIT.PEEK: what HIT would answer, without counting (read-only: replicas too). */
export const peek = define(['key', ...PEEK], (key: string, o: PeekOptions): Call<Decision> => {
  const { limit, cost } = options(o, PEEK, 'peek');
  const quota = integer(limit, 'limit');
  const args = [quota, ...costArgs(cost)];
  return { command: 'RATELIMIT.PEEK', fn: 'ratelimit_peek', keys: [text(key, 'key')], args, parse: fixed(quota, null, cost ?? 1), readonly: true, writesNothing: true };
});

export interface SlideOptions extends WindowOptions {
  /** What the call would get, writing nothing. */
  peek?: boolean;
}

const SLIDE = ['limit', 'windowMs', 'cost', 'peek'] as const;

/** RATELIMIT.SLIDE: `limit` per sliding window of `windowMs`, in one key; with `peek`, what the
 * call would get, writing nothing. A negative `cost` gives back to the current window. */
export const slide = define(['key', ...SLIDE], (key: string, o: SlideOptions): Call<Decision> => {
  const { limit, windowMs, cost, peek: peeking } = options(o, SLIDE, 'slide');
  const [quota, window] = [integer(limit, 'limit'), duration(windowMs, 'windowMs')];
  const args = [quota, window, ...signedCostArgs(cost), 'MS', ...(peeking === true ? ['PEEK'] : [])];
  const writesNothing = peeking === true;
  return { command: 'RATELIMIT.SLIDE', fn: 'ratelimit_slide', keys: [text(key, 'key')], args, parse: sliding(quota, window), writesNothing };
});

/** One of HITALL's limits. */
export type KeyedLimit = FixedWindow & {
  key: string;
  limit: number;
};

export interface HitAllOptions {
  /** What the call counts against every limit (default 1). */
  cost?: number;
  /** Sliding windows (default: fixed). */
  slide?: boolean;
  /** Fixed windows start at multiples of their length since the Unix epoch. */
  align?: boolean;
  /** The calendar windows' time zone (default UTC). */
  tz?: string;
  /** What the last `tokenKeys` limits count instead of `cost`: a request's tokens. */
  tokens?: number;
  /** How many of the last limits count `tokens` (default 1). */
  tokenKeys?: number;
}

const HITALL = ['cost', 'slide', 'align', 'tz', 'tokens', 'tokenKeys'] as const;

/** RATELIMIT.HITALL: one hit against several limits, all or nothing; each limit names its key. */
export const hitAll = define(
  ['key', 'limit', 'windowMs', 'calendar', ...HITALL],
  (limits: readonly KeyedLimit[], o?: HitAllOptions): Call<MultiDecision> => {
    const { cost, slide: slides, align, tz, tokens, tokenKeys = 1 } = options(o, HITALL, 'hitAll');
    const given: unknown = limits;
    if (!Array.isArray(given) || limits.length === 0) throw new RateLimitError('hitAll needs one or more {key, limit, windowMs}');
    const checked = limits.map((l) => {
      const [window, windowMs] = fixedWindow(l.windowMs, l.calendar);
      return { ...options(l, ['key', 'limit', 'windowMs', 'calendar'], 'hitAll'), key: text(l.key, 'key'), limit: integer(l.limit, 'limit'), window, windowMs };
    });
    const keys = checked.map((l) => l.key);
    if (new Set(keys).size !== keys.length) throw new RateLimitError('each key may be given only once');
    const calendar = checked.some((l) => l.windowMs === null);
    if (slides === true && (align === true || calendar)) {
      throw new RateLimitError(`syntax error: SLIDE and ${align === true ? 'ALIGN' : 'a calendar window'} cannot be given together`);
    }
    // MS applies to every window and not to a calendar one: beside one, the others go in seconds.
    const inSeconds = (w: Arg): Arg => {
      if (typeof w === 'string') return w;
      if (w % 1000 !== 0) throw new RateLimitError('beside a calendar window, windowMs must be whole seconds');
      return w / 1000;
    };
    const windows = checked.map((l) => (calendar ? inSeconds(l.window) : l.window));
    const args = [
      ...checked.flatMap((l, i) => [l.limit, windows[i] ?? l.window]),
      ...costArgs(cost),
      ...(calendar ? [] : ['MS']),
      ...(slides === true ? ['SLIDE'] : []),
      ...laidOnClock(calendar, align, tz),
    ];
    const charged = checked.map(() => cost ?? 1);
    if (tokens !== undefined) {
      const amount = integer(tokens, 'TOKENS');
      if (!Number.isSafeInteger(tokenKeys) || tokenKeys < 1 || tokenKeys > checked.length) {
        throw new RateLimitError("TOKENS' key count must be between 1 and numkeys");
      }
      charged.fill(amount, checked.length - tokenKeys);
      args.push('TOKENS', amount, tokenKeys);
    }
    const parse = (reply: unknown): MultiDecision => {
      const [allowed, ...rows] = row(reply, checked.length + 1);
      const decisions = checked.map(({ limit, windowMs }, i) => {
        const numbers = (rows[i] as unknown[]).map(int);
        // SLIDE's rows: [count, remaining, retry_after_ms, reset_ms], retry_after_ms -1 where that limit admits.
        if (slides === true) return sliding(limit, windowMs)([(numbers[2] ?? 0) < 0 ? 1 : 0, ...numbers]);
        const [count = 0] = numbers;
        const spent = charged[i] ?? 1;
        const fits = int(allowed) === 1 || count + spent <= limit;
        return fixed(limit, windowMs, spent)([fits ? 1 : 0, ...numbers]);
      });
      return new MultiDecision(int(allowed) === 1, decisions);
    };
    return { command: 'RATELIMIT.HITALL', fn: 'ratelimit_hitall', keys, args, parse, numkeys: true };
  },
);

export interface GcraOptions {
  /** The burst, less one: the bucket holds `maxBurst + 1`. */
  maxBurst: number;
  tokensPerPeriod: number;
  periodMs: number;
  /** What the call takes (default 1); negative ones are given back. */
  tokens?: number;
  /** The tokens come back `tokensPerPeriod` at once, at each multiple of `periodMs` since the Unix
   * epoch (Spring Cloud Gateway's bucket, with `periodMs` 1000). */
  align?: boolean;
}

const RESERVE_GCRA = ['maxBurst', 'tokensPerPeriod', 'periodMs', 'tokens'] as const;
const GCRA = [...RESERVE_GCRA, 'align'] as const;

/** The module's bound on a bucket's spans in ns: half of i64. */
const MAX_SPAN_NS = (1n << 62n) - 1n;

/** Refuses a bucket whose spans in ns would pass MAX_SPAN_NS, as the module does. */
function gcraSpans(maxBurst: number, tokensPerPeriod: number, periodMs: number, tokens: number): void {
  let emissionNs = (BigInt(periodMs) * 1_000_000n) / BigInt(tokensPerPeriod);
  emissionNs = emissionNs < 1n ? 1n : emissionNs;
  if (emissionNs * (BigInt(maxBurst) + 1n) > MAX_SPAN_NS) {
    throw new RateLimitError('(max_burst + 1) * period / tokens_per_period would cause an overflow');
  }
  if (emissionNs * BigInt(Math.abs(tokens)) > MAX_SPAN_NS) {
    throw new RateLimitError('TOKENS * period / tokens_per_period would cause an overflow');
  }
}

/** RATELIMIT.GCRA: a burst of `maxBurst + 1`, then `tokensPerPeriod` per `periodMs`. */
export const gcra = define(['key', ...GCRA], (key: string, o: GcraOptions): Call<Decision> => {
  const { maxBurst, tokensPerPeriod, periodMs, tokens, align } = options(o, GCRA, 'gcra');
  const period = duration(periodMs, 'periodMs');
  const [burst, rate] = [integer(maxBurst, 'maxBurst', 0), integer(tokensPerPeriod, 'tokensPerPeriod')];
  const args = [burst, rate, String(period / 1000), ...signedCostArgs(tokens, 'TOKENS'), ...laidOnClock(false, align, undefined)];
  gcraSpans(burst, rate, period, tokens ?? 1);
  return { command: 'RATELIMIT.GCRA', fn: 'ratelimit_gcra', keys: [text(key, 'key')], args, parse: bucket(period) };
});

export interface GcraUpToOptions extends GcraOptions {
  /** The most the call takes (>= 1). */
  tokens: number;
}

/** RATELIMIT.GCRA with PARTIAL: as many of `tokens` as the bucket has whole, at least one. Granted
 * fewer than asked, the bucket is left empty (the part of the next token goes with them); none,
 * it is denied until one comes back. */
export const gcraUpTo = define(['key', ...GCRA], (key: string, o: GcraUpToOptions): Call<Grant> => {
  const call = gcra(key, { ...o, tokens: integer(o.tokens, 'TOKENS') });
  return granting(call, call.parse, 5);
});

/** `call` with PARTIAL: its decision (`decided` reads its `numbers` first elements), then the
 * count granted. */
function granting(call: Call<Decision>, decided: (reply: unknown) => Decision, numbers: number): Call<Grant> {
  const parse = (reply: unknown): Grant => {
    const items = row(reply, numbers + 1);
    return new Grant(decided(items.slice(0, numbers)), int(items[numbers]));
  };
  return { ...call, args: [...call.args, 'PARTIAL'], parse };
}

/** RATELIMIT.HIT with PARTIAL: as much of `cost` as the window has left, at least one; none
 * left, it is denied (until the window ends, whatever the cost). */
export const hitUpTo = define(['key', ...HIT], (key: string, o: FixedWindowOptions & { cost: number }): Call<Grant> => {
  const call = hit(key, { ...o, cost: upTo(o.cost) });
  return granting(call, hit(key, { ...o, cost: 1 }).parse, 4);
});

/** RATELIMIT.SLIDE with PARTIAL: as much of `cost` as the sliding window's estimate has room for,
 * at least one (a denial's retry is for one). */
export const slideUpTo = define(['key', 'limit', 'windowMs', 'cost'], (key: string, o: WindowOptions & { cost: number }): Call<Grant> => {
  const call = slide(key, { ...o, cost: upTo(o.cost) });
  return granting(call, call.parse, 5);
});

/** What a give-back returns: `amount` (>= 1). */
export interface GiveBack {
  amount: number;
}

/** `amount` given back to the fixed window running now: `hit` with a negative cost (never below
 * 0, the window's end kept). A call counted in an earlier window is refunded there only by
 * settling its reservation. */
export const refundHit = define(['key', ...HIT.filter((n) => n !== 'cost'), 'amount'], (key: string, o: FixedWindow & GiveBack & Omit<FixedWindowOptions, 'cost' | keyof FixedWindow>): Call<Decision> => {
  const { amount, ...window } = options(o, [...HIT.filter((n) => n !== 'cost'), 'amount'], 'refundHit');
  return hit(key, { ...(window as FixedWindowOptions), cost: -integer(amount, 'amount') });
});

/** `amount` given back to the sliding window's current window: `slide` with a negative cost. */
export const refundSlide = define(['key', 'limit', 'windowMs', 'amount'], (key: string, o: Omit<WindowOptions, 'cost'> & GiveBack): Call<Decision> => {
  const { amount, ...window } = options(o, ['limit', 'windowMs', 'amount'], 'refundSlide');
  return slide(key, { ...(window as WindowOptions), cost: -integer(amount, 'amount') });
});

/** `amount` tokens given back to the bucket: `gcra` with negative tokens (its TAT moves back,
 * never before now). */
export const refundGcra = define(['key', 'maxBurst', 'tokensPerPeriod', 'periodMs', 'amount'], (key: string, o: Omit<GcraOptions, 'tokens' | 'align'> & GiveBack): Call<Decision> => {
  const { amount, ...bucket } = options(o, ['maxBurst', 'tokensPerPeriod', 'periodMs', 'amount'], 'refundGcra');
  return gcra(key, { ...(bucket as GcraOptions), tokens: -integer(amount, 'amount') });
});

export interface RefundOptions {
  limit: number;
  windowMs: number;
  /** The key is a sliding window's (SLIDE's). */
  sliding?: boolean;
}

/** @deprecated `refundHit` (`refundSlide` with `sliding`). */
export const refund = define(['key', 'amount', 'limit', 'windowMs', 'sliding'], (key: string, amount: number, o: RefundOptions): Call<Decision> => {
  options(o, ['limit', 'windowMs', 'sliding'], 'refund');
  const given = { limit: o.limit, windowMs: o.windowMs, amount };
  return o.sliding === true ? refundSlide(key, given) : refundHit(key, given);
});

function reserving(call: Call<Decision>, amount: number): Call<Reservation> {
  const parse = (reply: unknown): Reservation => {
    const numbers = Array.isArray(reply) ? (reply as unknown[]).slice(0, -1) : reply;
    const token = Array.isArray(reply) ? (reply as unknown[]).at(-1) : null;
    return new Reservation(call.keys[0] ?? '', call.parse(numbers), optionalText(token), amount);
  };
  return { ...call, args: [...call.args, 'RESERVE'], parse };
}

export interface ReserveWindowOptions extends WindowOptions {
  /** The estimate, decided and counted now (>= 1). */
  cost: number;
}

/** HIT's window with RESERVE: as `hit` takes it; one laid on the clock (`align`, a calendar one)
 * goes in the reservation, so that an overage settled after it ended counts in the next. */
export type ReserveHitOptions = FixedWindowOptions & {
  /** The estimate, decided and counted now (>= 1). */
  cost: number;
};

/** SLIDE's window with RESERVE. */
const RESERVE_WINDOW = ['limit', 'windowMs', 'cost'] as const;

/** RATELIMIT.HIT with RESERVE: `cost` (the estimate) decided and counted as by `hit`, and a
 * reservation to settle with what was used. */
export const reserveHit = define(['key', ...HIT], (key: string, o: ReserveHitOptions): Call<Reservation> =>
  reserving(hit(key, { ...o, cost: reserved(o.cost, 'COST') }), o.cost),
);

/** `call` with PARTIAL and RESERVE: its decision (`decided` reads its `numbers` first elements),
 * then the count granted and a reservation of that count. */
function reservingUpTo(call: Call<Decision>, decided: (reply: unknown) => Decision, numbers: number): Call<Reservation> {
  const parse = (reply: unknown): Reservation => {
    const items = row(reply, numbers + 2);
    const token = optionalText(items[numbers + 1]);
    return new Reservation(call.keys[0] ?? '', decided(items.slice(0, numbers)), token, int(items[numbers]));
  };
  return { ...call, args: [...call.args, 'PARTIAL', 'RESERVE'], parse };
}

/** PARTIAL's cost (or tokens): at least one. */
function upTo(cost: number, token = 'COST'): number {
  if (!isInteger(cost) || cost < 1) throw new RateLimitError(`PARTIAL needs ${token} >= 1`);
  return cost;
}

/** RATELIMIT.HIT with PARTIAL and RESERVE: as much of `cost` as the window has left, at least
 * one, counted now, and a reservation of what was granted (its `amount`; 0, and no token, when
 * none was left): a block of hits to spend locally, whose unused part `settle` gives back while
 * the window runs. */
export const reserveHitUpTo = define(['key', ...HIT], (key: string, o: ReserveHitOptions): Call<Reservation> => {
  const call = hit(key, { ...o, cost: upTo(o.cost) });
  // Denied only with none left: then again when the window ends, whatever the cost.
  return reservingUpTo(call, hit(key, { ...o, cost: 1 }).parse, 4);
});

/** RATELIMIT.SLIDE with PARTIAL and RESERVE: as much of `cost` as the sliding window's estimate
 * has room for, at least one, and a reservation of what was granted (its `amount`; 0, and no
 * token, when there was no room; a denial's retry is for one). */
export const reserveSlideUpTo = define(
  ['key', ...RESERVE_WINDOW],
  (key: string, o: ReserveWindowOptions): Call<Reservation> => {
    const call = slide(key, { ...o, cost: upTo(o.cost) });
    return reservingUpTo(call, call.parse, 5);
  },
);

/** RATELIMIT.SLIDE with RESERVE: as `slide`, and a reservation to settle. */
export const reserveSlide = define(['key', ...RESERVE_WINDOW], (key: string, o: ReserveWindowOptions): Call<Reservation> =>
  reserving(slide(key, { ...o, cost: reserved(o.cost, 'COST') }), o.cost),
);

export interface ReserveGcraOptions extends Omit<GcraOptions, 'align'> {
  tokens: number;
}

/** RATELIMIT.GCRA with RESERVE: as `gcra`, and a reservation to settle (not aligned: a settle gives
 * back against the running clock). */
export const reserveGcra = define(['key', ...RESERVE_GCRA], (key: string, o: ReserveGcraOptions): Call<Reservation> => {
  options(o, RESERVE_GCRA, 'reserveGcra');
  return reserving(gcra(key, { ...o, tokens: reserved(o.tokens, 'TOKENS') }), o.tokens);
});

/** RATELIMIT.GCRA with PARTIAL and RESERVE: as many of `tokens` as the bucket has whole, at least
 * one, and a reservation of what was granted (its `amount`; 0, and no token, when none was). */
export const reserveGcraUpTo = define(['key', ...RESERVE_GCRA], (key: string, o: ReserveGcraOptions): Call<Reservation> => {
  options(o, RESERVE_GCRA, 'reserveGcraUpTo');
  const call = gcra(key, { ...o, tokens: upTo(o.tokens, 'TOKENS') });
  return reservingUpTo(call, call.parse, 5);
});

export interface ReserveAllOptions extends HitAllOptions {
  /** The request's estimate, counted on the last `tokenKeys` limits and reserved there (>= 1). */
  tokens: number;
}

/** RATELIMIT.HITALL with TOKENS and RESERVE: a request's limits decided together (the last
 * `tokenKeys` count `tokens`, its estimate; the others `cost`), and one reservation of those token
 * keys, settled with the tokens used on all of them: `settle(r.keys, r.token, used)`. */
export const reserveAll = define(
  ['key', 'limit', 'windowMs', 'calendar', ...HITALL],
  (limits: readonly KeyedLimit[], o: ReserveAllOptions): Call<MultiReservation> => {
    const call = hitAll(limits, o);
    const keys = call.keys.slice(call.keys.length - (o.tokenKeys ?? 1));
    const parse = (reply: unknown): MultiReservation => {
      const items = Array.isArray(reply) ? (reply as unknown[]) : [];
      return new MultiReservation(keys, call.parse(items.slice(0, -1)), optionalText(items.at(-1)), o.tokens);
    };
    return { ...call, args: [...call.args, 'RESERVE'], parse };
  },
);

/** One key's SETTLE reply: the reserving command's numbers, what was applied, then what the
 * reservation was of (its limiter, its limit, its window in ms: -1 for none), so that the
 * reservation itself stays opaque. */
function settlement(reply: unknown): Settlement {
  const items = Array.isArray(reply) ? (reply as unknown[]) : [];
  const [kind, limit, windowMs] = [replyText(items.at(-3)), int(items.at(-2)), int(items.at(-1))];
  const window = windowMs < 0 ? null : windowMs;
  const readers: Record<string, (reply: unknown) => Decision> = {
    fixed: fixed(limit, window, 1),
    sliding: sliding(limit, window),
    adaptive: adaptive(windowMs),
  };
  const decision = readers[kind] ?? bucket(null);
  return { decision: decision(items.slice(0, -4)), applied: int(items.at(-4)) };
}

/** RATELIMIT.SETTLE: the reservation made on `key` settled with `used`: the unused part back to
 * the window it was counted in while that still counts, more than reserved charged to the
 * current one. At most once: settled again (a retry), it changes nothing and answers what the
 * first applied. A `reserveAll` reservation is settled on its token keys (an array), one
 * Settlement each. */
export const settle = define(['key', 'reservation', 'used'], settleOn) as unknown as {
  (key: string, reservation: string, used: number): Call<Settlement>;
  (keys: readonly string[], reservation: string, used: number): Call<Settlement[]>;
  readonly params: readonly string[];
};

function settleOn(key: string | readonly string[], reservation: string, used: number): Call<Settlement | Settlement[]> {
  text(reservation, 'reservation');
  integer(used, 'used', 0);
  const keys = typeof key === 'string' ? [text(key, 'key')] : key.map((k) => text(k, 'key'));
  if (keys.length === 0) throw new RateLimitError('settle needs a key');
  if (new Set(keys).size !== keys.length) throw new RateLimitError('each key may be given only once');
  // One key's reply is flat, several keys' one per key.
  const parse =
    typeof key === 'string'
      ? settlement
      : keys.length === 1
        ? (reply: unknown): Settlement[] => [settlement(reply)]
        : (reply: unknown): Settlement[] => (Array.isArray(reply) ? (reply as unknown[]) : []).map(settlement);
  return { command: 'RATELIMIT.SETTLE', fn: 'ratelimit_settle', keys, args: [reservation, used], parse };
}

export interface AcquireOptions {
  /** At most this many permits in flight. */
  limit: number;
  /** The lease, in milliseconds: a permit not renewed or released in time frees itself. */
  leaseMs: number;
  /** The lease's id (default: a new UUID); a retry with the same id is counted once. */
  id?: string;
}

const ACQUIRE = ['limit', 'leaseMs', 'id'] as const;

/** RATELIMIT.ACQUIRE: one of at most `limit` permits in flight, a lease of `leaseMs` under `id`. */
export const acquire = define(['key', ...ACQUIRE], (key: string, o: AcquireOptions): Call<Acquisition> => {
  const { limit, leaseMs, id } = options(o, ACQUIRE, 'acquire');
  const args = [integer(limit, 'limit'), duration(leaseMs, 'leaseMs'), 'MS', 'ID', leaseId(id)];
  const parse = (reply: unknown): Acquisition => {
    const [acquired, inUse, remaining, ms, held] = row(reply, 5);
    return new Acquisition(int(acquired) === 1, int(inUse), int(remaining), int(ms), optionalText(held));
  };
  return { command: 'RATELIMIT.ACQUIRE', fn: 'ratelimit_acquire', keys: [text(key, 'key')], args, parse };
});

/** RATELIMIT.RELEASE: gives back the permit held under `id`; false if it was not live. */
export const release = define(['key', 'id'], (key: string, id: string): Call<boolean> => ({
  command: 'RATELIMIT.RELEASE',
  fn: 'ratelimit_release',
  keys: [text(key, 'key')],
  args: [leaseId(id)],
  parse: (reply) => int(reply) === 1,
}));

/** RATELIMIT.RENEW: extends the live lease under `id` to `leaseMs` from now; answers the ms it now
 * has, or null when it was lost (ended: stop, or acquire again). */
export const renew = define(['key', 'id', 'leaseMs'], (key: string, id: string, leaseMs: number): Call<number | null> => ({
  command: 'RATELIMIT.RENEW',
  fn: 'ratelimit_renew',
  keys: [text(key, 'key')],
  args: [leaseId(id), duration(leaseMs, 'leaseMs'), 'MS'],
  parse: (reply) => (int(reply) < 0 ? null : int(reply)),
}));

export interface TopOptions {
  /** 'denied' (default): the keys denied most; 'admitted': those admitted the most cost;
   * 'shadowed': those shadow mode admitted most that their limit denied. */
  view?: 'denied' | 'admitted' | 'shadowed';
  count?: number;
  /** Empty the view after reading it. */
  reset?: boolean;
}

const TOP = ['view', 'count', 'reset'] as const;

/** A map as RESP3 gives it (an object or a Map), or as RESP2's flat list of names and values. */
export function fields(reply: unknown): Map<string, unknown> {
  if (reply instanceof Map) return new Map([...(reply as Map<unknown, unknown>)].map(([k, v]) => [replyText(k), v]));
  if (Array.isArray(reply)) {
    const pairs = reply as unknown[];
    return new Map(pairs.flatMap((k, i) => (i % 2 === 0 ? [[replyText(k), pairs[i + 1]] as const] : [])));
  }
  return new Map(Object.entries(reply as object));
}

/** RATELIMIT.TOP (the module only): the keys this node denied most (or admitted the most cost for,
 * or would have denied most in shadow mode) over the last minute or two, each count with its error
 * bound. */
export const top = define([...TOP], (o?: TopOptions): Call<TopEntry[]> => {
  const { view = 'denied', count, reset } = options(o, TOP, 'top');
  const asked: string = view;
  if (asked !== 'denied' && asked !== 'admitted' && asked !== 'shadowed') {
    throw new RateLimitError("view must be 'denied', 'admitted' or 'shadowed'");
  }
  const args: Arg[] = [view.toUpperCase(), ...(count === undefined ? [] : ['COUNT', integer(count, 'COUNT')]), ...(reset === true ? ['RESET'] : [])];
  const parse = (reply: unknown): TopEntry[] =>
    (reply as unknown[]).map((entry) => {
      const named = fields(entry);
      return { key: replyText(named.get('key')), count: int(named.get('count')), error: int(named.get('error')) };
    });
  return { command: 'RATELIMIT.TOP', fn: '', keys: [], args, parse, readonly: true, writesNothing: true };
});

// The adaptive limit: every scaled quantity of the module's stays within 2^50.
const MAX_SCALED = 2 ** 50;
const MAX_SPAN_MS = 2 ** 40;

export interface AdaptOptions {
  /** The lowest the learned limit goes, per window. */
  floor: number;
  /** Where a new key starts. */
  start: number;
  /** The highest the learned limit goes. */
  ceiling: number;
  windowMs: number;
  /** The tokens this call takes (default 1). */
  cost?: number;
  /** The caller is back at the `retryAfterMs` a denial told it (TURN): it is then admitted on a
   * bucket not in debt, so that no one who was not waiting takes its turn. */
  turn?: boolean;
}

const ADAPT = ['floor', 'start', 'ceiling', 'windowMs', 'cost', 'turn'] as const;

/** ADAPT's [allowed, limit, remaining, retry_after_ms, reset_ms]. */
function adaptive(windowMs: number) {
  return (reply: unknown): Decision => {
    const [allowed, limit, remaining, retryMs, resetMs] = row(reply, 5).map(int) as [number, number, number, number, number];
    return new Decision(allowed === 1, Math.max(limit - remaining, 0), remaining, resetMs, allowed === 1 ? null : retryMs, limit, windowMs);
  };
}

/** RATELIMIT.ADAPT: `cost` decided against the limit the fleet learns at `key` (per `windowMs`,
 * between `floor` and `ceiling`, starting at `start`), paced: at most a sixth of a window's limit at
 * once. The decision's `limit` is the learned one. See docs/adaptive.md. */
export const adapt = define(['key', ...ADAPT], (key: string, o: AdaptOptions): Call<Decision> => {
  const { floor, start, ceiling, windowMs, cost, turn } = options(o, ADAPT, 'adapt');
  const [low, first, high] = [integer(floor, 'floor'), integer(start, 'start'), integer(ceiling, 'ceiling')];
  const window = duration(windowMs, 'windowMs');
  if (window > MAX_SPAN_MS) throw new RateLimitError('window is too large');
  if (!(low <= first && first <= high)) throw new RateLimitError('floor <= start <= ceiling must hold');
  if (high * window > MAX_SCALED) throw new RateLimitError('ceiling * window is too large');
  if (integer(cost ?? 1, 'COST') * window > MAX_SCALED) throw new RateLimitError('COST * window is too large');
  const windowArgs: Arg[] = window % 1000 === 0 ? [window / 1000] : [window, 'MS'];
  const args = [low, first, high, ...windowArgs, ...costArgs(cost), ...(turn === true ? ['TURN'] : [])];
  return { command: 'RATELIMIT.ADAPT', fn: 'ratelimit_adapt', keys: [text(key, 'key')], args, parse: adaptive(window) };
});

/** RATELIMIT.ADAPT with PARTIAL: as many of `cost` as the bucket has whole, at least one. */
export const adaptUpTo = define(['key', ...ADAPT], (key: string, o: AdaptOptions & { cost: number }): Call<Grant> => {
  const call = adapt(key, { ...o, cost: upTo(o.cost) });
  return granting(call, call.parse, 5);
});

/** RATELIMIT.ADAPT with RESERVE: `cost` (the estimate: an LLM call's tokens before the answer)
 * decided and taken as by `adapt`, and a reservation to `settle` with what was used: the unused part
 * goes back to the fleet's bucket, and never counts as use that earns growth. */
export const reserveAdapt = define(['key', ...ADAPT], (key: string, o: AdaptOptions & { cost: number }): Call<Reservation> =>
  reserving(adapt(key, { ...o, cost: reserved(o.cost, 'COST') }), o.cost),
);

/** RATELIMIT.ADAPT with PARTIAL and RESERVE: as many of `cost` as the bucket has whole, at least
 * one, and a reservation of what was granted (its `amount`; 0, and no token, when none was). */
export const reserveAdaptUpTo = define(['key', ...ADAPT], (key: string, o: AdaptOptions & { cost: number }): Call<Reservation> => {
  const call = adapt(key, { ...o, cost: upTo(o.cost) });
  return reservingUpTo(call, call.parse, 5);
});

export type Outcome = 'ok' | 'throttled';

export interface ReportOptions {
  /** The provider's Retry-After (only with 'throttled'): no caller is admitted before it. */
  retryAfterMs?: number;
  /** The provider's stated limit per window: it caps the learned one. */
  limit?: number;
  /** What the provider says remains, until `resetAfterMs` (both or neither). */
  remaining?: number;
  resetAfterMs?: number;
  /** The ms since the call was decided (its ADAPT's answer): throttled though decided after the
   * epoch's cut, it cuts again (where no remaining is stated). */
  ageMs?: number;
}

const REPORT = ['retryAfterMs', 'limit', 'remaining', 'resetAfterMs', 'ageMs'] as const;

/** A provider's wait in whole ms, rounded up, within the module's bound. */
function spanMs(value: number, name: string): number {
  if (typeof value !== 'number' || !(value >= 0)) throw new RateLimitError(`${name} must be an integer >= 0`);
  const ms = Math.ceil(value - 1e-9);
  if (ms > MAX_SPAN_MS) throw new RateLimitError(`${name} is too large`);
  return ms;
}

/** RATELIMIT.REPORT: how the provider answered a call decided at `key`. 'throttled' cuts the
 * fleet's limit (once per epoch, however many callers report the same burst, and again for a call
 * decided after the cut, as `ageMs` tells) and with `retryAfterMs` holds every caller until then;
 * the provider's stated `limit` caps the learned one, its `remaining` bounds the fleet until
 * `resetAfterMs`. null where no limit is learned at `key`. */
export const report = define(['key', 'outcome', ...REPORT], (key: string, outcome: Outcome, o?: ReportOptions): Call<Learned | null> => {
  const { retryAfterMs, limit, remaining, resetAfterMs, ageMs } = options(o, REPORT, 'report');
  const said: string = outcome;
  if (said !== 'ok' && said !== 'throttled') throw new RateLimitError('outcome must be OK or THROTTLED');
  if ((remaining === undefined) !== (resetAfterMs === undefined)) {
    throw new RateLimitError(remaining === undefined ? 'syntax error: RESET needs REMAINING' : 'syntax error: REMAINING needs RESET');
  }
  if (retryAfterMs !== undefined && outcome === 'ok') throw new RateLimitError('syntax error: RETRY needs THROTTLED');
  const args: Arg[] = [outcome.toUpperCase()];
  if (retryAfterMs !== undefined) args.push('RETRY', spanMs(retryAfterMs, 'RETRY'));
  if (limit !== undefined) {
    if (integer(limit, 'LIMIT') > MAX_SCALED) throw new RateLimitError('LIMIT is too large');
    args.push('LIMIT', limit);
  }
  if (remaining !== undefined && resetAfterMs !== undefined) {
    if (integer(remaining, 'REMAINING', 0) > MAX_SCALED) throw new RateLimitError('REMAINING is too large');
    args.push('REMAINING', remaining, 'RESET', spanMs(resetAfterMs, 'RESET'));
  }
  if (ageMs !== undefined) args.push('AGE', spanMs(ageMs, 'AGE'));
  const parse = (reply: unknown): Learned | null => {
    if (reply === null || reply === undefined) return null;
    const [learned, decreased, holdMs] = row(reply, 3).map(int) as [number, number, number];
    return { limit: learned, decreased: decreased === 1, holdMs };
  };
  return { command: 'RATELIMIT.REPORT', fn: 'ratelimit_report', keys: [text(key, 'key')], args, parse };
});
