/** Hot limits: one process's share of a limit many processes share (a partner's requests a second
 * across a fleet), as the Go client's HotLimit. The process takes blocks of tokens from the server
 * (HIT ... PARTIAL RESERVE) and decides locally, with no round trip, until a block is spent or its
 * deadline: the instant its request was sent, plus the time the server said its window had left,
 * less a guard. A token is never used after its deadline, so every admission falls in the window
 * that granted it, whatever the offset between the hosts' clocks: never over the limit.
 *
 * `HotState` is the decisions, with no I/O and no clock of its own (every instant is ms on the
 * process's monotonic clock, given by the caller); `HotLimit` runs it, and
 * test/hot-simulation.test.ts runs it against a model of the server. */

import { RateLimitError } from './errors.js';
import type { Reservation } from './results.js';

/** `take` after `close`. */
export class HotLimitClosed extends RateLimitError {
  override name = 'HotLimitClosed';
}

/** One grant: tokens left, usable before `deadline`, and the reservation that settles what was
 * not used. */
export interface Block {
  left: number;
  deadline: number;
  grant: Reservation;
}

/** What to do for a take: admit or deny it; send a request (for `send` tokens); wait for the
 * answer in flight (`wait`), or until `sleepUntil`; then step again. */
export interface Step {
  admitted?: boolean;
  denied?: boolean;
  send?: number;
  wait?: boolean;
  sleepUntil?: number;
}

/** A hot limit's decisions: the blocks held, the local demand, the deny until the window resets.
 * The same rules as the Go client's hotState. */
export class HotState {
  blocks: Block[] = [];
  asking = false;
  waiting = 0;
  deniedUntil = -Infinity;
  pausedUntil = -Infinity;
  taken = 0;
  rate = 0; // tokens per ms
  remaining = -1;
  windowEnd = -Infinity;
  since: number;

  constructor(
    readonly limit: number,
    readonly horizonMs: number,
    readonly guardMs: number,
    now: number,
  ) {
    this.since = now;
  }

  held(now: number): number {
    return this.blocks.reduce((n, b) => (now < b.deadline ? n + b.left : n), 0);
  }

  #drop(now: number): void {
    this.blocks = this.blocks.filter((b) => b.left > 0 && now < b.deadline);
  }

  #take(now: number, n: number): boolean {
    this.#drop(now);
    if (this.held(now) < n) return false;
    for (const b of this.blocks) {
      const spent = Math.min(n, b.left);
      b.left -= spent;
      n -= spent;
    }
    this.#drop(now);
    return true;
  }

  denied(now: number): boolean {
    return now < this.deniedUntil;
  }

  /** How many tokens to ask for now (0: no request): a horizon of demand (measured over a horizon
   * at least: none before), at least `need`, no more than the demand spends before the window ends
   * nor an eighth of what the server had left (of the limit, in a window not seen yet); only with
   * none in flight, no deny, and less than half a horizon (or `need`) held. */
  #ask(now: number, need: number): number {
    if (this.asking || this.denied(now) || now < this.pausedUntil) return 0;
    const held = this.held(now);
    const elapsed = now - this.since;
    if (elapsed >= this.horizonMs) {
      this.rate = this.taken / elapsed;
      this.taken = 0;
      this.since = now;
    }
    let want = Math.ceil(this.rate * this.horizonMs);
    if (held >= need && (held > want / 2 || want === 0)) return 0;
    let left = this.limit;
    if (now < this.windowEnd) {
      want = Math.min(want, Math.ceil(this.rate * (this.windowEnd - now)));
      left = this.remaining;
    }
    want = Math.min(want, Math.max(1, Math.floor(left / 8)));
    this.asking = true;
    return Math.max(want, need - held, 1);
  }

  /** A take of `n` at `now`, its `tries`th step (a step after an answer is a try; `waited`: it
   * was counted among those waiting). Denied only when the server said the window has none left:
   * a take whose tokens others spent first waits for the next answer, however often (each grant
   * spends the window, so the server says so within the limit's count of answers). */
  step(now: number, n: number, tries: number, waited: boolean): Step {
    if (waited) this.waiting -= n;
    if (tries === 0) this.taken += n;
    if (this.#take(now, n)) return { admitted: true, send: this.#ask(now, this.waiting) };
    if (this.denied(now)) return { denied: true };
    const want = this.#ask(now, n + this.waiting);
    if (want > 0 || this.asking) {
      this.waiting += n;
      return { send: want, wait: true };
    }
    return { sleepUntil: this.pausedUntil };
  }

  /** A take that stopped waiting (its timeout or signal). */
  gaveUp(n: number): void {
    this.waiting -= n;
  }

  /** The answer to the request sent at `sent`: a block usable until the window's end as the server
   * saw it, less the guard, counted from the send. A grant of 0, or one that left none, makes the
   * window denied until it resets; one too late to use waits for the next. */
  granted(sent: number, received: number, r: Reservation): void {
    this.asking = false;
    // The guard, and a thousandth of the time the window had left for the clocks' rates.
    const guard = this.guardMs + r.decision.resetAfterMs / 1000;
    const reset = received + r.decision.resetAfterMs + guard;
    const deadline = sent + r.decision.resetAfterMs - guard;
    if (r.amount > 0 && received < deadline) {
      this.blocks.push({ left: r.amount, deadline, grant: r });
      this.remaining = r.decision.remaining;
      this.windowEnd = deadline;
    } else if (r.amount > 0) {
      this.pausedUntil = reset;
      return;
    }
    if (r.amount === 0 || r.decision.remaining === 0) this.deniedUntil = reset;
  }

  failed(): void {
    this.asking = false;
  }

  /** The live blocks, to settle at the end (what of each was used: amount - left). */
  unused(now: number): Block[] {
    this.#drop(now);
    const live = this.blocks;
    this.blocks = [];
    return live;
  }
}

/** What a hot limit sends: its grants (HIT PARTIAL RESERVE) and the settles at close. */
export interface HotTransport {
  reserve(want: number): Promise<Reservation>;
  settle(grant: Reservation, used: number): Promise<unknown>;
}

export interface HotOptions {
  /** How much of this process's demand a block covers (default 10 ms). */
  horizonMs?: number;
  /** Taken off each block's deadline, for scheduling and reset_ms's whole milliseconds (default
   * 2 ms); a thousandth of the time the window had left is taken off too, for the clocks' rates. */
  guardMs?: number;
  /** Admit when Redis cannot be reached and too few are held (default: deny, by throwing). */
  failOpen?: boolean;
}

/** This process's share of a limit on one key (`RateLimiter.hot`): `take` admits from the blocks
 * held, waiting for one when it holds too few; `close` gives back what it holds. */
export class HotLimit {
  readonly #state: HotState;
  readonly #now: () => number;
  #error: unknown = null;
  #closed = false;
  #answered: (() => void)[] = [];
  /** The request in flight, settled when answered (null when none is). */
  #inflight: Promise<void> | null = null;

  constructor(
    readonly transport: HotTransport,
    readonly limit: number,
    readonly horizonMs: number,
    readonly guardMs: number,
    readonly failOpen: boolean,
    now: () => number = () => performance.now(),
  ) {
    this.#now = now;
    this.#state = new HotState(limit, horizonMs, guardMs, now());
  }

  /** Admits `n` tokens, or not (the window has none left for them); waits for a block while the
   * signal allows. Redis unreachable with too few held: its error, or true with `failOpen`. */
  async take(n = 1, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    if (!Number.isSafeInteger(n) || n < 1) throw new RateLimitError('take needs n >= 1');
    let tries = 0;
    let waited = false;
    for (;;) {
      if (this.#closed) {
        if (waited) this.#state.gaveUp(n);
        throw new HotLimitClosed('the hot limit is closed');
      }
      const now = this.#now();
      const step = this.#state.step(now, n, tries, waited);
      waited = step.wait === true;
      if (step.send) this.#request(step.send);
      if (step.admitted || step.denied) return step.admitted === true;
      if (!step.wait) {
        // The window is ending: the next one's tokens, when it starts.
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, (step.sleepUntil ?? now) - now)));
        continue;
      }
      try {
        await this.#answer(options.signal);
      } catch (e) {
        this.#state.gaveUp(n);
        throw e;
      }
      tries++;
      if (this.#error !== null) {
        this.#state.gaveUp(n);
        // Open only where Redis could not be reached (or a replica did not acknowledge:
        // NotReplicatedError), not where it refused the call (a RateLimitError).
        if (this.failOpen && !(this.#error instanceof RateLimitError)) return true;
        throw this.#error instanceof Error ? this.#error : new RateLimitError('the request for a block failed', { cause: this.#error });
      }
    }
  }

  /** Resolves at the next answer (or close), rejects when the signal aborts. */
  #answer(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const reason = () => (signal?.reason instanceof Error ? signal.reason : new RateLimitError('the take was aborted'));
      if (signal?.aborted) {
        reject(reason());
        return;
      }
      const done = () => {
        signal?.removeEventListener('abort', aborted);
        resolve();
      };
      const aborted = () => {
        this.#answered = this.#answered.filter((f) => f !== done);
        reject(reason());
      };
      signal?.addEventListener('abort', aborted, { once: true });
      this.#answered.push(done);
    });
  }

  #wake(): void {
    const waiting = this.#answered;
    this.#answered = [];
    for (const done of waiting) done();
  }

  #request(want: number): void {
    const sent = this.#now();
    this.#inflight = this.transport.reserve(want).then(
      (r) => {
        this.#state.granted(sent, this.#now(), r);
        this.#error = null;
        this.#wake();
      },
      (e: unknown) => {
        this.#state.failed();
        this.#error = e;
        this.#wake();
      },
    );
  }

  /** Gives back the tokens held of windows still running (SETTLE), a request in flight's once it
   * is answered; `take` refuses after. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#wake();
    if (this.#state.asking) await this.#inflight;
    const blocks = this.#state.unused(this.#now());
    await Promise.all(blocks.map((b) => this.transport.settle(b.grant, b.grant.amount - b.left)));
  }
}
