// Each builder in the package's `commands` against the module's own COMMAND DOCS: the names it
// takes are the command's arguments (in camelCase, durations in ms, but for the folds below), and
// every token it sends is one the command documents. A new option in the module, or a renamed
// one, fails here.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createClient } from 'redis';
import { commands } from 'redis-ratelimit';
import { Server } from './servers.js';

// Documented arguments that the builders take in another form.
const FOLDED = new Set(['ms', 'numkeys', 'reserve', 'partial']);
// Documented names a builder takes under another name.
const RENAMED: Record<string, Record<string, string>> = {
  'ratelimit.gcra': { count: 'tokens' },
  'ratelimit.top': { denied: 'view', admitted: 'view', shadowed: 'view' },
  'ratelimit.hit': { zone: 'tz' },
  'ratelimit.hitall': { zone: 'tz', numtokenkeys: 'tokenKeys' },
  'ratelimit.report': { ok: 'outcome', throttled: 'outcome', retry: 'retryAfterMs', reset: 'resetAfterMs', age: 'ageMs' },
};
const DURATIONS = new Set(['window', 'lease', 'period']);
// A fixed window is taken as windowMs or as a calendar unit.
const ALSO: Record<string, string> = { window: 'calendar' };

type Builder = ((...args: never[]) => { command: string; args: readonly (string | number)[] }) & { params: readonly string[] };
// command, builder, the documented arguments it leaves to the command's main builder, a call with every option set.
const CASES: [string, string, Builder, string[], () => { command: string; args: readonly (string | number)[] }][] = [
  ['ratelimit.hit', 'hit', commands.hit, [], () => commands.hit('k', { limit: 5, calendar: 'month', cost: 2, align: true, tz: 'Europe/Paris' })],
  ['ratelimit.peek', 'peek', commands.peek, [], () => commands.peek('k', { limit: 5, cost: 2 })],
  ['ratelimit.slide', 'slide', commands.slide, [], () => commands.slide('k', { limit: 5, windowMs: 1_500, cost: 2, peek: true })],
  [
    'ratelimit.hitall',
    'hitAll',
    commands.hitAll,
    [],
    () =>
      commands.hitAll([{ key: 'a', limit: 1, windowMs: 2_000 }, { key: 'b', limit: 2, calendar: 'day' }], {
        cost: 2,
        align: true,
        tz: 'Europe/Paris',
        tokens: 40,
        tokenKeys: 1,
      }),
  ],
  [
    'ratelimit.hitall',
    'reserveAll',
    commands.reserveAll,
    [],
    () => commands.reserveAll([{ key: 'a', limit: 1, windowMs: 2_000 }, { key: 'b', limit: 2, calendar: 'day' }], { cost: 2, align: true, tz: '+01:00', tokens: 40 }),
  ],
  ['ratelimit.gcra', 'gcra', commands.gcra, [], () => commands.gcra('k', { maxBurst: 1, tokensPerPeriod: 2, periodMs: 500, tokens: 2, align: true })],
  ['ratelimit.settle', 'settle', commands.settle, [], () => commands.settle('k', 'h:1:1:1:1:01234567', 3)],
  ['ratelimit.acquire', 'acquire', commands.acquire, [], () => commands.acquire('k', { limit: 2, leaseMs: 1_500, id: 'i' })],
  ['ratelimit.release', 'release', commands.release, [], () => commands.release('k', 'i')],
  ['ratelimit.renew', 'renew', commands.renew, [], () => commands.renew('k', 'i', 1_500)],
  ['ratelimit.top', 'top', commands.top, [], () => commands.top({ view: 'admitted', count: 3, reset: true })],
  ['ratelimit.adapt', 'adapt', commands.adapt, [], () => commands.adapt('k', { floor: 1, start: 2, ceiling: 3, windowMs: 1_500, cost: 2, turn: true })],
  ['ratelimit.adapt', 'adaptUpTo', commands.adaptUpTo, [], () => commands.adaptUpTo('k', { floor: 1, start: 2, ceiling: 3, windowMs: 60_000, cost: 9 })],
  ['ratelimit.adapt', 'reserveAdapt', commands.reserveAdapt, [], () => commands.reserveAdapt('k', { floor: 1, start: 2, ceiling: 3, windowMs: 60_000, cost: 2 })],
  ['ratelimit.adapt', 'reserveAdaptUpTo', commands.reserveAdaptUpTo, [], () => commands.reserveAdaptUpTo('k', { floor: 1, start: 2, ceiling: 3, windowMs: 60_000, cost: 9 })],
  ['ratelimit.report', 'report', commands.report, [], () => commands.report('k', 'throttled', { retryAfterMs: 1, limit: 5, remaining: 2, resetAfterMs: 3, ageMs: 4 })],
  ['ratelimit.hit', 'reserveHit', commands.reserveHit, [], () => commands.reserveHit('k', { limit: 5, calendar: 'month', cost: 2, align: true, tz: '+05:30' })],
  ['ratelimit.hit', 'reserveHitUpTo', commands.reserveHitUpTo, [], () => commands.reserveHitUpTo('k', { limit: 5, calendar: 'month', cost: 9, align: true, tz: '+05:30' })],
  ['ratelimit.slide', 'reserveSlide', commands.reserveSlide, ['peek'], () => commands.reserveSlide('k', { limit: 5, windowMs: 1_500, cost: 2 })],
  ['ratelimit.slide', 'reserveSlideUpTo', commands.reserveSlideUpTo, ['peek'], () => commands.reserveSlideUpTo('k', { limit: 5, windowMs: 1_500, cost: 9 })],
  ['ratelimit.gcra', 'gcraUpTo', commands.gcraUpTo, [], () => commands.gcraUpTo('k', { maxBurst: 1, tokensPerPeriod: 2, periodMs: 500, tokens: 2, align: true })],
  ['ratelimit.gcra', 'reserveGcra', commands.reserveGcra, ['align'], () => commands.reserveGcra('k', { maxBurst: 1, tokensPerPeriod: 2, periodMs: 500, tokens: 2 })],
];

interface Argument {
  name: string;
  type: string;
  token?: string;
  arguments?: Argument[];
}

function argument(reply: unknown): Argument {
  const named = commands.fields(reply);
  const nested = named.get('arguments');
  return {
    name: String(named.get('name')),
    type: String(named.get('type')),
    ...(named.has('token') ? { token: String(named.get('token')) } : {}),
    ...(Array.isArray(nested) ? { arguments: nested.map(argument) } : {}),
  };
}

const walk = (args: Argument[]): Argument[] => args.flatMap((a) => [a, ...walk(a.arguments ?? [])]);
const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

let server: Server;
let client: Awaited<ReturnType<typeof connect>>;
const connect = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect();
before(async () => {
  server = await Server.start('module');
  client = await connect(server.port);
});
after(async () => {
  await client.close();
  await server.stop();
});

for (const [name, label, builder, left, full] of CASES) {
  test(`${label} takes ${name}'s documented arguments, and sends only its tokens`, async () => {
    const docs = commands.fields(await client.sendCommand(['COMMAND', 'DOCS', name]));
    const documented = walk((commands.fields(docs.get(name)).get('arguments') as unknown[]).map(argument));
    const leaves = documented.filter((a) => a.type !== 'block' && a.type !== 'oneof');
    const taken = (a: Argument) => {
      const renamed = RENAMED[name]?.[a.name] ?? camel(a.name);
      return DURATIONS.has(renamed) ? `${renamed}Ms` : renamed;
    };
    for (const a of leaves) {
      if (FOLDED.has(a.name) || left.includes(a.name)) continue;
      assert.ok(builder.params.includes(taken(a)), `${label}: ${a.name} is not taken (as ${taken(a)})`);
    }
    const names = new Set(leaves.flatMap((a) => [taken(a), ...(a.name in ALSO && builder.params.includes('calendar') ? [ALSO[a.name] ?? ''] : [])]));
    for (const param of builder.params) assert.ok(names.has(param), `${label}: ${param} is not in COMMAND DOCS`);
    const tokens = new Set(documented.flatMap((a) => (a.token === undefined ? [] : [a.token.toUpperCase()])));
    const call = full();
    assert.equal(call.command.toLowerCase(), name);
    for (const sent of call.args) {
      if (typeof sent === 'string' && /^[A-Z]+$/.test(sent)) assert.ok(tokens.has(sent), `${label}: sends ${sent}, not in COMMAND DOCS`);
    }
  });
}
