// RateLimiter: the limiter commands on a Redis or Valkey client, answered by the module where the
// server has it, else by the Functions library (loaded when missing, unless `loadLibrary` is
// false), and permits held for the life of a function.

import { connect, isReplyError, type Client, type Connection } from './adapters.js';
import * as commands from './commands.js';
import { libraryArgs, moduleArgs, type Call } from './commands.js';
import { LibraryNotLoaded, NotReplicatedError, PermitUnavailable, RateLimitError } from './errors.js';
import { LIBRARY_SOURCE } from './library.js';
import { Acquisition, MultiReservation, type Reservation, type Settlement } from './results.js';
import { slotOf } from './slot.js';
import { HotLimit, type HotOptions } from './hot.js';

/** A hot limit's window (as `hit` takes it, without a cost) and tuning. */
export type HotLimitOptions = commands.FixedWindow & { limit: number; align?: boolean; tz?: string } & HotOptions;

export type Backend = 'module' | 'library';

// Asked with no arguments, a loaded module answers its arity error; a server without it, "unknown
// command". Neither touches a key, and it needs no MODULE LIST (which managed services refuse).
const PROBE = ['RATELIMIT.PEEK'];

/** The backend found for each client, shared by every RateLimiter over it. */
const backends = new WeakMap<object, Promise<Backend>>();

export interface RateLimiterOptions {
  /** Load the Functions library where the server has neither it nor the module (default true). */
  loadLibrary?: boolean;
  /** After each call that writes, WAIT on the connection that wrote until this many replicas
   * acknowledged it (default 0: never); too few in time throw NotReplicatedError with the answer. */
  waitForReplicas?: number;
  /** How long a write waits for them (default 100 ms). */
  replicaTimeoutMs?: number;
}

export interface PermitOptions {
  limit: number;
  leaseMs: number;
  /** Wait for a permit instead of throwing PermitUnavailable (default false). */
  wait?: boolean;
  /** With `wait`: give up after this long (default: never). */
  timeoutMs?: number;
  /** With `wait`: ask again at least this often (default 50 ms). */
  pollMs?: number;
}

/** What `withPermit` hands its function. */
export interface Permit {
  readonly key: string;
  readonly id: string;
  /** True once the lease ended while the function ran and no permit could be taken again (the
   * server out of reach for longer than the lease, say): others may then hold it. */
  readonly lost: boolean;
}

/** What `settling` hands its function: set `used` to what the work used. */
export interface Settling {
  used: number | undefined;
  /** SETTLE's answer, once sent (one per token key for a `reserveAll` reservation). */
  settlement: Settlement | Settlement[] | null;
}

/** A permit held by `hold`, until `end()`. */
export interface HeldPermit extends Permit {
  end(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class RateLimiter {
  readonly connection: Connection;
  readonly loadLibrary: boolean;
  readonly waitForReplicas: number;
  readonly replicaTimeoutMs: number;
  #backend: Backend | null = null;

  /** `client`: a node-redis client, pool or cluster, an ioredis or iovalkey client or Cluster, or a
   * `sendCommand` function. */
  constructor(
    readonly client: Client,
    options: RateLimiterOptions = {},
  ) {
    this.connection = connect(client);
    this.loadLibrary = options.loadLibrary ?? true;
    const { waitForReplicas = 0, replicaTimeoutMs = 100 } = options;
    if (!Number.isSafeInteger(waitForReplicas) || waitForReplicas < 0) {
      throw new RateLimitError(`waitForReplicas must be an integer >= 0, got ${String(waitForReplicas)}`);
    }
    // WAIT's timeout 0 blocks for ever: never sent.
    if (typeof replicaTimeoutMs !== 'number' || !(replicaTimeoutMs > 0) || !Number.isFinite(replicaTimeoutMs)) {
      throw new RateLimitError(`replicaTimeoutMs must be a number of milliseconds > 0, got ${String(replicaTimeoutMs)}`);
    }
    if (waitForReplicas > 0 && this.connection.sendAndWait === undefined) {
      throw new RateLimitError('waitForReplicas needs a Connection with sendAndWait (WAIT on the connection that wrote)');
    }
    this.waitForReplicas = waitForReplicas;
    this.replicaTimeoutMs = replicaTimeoutMs;
  }

  /** This limiter on the same client, its writes waiting for `replicas` acknowledgements (0: none),
   * for one call or a few: `await rl.waitingForReplicas(1).settle(...)`. */
  waitingForReplicas(replicas: number, timeoutMs = 100): RateLimiter {
    return new RateLimiter(this.client, { loadLibrary: this.loadLibrary, waitForReplicas: replicas, replicaTimeoutMs: timeoutMs });
  }

  readonly hit = this.#sent(commands.hit);
  readonly peek = this.#sent(commands.peek);
  readonly slide = this.#sent(commands.slide);
  readonly hitAll = this.#sent(commands.hitAll);
  readonly gcra = this.#sent(commands.gcra);
  readonly gcraUpTo = this.#sent(commands.gcraUpTo);
  readonly hitUpTo = this.#sent(commands.hitUpTo);
  readonly slideUpTo = this.#sent(commands.slideUpTo);
  readonly refundHit = this.#sent(commands.refundHit);
  readonly refundSlide = this.#sent(commands.refundSlide);
  readonly refundGcra = this.#sent(commands.refundGcra);
  /** @deprecated `refundHit` (`refundSlide` with `sliding`). */
  // eslint-disable-next-line @typescript-eslint/no-deprecated -- the deprecated alias itself
  readonly refund = this.#sent(commands.refund);
  readonly reserveHit = this.#sent(commands.reserveHit);
  readonly reserveHitUpTo = this.#sent(commands.reserveHitUpTo);
  readonly reserveSlideUpTo = this.#sent(commands.reserveSlideUpTo);
  readonly reserveSlide = this.#sent(commands.reserveSlide);
  readonly reserveGcra = this.#sent(commands.reserveGcra);
  readonly reserveGcraUpTo = this.#sent(commands.reserveGcraUpTo);
  readonly reserveAll = this.#sent(commands.reserveAll);
  readonly adapt = this.#sent(commands.adapt);
  readonly adaptUpTo = this.#sent(commands.adaptUpTo);
  readonly reserveAdapt = this.#sent(commands.reserveAdapt);
  readonly reserveAdaptUpTo = this.#sent(commands.reserveAdaptUpTo);
  readonly report = this.#sent(commands.report);

  /** This process's share of `limit` per window on `key`, which many processes share the same
   * way: blocks of tokens taken from the server (up to `horizonMs` of this process's demand) and
   * spent locally before their deadline (see docs/hot-keys.md). */
  hot(key: string, o: HotLimitOptions): HotLimit {
    const { horizonMs = 10, guardMs = 2, failOpen = false, ...window } = o;
    if (typeof horizonMs !== 'number' || !(horizonMs > 0)) throw new RateLimitError('horizonMs must be a number of ms > 0');
    commands.reserveHitUpTo(key, { ...window, cost: 1 }); // refused now if HIT would refuse it, not at the first take
    const transport = {
      reserve: (want: number) => this.reserveHitUpTo(key, { ...window, cost: want }),
      settle: (grant: Reservation, used: number) => this.settle(key, grant.token ?? '', used),
    };
    return new HotLimit(transport, window.limit, horizonMs, guardMs, failOpen);
  }

  /** RATELIMIT.SETTLE (see `commands.settle`): on one key, or on a `reserveAll`'s token keys. */
  settle(key: string, reservation: string, used: number): Promise<Settlement>;
  settle(keys: readonly string[], reservation: string, used: number): Promise<Settlement[]>;
  async settle(key: string | readonly string[], reservation: string, used: number): Promise<Settlement | Settlement[]> {
    return typeof key === 'string' ? this.run(commands.settle(key, reservation, used)) : this.run(commands.settle(key, reservation, used));
  }
  readonly acquire = this.#sent(commands.acquire);
  readonly release = this.#sent(commands.release);
  readonly renew = this.#sent(commands.renew);
  readonly top = this.#sent(commands.top);

  #sent<A extends unknown[], T>(build: (...args: A) => Call<T>): (...args: A) => Promise<T> {
    return async (...args: A) => this.run(build(...args));
  }

  /** 'module' or 'library' once found out (by the first call, or `detect()`); null before. */
  get backend(): Backend | null {
    return this.#backend;
  }

  /** 'module' or 'library': found out once per client. */
  async detect(): Promise<Backend> {
    let found = backends.get(this.client);
    if (found === undefined) {
      found = this.#probe();
      backends.set(this.client, found);
      // A probe that could not reach the server is asked again next time.
      found.catch(() => backends.delete(this.client));
    }
    this.#backend = await found;
    return this.#backend;
  }

  async #probe(): Promise<Backend> {
    try {
      await this.connection.send(PROBE, [], false);
    } catch (error) {
      if (!isReplyError(error)) throw error;
      return /unknown command/i.test(error.message) ? 'library' : 'module';
    }
    return 'module';
  }

  /** Sends one Call (from the package's `commands`) and reads its reply. */
  async run<T>(call: Call<T>): Promise<T> {
    return this.#run(call, true);
  }

  async #run<T>(call: Call<T>, mayLoad: boolean): Promise<T> {
    if (this.connection.cluster && new Set(call.keys.map(slotOf)).size > 1) {
      throw new RateLimitError("CROSSSLOT Keys in request don't hash to the same slot (give them one hash tag, e.g. rl:{user:42}:s)");
    }
    const backend = await this.detect();
    const args = backend === 'module' ? moduleArgs(call) : libraryArgs(call);
    try {
      if (this.waitForReplicas === 0 || call.writesNothing === true || this.connection.sendAndWait === undefined) {
        return call.parse(await this.connection.send(args, call.keys, call.readonly === true));
      }
      const wait = ['WAIT', this.waitForReplicas, Math.ceil(this.replicaTimeoutMs)];
      const [reply, acknowledged] = await this.connection.sendAndWait(args, call.keys, wait);
      const answer = call.parse(reply);
      if (Number(acknowledged) < this.waitForReplicas) throw new NotReplicatedError(answer, Number(acknowledged), this.waitForReplicas);
      return answer;
    } catch (error) {
      if (!isReplyError(error)) throw error;
      if (mayLoad && backend === 'library' && /function not found/i.test(error.message)) {
        // The server has not the library yet, or lost it (a restart, FUNCTION FLUSH). Once: a
        // library of an older version, without this function, stays as it is (never REPLACE).
        await this.#loadLibrary(call.keys);
        return this.#run(call, false);
      }
      throw new RateLimitError(error.message, { cause: error });
    }
  }

  /** FUNCTION LOAD (never REPLACE), on the node that holds `keys` in a cluster. */
  async #loadLibrary(keys: readonly string[]): Promise<void> {
    if (!this.loadLibrary) {
      throw new LibraryNotLoaded(
        'the server has neither the ratelimit module nor its Functions library: load the module ' +
          "(loadmodule .../libredis_ratelimit.so), or the library (FUNCTION LOAD with the package's LIBRARY_SOURCE, " +
          'or new RateLimiter(client, { loadLibrary: true }))',
      );
    }
    try {
      await this.connection.send(['FUNCTION', 'LOAD', LIBRARY_SOURCE], keys, false);
    } catch (error) {
      if (!isReplyError(error) || !error.message.includes('already exists')) throw error;
    }
  }

  /** Runs `fn` and then settles `reservation` once with what `fn` set as `used`, also when `fn`
   * throws: `await rl.settling(r, async (s) => { ...; s.used = tokens; })`. Nothing is sent for a
   * denied reservation, or when `used` was left unset (the estimate stays counted). A failed
   * settle is thrown, unless `fn` threw: its error is the one that reaches you. */
  async settling<T>(reservation: Reservation | MultiReservation, fn: (settling: Settling) => Promise<T> | T): Promise<T> {
    const settling: Settling = { used: undefined, settlement: null };
    const settle = async () => {
      if (reservation.token !== null && settling.used !== undefined) {
        settling.settlement =
          reservation instanceof MultiReservation
            ? await this.settle(reservation.keys, reservation.token, settling.used)
            : await this.settle(reservation.key, reservation.token, settling.used);
      }
    };
    let result: T;
    try {
      result = await fn(settling);
    } catch (error) {
      await settle().catch(() => undefined);
      throw error;
    }
    await settle();
    return result;
  }

  /** One of `limit` permits of `key`, held until `end()` and renewed every third of its lease
   * meanwhile (taken again with the same id if its lease ended); or, when all are in use, the
   * denied Acquisition. */
  async hold(key: string, terms: { limit: number; leaseMs: number }): Promise<HeldPermit | Acquisition> {
    const { limit, leaseMs } = terms;
    const got = await this.acquire(key, { limit, leaseMs });
    if (!got.acquired || got.id === null) return got;
    const id = got.id;
    const renewal = setInterval(() => {
      void (async () => {
        try {
          if ((await this.renew(key, id, leaseMs)) === null) {
            permit.lost = !(await this.acquire(key, { limit, leaseMs, id })).acquired;
          }
        } catch {
          // The next renewal tries again; the lease covers two more tries.
        }
      })();
    }, Math.max(1, Math.floor(got.expiresAfterMs / 3)));
    renewal.unref();
    const permit = {
      key,
      id,
      lost: false,
      end: async () => {
        clearInterval(renewal);
        // Never thrown over the holder's own outcome: the lease ends by itself.
        await this.release(key, id).catch(() => undefined);
      },
    };
    return permit;
  }

  /** Runs `fn` holding one of `limit` permits of `key` (see `hold`): PermitUnavailable when all are
   * in use, unless `wait`; released when `fn` settles, also when it throws. A process that dies
   * gives it back when its lease ends. */
  async withPermit<T>(key: string, options: PermitOptions, fn: (permit: Permit) => Promise<T> | T): Promise<T> {
    const { limit, leaseMs, wait = false, timeoutMs, pollMs = 50 } = options;
    commands.acquire(key, { limit, leaseMs }); // the arguments are checked before anything is sent
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    let held: HeldPermit | Acquisition;
    while ((held = await this.hold(key, { limit, leaseMs })) instanceof Acquisition) {
      const left = deadline - Date.now();
      if (!wait || left <= 0) throw new PermitUnavailable(key, limit, held.expiresAfterMs);
      await sleep(Math.max(1, Math.min(held.expiresAfterMs, pollMs, left)));
    }
    try {
      return await fn(held);
    } finally {
      await held.end();
    }
  }
}
