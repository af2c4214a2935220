// The shared argument cases (testkit/conformance/arguments.json, the module's own answers): each
// case the package can send as a typed call is built by its `commands`, with no server, and the
// package must refuse exactly what the module refuses. A case with no typed call (an unknown
// option, a missing value) or with a value the builder's types do not take (a limit of "x", a
// number beyond 2^53) is not the package's to send; a refusal by the module's own data
// (`server_data`, its time zone database) the package may leave to the server.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { commands, Decision, Grant, RateLimitError } from 'redis-ratelimit';

interface Case {
  command: string;
  args: string[];
  error: string | null;
  call: Record<string, unknown> | null;
  server_data: boolean;
}

const CASES = JSON.parse(readFileSync(new URL('../arguments.json', import.meta.url), 'utf8')) as Case[];

interface ReplyCase {
  command: string;
  args: string[];
  call: Record<string, unknown>;
  reply: number[];
  decision: Record<string, unknown>;
}

const REPLIES = JSON.parse(readFileSync(new URL('../replies.json', import.meta.url), 'utf8')) as ReplyCase[];

class NotTyped extends Error {}

function integer(v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw new NotTyped(String(v));
  return v;
}

/** A window or lease in ms (with MS as given, else seconds), or a calendar unit. */
function window(v: unknown, ms: boolean): { windowMs: number } | { calendar: 'day' } {
  if (typeof v === 'string') {
    if (ms) throw new NotTyped(v);
    return { calendar: v as 'day' };
  }
  return { windowMs: ms ? integer(v) : integer(integer(v) * 1000) };
}

function lengthMs(v: unknown, ms: boolean): number {
  const w = window(v, ms);
  if (!('windowMs' in w)) throw new NotTyped(String(v));
  return w.windowMs;
}

/** GCRA's period (decimal seconds) in whole ms, as the builder takes it. */
function periodMs(v: unknown): number {
  const ms = Number(v) * 1000;
  if (!Number.isSafeInteger(ms)) throw new NotTyped(String(v));
  return ms;
}

type Build = () => unknown;

function builder(command: string, c: Record<string, unknown>): Build | undefined {
  const flag = (name: string) => c[name] === true;
  const cost = integer(c.COST ?? 1);
  const flags = `${String(flag('PARTIAL'))},${String(flag('RESERVE'))}`;
  const key = String(c.key);
  switch (command) {
    case 'ratelimit.hit': {
      const o = { limit: integer(c.limit), ...window(c.window, flag('MS')), cost, align: flag('ALIGN'), ...(c.TZ === undefined ? {} : { tz: String(c.TZ) }) };
      return ({
        'false,false': () => commands.hit(key, o),
        'true,false': () => commands.hitUpTo(key, o),
        'false,true': () => commands.reserveHit(key, o),
        'true,true': () => commands.reserveHitUpTo(key, o),
      } as Record<string, Build>)[flags];
    }
    case 'ratelimit.peek':
      return () => commands.peek(key, { limit: integer(c.limit), cost });
    case 'ratelimit.slide': {
      const o = { limit: integer(c.limit), windowMs: lengthMs(c.window, flag('MS')), cost };
      return ({
        'false,false,false': () => commands.slide(key, o),
        'false,false,true': () => commands.slide(key, { ...o, peek: true }),
        'true,false,false': () => commands.slideUpTo(key, o),
        'false,true,false': () => commands.reserveSlide(key, o),
        'true,true,false': () => commands.reserveSlideUpTo(key, o),
      } as Record<string, Build>)[`${flags},${String(flag('PEEK'))}`];
    }
    case 'ratelimit.gcra': {
      const o = { maxBurst: integer(c.max_burst), tokensPerPeriod: integer(c.tokens_per_period), periodMs: periodMs(c.period), tokens: integer(c.TOKENS ?? 1) };
      return ({
        'false,false': () => commands.gcra(key, { ...o, align: flag('ALIGN') }),
        'true,false': () => commands.gcraUpTo(key, { ...o, align: flag('ALIGN') }),
        'false,true': flag('ALIGN') ? undefined : () => commands.reserveGcra(key, o),
        'true,true': flag('ALIGN') ? undefined : () => commands.reserveGcraUpTo(key, o),
      } as Record<string, Build | undefined>)[flags];
    }
    case 'ratelimit.hitall': {
      const keys = c.keys as string[];
      const limits = (c.limits as unknown[][]).map(([limit, w], i) => ({ key: String(keys[i]), limit: integer(limit), ...window(w, flag('MS')) }));
      const tokens = c.TOKENS === undefined ? {} : { tokens: integer((c.TOKENS as unknown[])[0]), tokenKeys: integer((c.TOKENS as unknown[])[1]) };
      const o = { cost, slide: flag('SLIDE'), align: flag('ALIGN'), ...(c.TZ === undefined ? {} : { tz: String(c.TZ) }), ...tokens };
      if (!flag('RESERVE')) return () => commands.hitAll(limits, o);
      return c.TOKENS === undefined ? undefined : () => commands.reserveAll(limits, { ...o, tokens: integer((c.TOKENS as unknown[])[0]) });
    }
    case 'ratelimit.acquire':
      return () => commands.acquire(key, { limit: integer(c.limit), leaseMs: lengthMs(c.lease, flag('MS')), ...(c.ID === undefined ? {} : { id: String(c.ID) }) });
    case 'ratelimit.release':
      return () => commands.release(key, String(c.id));
    case 'ratelimit.renew':
      return () => commands.renew(key, String(c.id), lengthMs(c.lease, flag('MS')));
    case 'ratelimit.top': {
      const views = ['DENIED', 'ADMITTED', 'SHADOWED'].filter(flag);
      if (views.length > 1) return undefined;
      const view = (views[0] ?? 'DENIED').toLowerCase() as 'denied';
      return () => commands.top({ view, ...(c.COUNT === undefined ? {} : { count: integer(c.COUNT) }), reset: flag('RESET') });
    }
    case 'ratelimit.adapt': {
      const o = { floor: integer(c.floor), start: integer(c.start), ceiling: integer(c.ceiling), windowMs: lengthMs(c.window, flag('MS')), cost, turn: flag('TURN') };
      return ({
        'false,false': () => commands.adapt(key, o),
        'true,false': () => commands.adaptUpTo(key, o),
        'false,true': () => commands.reserveAdapt(key, o),
        'true,true': () => commands.reserveAdaptUpTo(key, o),
      } as Record<string, Build>)[flags];
    }
    case 'ratelimit.report': {
      // A typed report has one outcome.
      if (flag('OK') === flag('THROTTLED')) return undefined;
      const o = {
        ...(c.RETRY === undefined ? {} : { retryAfterMs: integer(c.RETRY) }),
        ...(c.LIMIT === undefined ? {} : { limit: integer(c.LIMIT) }),
        ...(c.REMAINING === undefined ? {} : { remaining: integer(c.REMAINING) }),
        ...(c.RESET === undefined ? {} : { resetAfterMs: integer(c.RESET) }),
        ...(c.AGE === undefined ? {} : { ageMs: integer(c.AGE) }),
      };
      return () => commands.report(key, flag('OK') ? 'ok' : 'throttled', o);
    }
    default:
      throw new Error(`a case of ${command}, which this test does not know`);
  }
}

test('the package refuses what the module refuses, and no more', (t) => {
  let sent = 0;
  const disagree: string[] = [];
  for (const c of CASES) {
    if (c.call === null) continue;
    let build: Build | undefined;
    try {
      build = builder(c.command, c.call);
    } catch (e) {
      if (e instanceof NotTyped) continue;
      throw e;
    }
    if (build === undefined) continue;
    let refused: string | null = null;
    try {
      build();
    } catch (e) {
      if (e instanceof NotTyped) continue;
      if (!(e instanceof RateLimitError)) throw e;
      refused = e.message;
    }
    sent += 1;
    if (c.server_data && refused === null) continue;
    if ((refused === null) !== (c.error === null)) {
      disagree.push(`${c.command} ${c.args.join(' ')}: module ${String(c.error)}, package ${String(refused)}`);
    }
  }
  t.diagnostic(`${String(sent)} of the ${String(CASES.length)} cases sent as typed calls`);
  assert.deepEqual(disagree, []);
  assert.ok(sent >= 90, `${String(sent)} cases sent`);
});

/** A decision as the shared replies state it: ms, -1 for never, null for none. */
function read(d: Decision): Record<string, unknown> {
  const ms = (n: number) => (n === Infinity ? -1 : n);
  return {
    allowed: d.allowed,
    count: d.count,
    remaining: d.remaining,
    limit: d.limit,
    reset_after_ms: ms(d.resetAfterMs),
    retry_after_ms: d.retryAfterMs === null ? null : ms(d.retryAfterMs),
    window_ms: d.windowMs,
  };
}

test('the package reads each reply as the module means it', () => {
  for (const c of REPLIES) {
    const build = builder(c.command, c.call);
    assert.ok(build !== undefined, c.args.join(' '));
    const answer = (build() as { parse: (reply: unknown) => Decision | Grant }).parse(c.reply);
    const got = answer instanceof Grant ? { ...read(answer.decision), granted: answer.granted } : read(answer);
    assert.deepEqual(got, c.decision, `${c.command} ${c.args.join(' ')}`);
  }
});
