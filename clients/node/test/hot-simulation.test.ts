// A deterministic simulation of a fleet's hot limit, as the Go client's hot_sim_test.go: the
// decisions of HotLimit (HotState's step and granted, as take runs them) for each of 1,000
// processes, with their clocks and transport injected, against a model of the server's HIT PARTIAL
// RESERVE on one key (a window started by its first grant, expiring at the first millisecond it
// counts, reset as the module answers it). Each scenario checks every window: admissions at most
// the limit, each inside the window that granted it; in steady windows with demand >= 1.2x the
// limit, at least 99% of the limit admitted; with demand below 0.9x, at least 99.9% of requests
// admitted.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Decision, HotState, Reservation } from 'redis-ratelimit';

const CLIENTS = 1000;
const LIMIT = 40_000;
const WINDOW = 1000; // ms
const WINDOWS = 4;

interface Scenario {
  name: string;
  demand: number; // per window, in limits
  rttMs: number; // the most a round trip takes (uniform from 0)
  skew?: number; // each process's clock runs at 1 + a rate within +-skew
  killAt?: number; // a tenth of the processes die then
  pauseAt?: number; // the server answers nothing for 100 ms from then
  // the primary fails then and its replica, 1 ms behind, takes over; each grant is answered once
  // the replica has it (WAIT 1), so the grants the failure loses were never answered
  promoteAt?: number;
}

const REPLICA_LAG = 1;

/** A grant made at `at`, for the promotion to take back if the replica lacked it. */
interface Grant {
  at: number;
  window: Window | null;
  amount: number;
}

interface Window {
  start: number;
  end: number;
  admitted: number;
}

interface Waiting {
  tries: number;
  waited: boolean;
}

interface Process {
  state: HotState;
  rate: number;
  offset: number;
  dead: boolean;
  waiting: Waiting[];
}

type Event =
  | { at: number; seq: number; kind: 'demand'; i: number }
  | { at: number; seq: number; kind: 'retry'; i: number; w: Waiting }
  | { at: number; seq: number; kind: 'server'; i: number; want: number; sent: number }
  | { at: number; seq: number; kind: 'answer'; i: number; sent: number; grant: Reservation; made: Grant };

/** An event before the queue numbers it (one Omit per kind of event). */
type Unsequenced<E> = E extends Event ? Omit<E, 'seq'> : never;

/** A binary heap of events by time, then by the order they were pushed. */
class Queue {
  #items: Event[] = [];
  get size(): number {
    return this.#items.length;
  }
  #less(a: Event, b: Event): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
  push(e: Event): void {
    const items = this.#items;
    items.push(e);
    for (let i = items.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1;
      if (!this.#less(items[i] as Event, items[parent] as Event)) break;
      [items[i], items[parent]] = [items[parent] as Event, items[i] as Event];
      i = parent;
    }
  }
  pop(): Event {
    const items = this.#items;
    const top = items[0] as Event;
    const last = items.pop() as Event;
    if (items.length > 0) {
      items[0] = last;
      for (let i = 0; ; ) {
        const [l, r] = [2 * i + 1, 2 * i + 2];
        let m = i;
        if (l < items.length && this.#less(items[l] as Event, items[m] as Event)) m = l;
        if (r < items.length && this.#less(items[r] as Event, items[m] as Event)) m = r;
        if (m === i) break;
        [items[i], items[m]] = [items[m] as Event, items[i] as Event];
        i = m;
      }
    }
    return top;
  }
}

/** A seeded generator (mulberry32): the same stream on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function simulate(sc: Scenario, seed: number) {
  const rng = random(seed);
  const exp = (rate: number) => -Math.log(1 - rng()) / rate;
  const windows: Window[] = [];
  let current: Window | null = null;
  let count = 0;
  const reserve = (t: number, want: number): Reservation => {
    if (current !== null && t >= current.end) {
      current = null;
      count = 0;
    }
    const nowMs = Math.floor(t);
    const grant = Math.min(want, Math.max(0, LIMIT - count));
    if (grant > 0 && current === null) {
      current = { start: t, end: nowMs + WINDOW, admitted: 0 };
      windows.push(current);
    }
    const reset = current === null ? 0 : current.end - nowMs;
    count += grant;
    const d = new Decision(grant > 0, count, LIMIT - count, reset, null, LIMIT, WINDOW);
    return new Reservation('hot', d, String(windows.length), grant);
  };
  const windowAt = (t: number): Window | undefined => {
    let lo = 0;
    let hi = windows.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((windows[mid] as Window).end > t) hi = mid;
      else lo = mid + 1;
    }
    const w = windows[lo];
    return w !== undefined && w.start <= t ? w : undefined;
  };
  const queue = new Queue();
  let seq = 0;
  const push = (e: Unsequenced<Event>) => queue.push({ ...e, seq: ++seq } as Event);
  const perClient = (sc.demand * LIMIT) / CLIENTS / WINDOW;
  const processes: Process[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const rate = 1 + (sc.skew ?? 0) * (2 * rng() - 1);
    const offset = rng() * 3_600_000;
    processes.push({ state: new HotState(LIMIT, 10, 2, offset), rate, offset, dead: false, waiting: [] });
    push({ at: exp(perClient), kind: 'demand', i });
  }
  const local = (p: Process, t: number) => p.offset + t * p.rate;
  const leg = () => (rng() * sc.rttMs) / 2;
  let admitted = 0;
  let denied = 0; // those still waiting when the run ends are neither
  let outside = 0;
  let serverFree = 0;
  let killed = false;
  let promoted = false;
  let lost = 0;
  const grants: Grant[] = [];
  const step = (i: number, p: Process, t: number, w: Waiting) => {
    const s = p.state.step(local(p, t), 1, w.tries, w.waited);
    w.waited = s.wait === true;
    if (s.send) push({ at: t + leg(), kind: 'server', i, want: s.send, sent: local(p, t) });
    if (s.admitted) {
      admitted++;
      const window = windowAt(t);
      if (window === undefined) outside++;
      else window.admitted++;
    } else if (s.denied) {
      denied++;
    } else if (s.wait) {
      p.waiting.push(w);
    } else {
      push({ at: Math.max(t + 1e-6, ((s.sleepUntil ?? 0) - p.offset) / p.rate), kind: 'retry', i, w });
    }
  };
  const end = WINDOWS * WINDOW;
  while (queue.size > 0) {
    const e = queue.pop();
    let t = e.at;
    if (t > end) break;
    if (sc.killAt !== undefined && t >= sc.killAt && !killed) {
      for (let k = 0; k < CLIENTS / 10; k++) (processes[Math.floor(rng() * CLIENTS)] as Process).dead = true;
      killed = true;
    }
    const p = processes[e.i] as Process;
    if (e.kind === 'demand') {
      if (p.dead) continue;
      push({ at: t + exp(perClient), kind: 'demand', i: e.i });
      step(e.i, p, t, { tries: 0, waited: false });
    } else if (e.kind === 'retry') {
      if (!p.dead) step(e.i, p, t, e.w);
    } else if (e.kind === 'server') {
      if (sc.pauseAt !== undefined && t >= sc.pauseAt && t < sc.pauseAt + 100) t = sc.pauseAt + 100;
      t = Math.max(t, serverFree);
      serverFree = t;
      const promoteAt = sc.promoteAt ?? Infinity;
      if (t >= promoteAt && !promoted) {
        // The replica has what the primary granted up to a lag before the failure.
        for (const g of grants) if (g.at > promoteAt - REPLICA_LAG && g.window === current) count -= g.amount;
        promoted = true;
      }
      const grant = reserve(t, e.want);
      const made = { at: t, window: current, amount: grant.amount };
      grants.push(made);
      push({ at: t + leg() + (sc.promoteAt === undefined ? 0 : REPLICA_LAG), kind: 'answer', i: e.i, sent: e.sent, grant, made });
    } else {
      if (p.dead) continue;
      const promoteAt = sc.promoteAt ?? -Infinity;
      if (e.made.at <= promoteAt && e.made.at > promoteAt - REPLICA_LAG) {
        // The primary failed before the replica had it (and so before answering it): no answer.
        lost += e.made.amount;
        p.state.failed();
      } else {
        p.state.granted(e.sent, local(p, t), e.grant);
      }
      const waiting = p.waiting;
      p.waiting = [];
      for (const w of waiting) {
        w.tries++;
        step(e.i, p, t, w);
      }
    }
  }
  return { windows, admitted, denied, outside, lost };
}

const SCENARIOS: Scenario[] = [
  { name: 'half the limit', demand: 0.5, rttMs: 2 },
  { name: '0.85x, slow round trips, skewed clocks', demand: 0.85, rttMs: 5, skew: 200e-6 },
  { name: '1.2x', demand: 1.2, rttMs: 2, skew: 100e-6 },
  { name: '3x, slow round trips', demand: 3, rttMs: 5, skew: 200e-6 },
  { name: '2x, a tenth killed mid-window', demand: 2, rttMs: 2, killAt: 1500 },
  { name: '0.8x, the server paused 100 ms', demand: 0.8, rttMs: 2, pauseAt: 2500 },
  { name: '1.5x, the server paused 100 ms', demand: 1.5, rttMs: 2, pauseAt: 2500 },
  { name: '2x, a replica promoted (grants answered once replicated)', demand: 2, rttMs: 2, promoteAt: 2200 },
];

SCENARIOS.forEach((sc, n) => {
  test(`hot limit simulation: ${sc.name}`, () => {
    const r = simulate(sc, n + 1);
    assert.equal(r.outside, 0, 'admissions outside any window');
    let checked = 0;
    r.windows.forEach((w, i) => {
      assert.ok(w.admitted <= LIMIT, `window ${String(i)}: ${String(w.admitted)} admitted, over the limit`);
      const killed = sc.killAt !== undefined && w.start <= sc.killAt && sc.killAt < w.end;
      const paused = sc.pauseAt !== undefined && w.start <= sc.pauseAt + 100 && sc.pauseAt < w.end;
      const failed = sc.promoteAt !== undefined && w.start <= sc.promoteAt && sc.promoteAt < w.end;
      if (i > 0 && w.end <= WINDOWS * WINDOW && !killed && !paused && !failed && sc.demand >= 1.2) {
        checked++;
        assert.ok(w.admitted >= 0.99 * LIMIT, `window ${String(i)}: ${String(w.admitted)} admitted of ${String(LIMIT)}`);
      }
    });
    if (sc.demand >= 1.2) assert.ok(checked > 0, 'no steady window to check');
    if (sc.promoteAt !== undefined) assert.ok(r.lost > 0, 'the promotion took back no grant: the scenario tests nothing');
    if (sc.demand < 0.9) assert.ok(r.admitted >= 0.999 * (r.admitted + r.denied), `${String(r.admitted)} admitted, ${String(r.denied)} denied`);
  });
});

test('a cold start asks for its need', () => {
  // One token a microsecond after the start is no rate (the Go load test's first run found a
  // process asking for 11,000 of 4,000).
  let s = new HotState(4000, 10, 3, 0);
  assert.deepEqual(s.step(0.001, 1, 0, false), { send: 1, wait: true });
  s = new HotState(4000, 10, 3, 0);
  s.taken = 1_000_000;
  assert.equal(s.step(20, 1, 0, false).send, 500); // an eighth of the limit, in a window not seen yet
});

test('a take outrun by others waits while the window has room', () => {
  // Answer after answer, another take spends the tokens first (the Java load test on a busy
  // machine saw 2 of 1,219 denied at half the limit): only the server's "none left" denies it.
  const grant = (amount: number, remaining: number) =>
    new Reservation('k', new Decision(amount > 0, 0, remaining, 1000, null, 1000, 1000), 't', amount);
  const s = new HotState(1000, 10, 3, 0);
  assert.deepEqual(s.step(1, 1, 0, false), { send: 1, wait: true });
  for (let tries = 1; tries <= 10; tries++) {
    s.granted(1, 1, grant(1, 500));
    assert.equal(s.step(1, 1, 0, false).admitted, true, 'another take');
    const step = s.step(1, 1, tries, true);
    assert.deepEqual([step.admitted, step.denied, step.wait], [undefined, undefined, true], `after ${String(tries)} answers`);
  }
  s.granted(1, 1, grant(1, 500));
  assert.equal(s.step(1, 1, 11, true).admitted, true, 'an answer of its own');
  s.granted(1, 1, grant(0, 0));
  assert.equal(s.step(1, 1, 0, false).denied, true, 'none left');
});
