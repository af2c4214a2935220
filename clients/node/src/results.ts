// What the limiter commands answer, as typed values, and the HTTP headers each answer gives.
// Times are milliseconds, as the server gives them. `Infinity` stands for "never": a call that
// can never be admitted (a cost above the limit), or a counter without TTL (PEEK).

/** Milliseconds as the headers carry them: whole seconds rounded up (a client that waits that
 * long is admitted). */
export function wholeSeconds(ms: number): number {
  return ms > 0 ? Math.ceil(ms / 1000 - 1e-9) : 0;
}

/** One limit's answer (HIT, SLIDE, PEEK, GCRA, and each limit of HITALL). */
export class Decision {
  constructor(
    /** Admitted (with PEEK or SLIDE's `peek`: would be). */
    readonly allowed: boolean,
    /** The counter after the call (SLIDE: the estimate, rounded up; GCRA: tokens in use). */
    readonly count: number,
    /** What is left before the limit: `max(limit - count, 0)`. */
    readonly remaining: number,
    /** Until the window ends (SLIDE: until the estimate reaches 0; GCRA: until the bucket is
     * full); 0 when nothing is counted; `Infinity` for a counter without TTL (PEEK). */
    readonly resetAfterMs: number,
    /** null when allowed; else after how long the same call would be admitted if nothing else
     * happened (`Infinity`: never, the cost is above the limit). */
    readonly retryAfterMs: number | null,
    /** The quota: `limit` (GCRA: the capacity, `maxBurst + 1`). */
    readonly limit: number,
    /** The window (GCRA: the period); null where the call names none (PEEK). */
    readonly windowMs: number | null,
  ) {}

  /** `RateLimit-Policy` and `RateLimit` (the IETF draft's fields), and `Retry-After` when denied
   * (RFC 9110), in whole seconds rounded up. */
  headers(name = 'default'): Record<string, string> {
    return combinedHeaders([[name, this]]);
  }
}

function tighter(a: Decision, b: Decision): boolean {
  return a.remaining < b.remaining || (a.remaining === b.remaining && a.resetAfterMs > b.resetAfterMs);
}

/** HITALL's answer: one decision for several limits, all or nothing. */
export class MultiDecision {
  constructor(
    readonly allowed: boolean,
    /** Each limit's own answer, in the order given (`allowed` there: whether that limit alone
     * would admit the call). */
    readonly decisions: readonly Decision[],
  ) {}

  /** null when allowed; else when every limit that said no admits the call again. */
  get retryAfterMs(): number | null {
    if (this.allowed) return null;
    return Math.max(...this.decisions.map((d) => d.retryAfterMs ?? 0));
  }

  /** The most restrictive limit (the fewest remaining; among those, the latest reset). */
  get tightest(): Decision {
    return this.decisions.reduce((a, b) => (tighter(b, a) ? b : a));
  }

  /** Every limit in `RateLimit-Policy`, the tightest in `RateLimit`; `Retry-After` when denied.
   * `names` name the limits in order (default `limit0`, `limit1`...). */
  headers(names?: readonly string[]): Record<string, string> {
    const labels = names ?? this.decisions.map((_, i) => `limit${String(i)}`);
    if (labels.length !== this.decisions.length) {
      throw new RangeError(`${String(this.decisions.length)} names needed, ${String(labels.length)} given`);
    }
    return combinedHeaders(
      this.decisions.map((d, i) => [labels[i] ?? '', d]),
      this.retryAfterMs,
    );
  }
}

function policy(name: string, decision: Decision): string {
  const window = decision.windowMs === null ? '' : `;w=${String(Math.max(wholeSeconds(decision.windowMs), 1))}`;
  return `"${name}";q=${String(decision.limit)}${window}`;
}

/** The headers for several limits on one request: each in `RateLimit-Policy`, the tightest (fewest
 * remaining; of those that refused, when one did) in `RateLimit`, and `Retry-After` (by default the
 * largest of the denied limits': when all of them admit again). */
export function combinedHeaders(
  named: readonly (readonly [string, Decision])[],
  retryAfterMs: number | null = null,
): Record<string, string> {
  // A refusal names a limit that refused it, not a tighter one that admitted.
  const refusing = named.filter(([, d]) => !d.allowed);
  const [first, ...rest] = refusing.length > 0 ? refusing : named;
  if (first === undefined) return {};
  const [current, decision] = rest.reduce((a, b) => (tighter(b[1], a[1]) ? b : a), first);
  const denied = named.flatMap(([, d]) => (d.retryAfterMs === null ? [] : [d.retryAfterMs]));
  const retry = retryAfterMs ?? (denied.length > 0 ? Math.max(...denied) : null);
  const headers: Record<string, string> = {
    'RateLimit-Policy': named.map(([name, d]) => policy(name, d)).join(', '),
    RateLimit: `"${current}";r=${String(decision.remaining)};t=${String(wholeSeconds(Math.min(decision.resetAfterMs, 2 ** 31 * 1000)))}`,
  };
  if (retry !== null && Number.isFinite(retry)) headers['Retry-After'] = String(wholeSeconds(retry));
  return headers;
}

/** A reservation's answer read off its decision. */
abstract class Decided {
  abstract readonly decision: Decision | MultiDecision;

  get allowed(): boolean {
    return this.decision.allowed;
  }

  get retryAfterMs(): number | null {
    return this.decision.retryAfterMs;
  }
}

/** GCRA's answer with PARTIAL: the decision, and how many of the tokens asked were taken (at least
 * one when allowed, 0 when not). */
export class Grant extends Decided {
  constructor(
    readonly decision: Decision,
    readonly granted: number,
  ) {
    super();
  }
}

/** HIT's, SLIDE's or GCRA's answer with RESERVE: the decision, and the reservation to settle with
 * what was used (null when denied). */
export class Reservation extends Decided {
  constructor(
    readonly key: string,
    readonly decision: Decision,
    /** The reservation as the server made it: opaque, valid for `key` only, settled once. */
    readonly token: string | null,
    /** What was reserved: the call's cost, or its tokens. */
    readonly amount: number,
  ) {
    super();
  }
}

/** HITALL's answer with TOKENS and RESERVE: the decision on every limit, all or nothing, and one
 * reservation of the token keys to settle with what was used (null when denied). */
export class MultiReservation extends Decided {
  constructor(
    /** The token keys, in order: what the reservation is settled on. */
    readonly keys: readonly string[],
    readonly decision: MultiDecision,
    /** The reservation as the server made it: opaque, valid for `keys` only, settled once. */
    readonly token: string | null,
    /** The tokens reserved on each token key. */
    readonly amount: number,
  ) {
    super();
  }
}

/** SETTLE's answer: the limit as it stands after the adjustment, as for an admitted call, and what
 * was applied (negative: given back; positive: an overage charged; 0: nothing, as when the
 * reserved window had ended). */
export interface Settlement {
  readonly decision: Decision;
  readonly applied: number;
}

/** ACQUIRE's answer. */
export class Acquisition {
  constructor(
    /** A permit is held under `id` (new, or renewed when `id` held a live one). */
    readonly acquired: boolean,
    /** Live leases after the call. */
    readonly inUse: number,
    /** `max(limit - inUse, 0)`. */
    readonly remaining: number,
    /** Acquired: until this lease ends. Denied: until the earliest live lease ends, the soonest
     * a permit frees itself. */
    readonly expiresAfterMs: number,
    /** The lease's id (null when denied). */
    readonly id: string | null,
  ) {}

  /** null when acquired; else `expiresAfterMs`. */
  get retryAfterMs(): number | null {
    return this.acquired ? null : this.expiresAfterMs;
  }
}

/** One key of RATELIMIT.TOP: denied calls (or admitted cost), at most `error` too many. */
export interface TopEntry {
  readonly key: string;
  readonly count: number;
  readonly error: number;
}

/** What a report taught an adaptive limit (RATELIMIT.REPORT's answer). */
export interface Learned {
  /** The fleet's limit per window now. */
  readonly limit: number;
  /** This report cut it (the first throttle of its epoch). */
  readonly decreased: boolean;
  /** Until any caller is admitted again (a provider's Retry-After); 0 when not held. */
  readonly holdMs: number;
}
