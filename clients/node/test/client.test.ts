// The client against real servers, with the module and with the Functions library (the client then
// loads the library itself), through every supported Redis client: the same answers on both.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { commands, Decision, LibraryNotLoaded, PermitUnavailable, RateLimiter, RateLimitError } from 'redis-ratelimit';
import { CLIENTS, type Connected } from './clients.js';
import { KINDS, Server } from './servers.js';

let serial = 0;
const fresh = (name: string) => `t:${name}:${String(++serial)}`;

for (const kind of KINDS) {
  describe(`with the ${kind}`, () => {
    let server: Server;
    let raw: Awaited<ReturnType<typeof rawClient>>;
    const rawClient = (port: number) => createClient({ socket: { host: '127.0.0.1', port }, RESP: 2 }).connect();
    before(async () => {
      server = await Server.start(kind);
      raw = await rawClient(server.port);
    });
    after(async () => {
      await raw.close();
      await server.stop();
    });

    for (const [name, connect] of Object.entries(CLIENTS)) {
      describe(name, () => {
        let connected: Connected;
        let rl: RateLimiter;
        before(async () => {
          connected = await connect(server.port);
          rl = new RateLimiter(connected.client);
        });
        after(async () => connected.close());

        test('finds the backend', async () => {
          assert.equal(rl.backend, null);
          assert.equal(await rl.detect(), kind);
          assert.equal(rl.backend, kind);
        });

        test('hit counts to the limit, then denies and counts nothing', async () => {
          const key = fresh('hit');
          const first = await rl.hit(key, { limit: 2, windowMs: 60_000 });
          assert.ok(first instanceof Decision);
          assert.deepEqual([first.allowed, first.count, first.remaining, first.retryAfterMs, first.limit, first.windowMs], [true, 1, 1, null, 2, 60_000]);
          assert.ok(first.resetAfterMs > 59_000 && first.resetAfterMs <= 60_000);
          await rl.hit(key, { limit: 2, windowMs: 60_000 });
          const denied = await rl.hit(key, { limit: 2, windowMs: 60_000 });
          assert.deepEqual([denied.allowed, denied.count, denied.remaining], [false, 2, 0]);
          assert.equal(denied.retryAfterMs, denied.resetAfterMs);
          assert.equal(await raw.get(key), '2');
          assert.ok((await raw.pTTL(key)) > 0, 'the counter expires');
          const headers = denied.headers('api');
          assert.equal(headers['RateLimit-Policy'], '"api";q=2;w=60');
          assert.match(headers.RateLimit ?? '', /^"api";r=0;t=60$/);
          assert.equal(headers['Retry-After'], '60');
        });

        test('windows laid on the clock: aligned, and calendar ones in a zone', async () => {
          const aligned = fresh('aligned');
          // Hour-long windows: one that ended between the call and the check would fail it.
          const first = await rl.hit(aligned, { limit: 10, windowMs: 3_600_000, align: true });
          assert.equal(Number(await raw.sendCommand(['PEXPIRETIME', aligned])) % 3_600_000, 0);
          assert.ok(first.resetAfterMs > 0 && first.resetAfterMs <= 3_600_000 && first.windowMs === 3_600_000);
          const month = fresh('month');
          const monthly = await rl.hit(month, { limit: 10, calendar: 'month', tz: '+05:30' });
          // The month ends at midnight at +05:30: 18:30 UTC.
          assert.equal(Number(await raw.sendCommand(['PEXPIRETIME', month])) % 86_400_000, 66_600_000);
          assert.equal(monthly.windowMs, null);
          const [perMinute, perDay] = [fresh('{t}:m'), fresh('{t}:d')];
          const both = await rl.hitAll([{ key: perMinute, limit: 5, windowMs: 3_600_000 }, { key: perDay, limit: 100, calendar: 'day' }], { align: true });
          assert.deepEqual([both.allowed, ...both.decisions.map((d) => d.remaining)], [true, 4, 99]);
          // A bucket refilled at each hour's boundary lives to the next one.
          const hourly = fresh('hourly');
          const refilled = await rl.gcra(hourly, { maxBurst: 9, tokensPerPeriod: 10, periodMs: 3_600_000, tokens: 3, align: true });
          assert.deepEqual([refilled.allowed, refilled.remaining], [true, 7]);
          assert.equal(Number(await raw.sendCommand(['PEXPIRETIME', hourly])) % 3_600_000, 0);
          const dayEnds = Number(await raw.sendCommand(['PEXPIRETIME', perDay]));
          assert.equal(dayEnds % 86_400_000, 0, `the day ends at ${String(dayEnds)}, ${JSON.stringify(both)}`);
          const newYork = rl.hit(fresh('ny'), { limit: 10, calendar: 'day', tz: 'America/New_York' });
          if (kind === 'module') assert.equal((await newYork).allowed, true);
          else await assert.rejects(newYork, /named time zones need the module/);
        });

        test('the other limiters answer alike', async () => {
          const slid = await rl.slide(fresh('slide'), { limit: 3, windowMs: 1_500, cost: 2 });
          assert.deepEqual([slid.allowed, slid.count, slid.remaining, slid.retryAfterMs], [true, 2, 1, null]);
          const key = fresh('gcra');
          const bucket = await rl.gcra(key, { maxBurst: 1, tokensPerPeriod: 1, periodMs: 1_000 });
          assert.deepEqual([bucket.allowed, bucket.limit, bucket.remaining], [true, 2, 1]);
          await rl.gcra(key, { maxBurst: 1, tokensPerPeriod: 1, periodMs: 1_000 });
          const limited = await rl.gcra(key, { maxBurst: 1, tokensPerPeriod: 1, periodMs: 1_000 });
          assert.equal(limited.allowed, false);
          assert.ok(limited.retryAfterMs !== null && limited.retryAfterMs > 0 && limited.retryAfterMs <= 1_000);
          const upTo = fresh('upto');
          const rate = { maxBurst: 4, tokensPerPeriod: 1, periodMs: 60_000, tokens: 3 };
          const first = await rl.gcraUpTo(upTo, rate);
          const rest = await rl.gcraUpTo(upTo, rate);
          const none = await rl.gcraUpTo(upTo, rate);
          assert.deepEqual([first.granted, rest.granted, rest.decision.remaining, none.allowed, none.granted], [3, 2, 0, false, 0]);
          const peeked = await rl.peek(fresh('peek'), { limit: 5 });
          assert.deepEqual([peeked.allowed, peeked.count, peeked.remaining, peeked.windowMs], [true, 0, 5, null]);
        });

        test('hitAll is all or nothing', async () => {
          const tag = fresh('all');
          const limits = [
            { key: `{${tag}}:s`, limit: 1, windowMs: 1_000 },
            { key: `{${tag}}:h`, limit: 100, windowMs: 3_600_000 },
          ];
          const first = await rl.hitAll(limits);
          assert.equal(first.allowed, true);
          const second = await rl.hitAll(limits);
          assert.equal(second.allowed, false);
          assert.deepEqual(second.decisions.map((d) => [d.allowed, d.count]), [[false, 1], [true, 1]]);
          assert.equal(second.tightest.limit, 1);
          assert.equal(await raw.get(`{${tag}}:h`), '1', 'the denied call counted nowhere');
          const slides = limits.map((l) => ({ ...l, key: `${l.key}:slide` }));
          assert.equal((await rl.hitAll(slides, { slide: true, cost: 1 })).allowed, true);
          const slid = await rl.hitAll(slides, { slide: true });
          assert.deepEqual(slid.decisions.map((d) => [d.allowed, d.retryAfterMs === null]), [[false, false], [true, true]]);
          assert.ok((slid.retryAfterMs ?? 0) > 0);
        });

        test('a reservation settles what was used', async () => {
          const key = fresh('reserve');
          const reservation = await rl.reserveHit(key, { limit: 10_000, windowMs: 60_000, cost: 4_000 });
          assert.equal(reservation.allowed, true);
          assert.match(reservation.token ?? '', /^h:10000:60000:\d+:4000:[0-9a-f]{24}$/);
          const settled = await rl.settle(key, reservation.token ?? '', 1_500);
          assert.deepEqual([settled.applied, settled.decision.count, settled.decision.remaining], [-2_500, 1_500, 8_500]);
          const refunded = await rl.refundHit(key, { limit: 10_000, windowMs: 60_000, amount: 500 });
          assert.equal(refunded.count, 1_000);
          const bucket = await rl.reserveGcra(fresh('reserve'), { maxBurst: 9, tokensPerPeriod: 10, periodMs: 1_000, tokens: 5 });
          assert.match(bucket.token ?? '', /^g:/);
        });

        test('every limiter decides up to its cost, reserves up to it, and gives back', async () => {
          const key = fresh('upto');
          await rl.hit(key, { limit: 10, windowMs: 60_000, cost: 8 });
          const hit = await rl.hitUpTo(key, { limit: 10, windowMs: 60_000, cost: 5 });
          assert.deepEqual([hit.granted, hit.decision.allowed, hit.decision.count], [2, true, 10]);
          const none = await rl.hitUpTo(key, { limit: 10, windowMs: 60_000, cost: 5 });
          assert.deepEqual([none.granted, none.decision.allowed], [0, false]);
          const sliding = fresh('upto');
          await rl.slide(sliding, { limit: 10, windowMs: 60_000, cost: 9 });
          const slid = await rl.slideUpTo(sliding, { limit: 10, windowMs: 60_000, cost: 5 });
          assert.deepEqual([slid.granted, slid.decision.count], [1, 10]);
          assert.equal((await rl.refundSlide(sliding, { limit: 10, windowMs: 60_000, amount: 4 })).count, 6);
          const bucket = fresh('upto');
          const rate = { maxBurst: 2, tokensPerPeriod: 1, periodMs: 60_000, tokens: 5 };
          const block = await rl.reserveGcraUpTo(bucket, rate);
          assert.deepEqual([block.amount, block.allowed], [3, true]);
          assert.equal((await rl.refundGcra(bucket, { maxBurst: 2, tokensPerPeriod: 1, periodMs: 60_000, amount: 2 })).remaining, 2);
          assert.throws(() => commands.reserveGcraUpTo(bucket, { ...rate, tokens: 0 }), /PARTIAL needs TOKENS >= 1/);
        });

        test('a block up to the cost reserves what was granted', async () => {
          const key = fresh('block');
          await rl.hit(key, { limit: 100, windowMs: 3_600_000, cost: 45 });
          const block = await rl.reserveHitUpTo(key, { limit: 100, windowMs: 3_600_000, cost: 70 });
          assert.deepEqual([block.allowed, block.amount, block.decision.count, block.decision.remaining], [true, 55, 100, 0]);
          const settled = await rl.settle(key, block.token ?? '', 50);
          assert.deepEqual([settled.applied, settled.decision.count], [-5, 95]);
          const none = await rl.reserveHitUpTo(key, { limit: 95, windowMs: 3_600_000, cost: 70 });
          assert.deepEqual([none.allowed, none.amount, none.token], [false, 0, null]);
          assert.ok((none.retryAfterMs ?? 0) > 3_590_000);
          await assert.rejects(rl.reserveHitUpTo(key, { limit: 95, windowMs: 3_600_000, cost: -1 }), /PARTIAL needs COST >= 1/);
        });

        test('a block up to the cost on a sliding window reserves what the estimate had room for', async () => {
          const key = fresh('sliding block');
          // A window of 10^12 ms: the previous one weighs nothing, the estimate is the count.
          const window = { limit: 100, windowMs: 1e12, cost: 70 };
          const blocks = [await rl.reserveSlideUpTo(key, window), await rl.reserveSlideUpTo(key, window)];
          assert.deepEqual(blocks.map((b) => [b.allowed, b.amount, b.decision.count]), [[true, 70, 70], [true, 30, 100]]);
          const settled = await rl.settle(key, blocks[1]?.token ?? '', 10);
          assert.deepEqual([settled.applied, settled.decision.count], [-20, 80]);
          const none = await rl.reserveSlideUpTo(key, { ...window, limit: 80 });
          assert.deepEqual([none.allowed, none.amount, none.token], [false, 0, null]);
          await assert.rejects(rl.reserveSlideUpTo(key, { ...window, cost: 0 }), /PARTIAL needs COST >= 1/);
        });

        test('requests and tokens are reserved together and settled on every token limit', async () => {
          const id = fresh('llm');
          const limits = [
            { key: `{${id}}:rpm`, limit: 2, windowMs: 60_000 },
            { key: `{${id}}:tpm`, limit: 10_000, windowMs: 60_000 },
            { key: `{${id}}:tpd`, limit: 20_000, calendar: 'day' as const },
          ];
          const r = await rl.reserveAll(limits, { tokens: 4_000, tokenKeys: 2 });
          assert.ok(r.allowed);
          assert.deepEqual(r.keys, [`{${id}}:tpm`, `{${id}}:tpd`]);
          assert.deepEqual(r.decision.decisions.map((d) => d.count), [1, 4_000, 4_000]);
          assert.match(r.token ?? '', /^h:10000:60000:\d+:4000:[0-9a-f]{24},c:20000:0:\d+:4000:[0-9a-f]{24}$/);
          await rl.settling(r, (s) => {
            s.used = 1_000;
          });
          assert.deepEqual(await raw.mGet(limits.map((l) => l.key)), ['1', '1000', '1000']);
          const again = await rl.reserveAll(limits, { tokens: 4_000, tokenKeys: 2 });
          const settled = await rl.settle(again.keys, again.token ?? '', 5_000);
          assert.deepEqual(settled.map((s) => [s.applied, s.decision.count, s.decision.limit]), [[1_000, 6_000, 10_000], [1_000, 6_000, 20_000]]);
          const one = await rl.reserveAll([{ key: `{${id}}:r1`, limit: 5, windowMs: 60_000 }, { key: `{${id}}:t1`, limit: 100, windowMs: 60_000 }], { tokens: 30 });
          assert.deepEqual((await rl.settle(one.keys, one.token ?? '', 10)).map((s) => s.applied), [-20]);
          const denied = await rl.reserveAll(limits, { tokens: 1, tokenKeys: 2 });
          assert.ok(!denied.allowed && denied.token === null && (denied.retryAfterMs ?? 0) > 0);
          const month = await rl.reserveHit(fresh('month'), { limit: 1_000_000, calendar: 'month', tz: '+05:30', cost: 4_000 });
          assert.match(month.token ?? '', /^c:1000000:2:\d+:4000:[0-9a-f]{24}:\+05:30$/);
          assert.throws(() => commands.reserveAll(limits, { tokens: 5, tokenKeys: 4 }), new RateLimitError("TOKENS' key count must be between 1 and numkeys"));
          assert.throws(() => commands.hitAll(limits, { tokens: 0 }), new RateLimitError('TOKENS must be an integer >= 1'));
          assert.throws(() => commands.settle(['a', 'a'], 'x', 1), new RateLimitError('each key may be given only once'));
        });

        test('settling settles once with what was used, also when the work throws', async () => {
          const terms = { limit: 10_000, windowMs: 60_000, cost: 4_000 };
          const key = fresh('settling');
          const answer = await rl.settling(await rl.reserveHit(key, terms), (s) => {
            s.used = 1_000;
            return 'answer';
          });
          assert.equal(answer, 'answer');
          assert.equal(await raw.get(key), '1000');
          await assert.rejects(
            rl.settling(await rl.reserveHit(key, terms), (s) => {
              s.used = 500;
              throw new Error('the model failed');
            }),
            /the model failed/,
          );
          assert.equal(await raw.get(key), '1500');
          await rl.settling(await rl.reserveHit(key, terms), () => undefined);
          assert.equal(await raw.get(key), '5500', 'left unset: the estimate stays counted');
          const denied = await rl.reserveHit(key, { ...terms, limit: 5_500 });
          let ran = false;
          await rl.settling(denied, (s) => {
            ran = true;
            s.used = 1;
          });
          assert.ok(ran && !denied.allowed);
          assert.equal(await raw.get(key), '5500', 'a denied reservation sends nothing');
        });

        test('permits are acquired, renewed and released', async () => {
          const key = fresh('permit');
          const got = await rl.acquire(key, { limit: 1, leaseMs: 10_000, id: 'worker-1' });
          assert.deepEqual([got.acquired, got.inUse, got.id, got.retryAfterMs], [true, 1, 'worker-1', null]);
          const full = await rl.acquire(key, { limit: 1, leaseMs: 10_000 });
          assert.deepEqual([full.acquired, full.id], [false, null]);
          assert.ok(full.retryAfterMs !== null && full.retryAfterMs > 9_000);
          assert.ok(((await rl.renew(key, 'worker-1', 20_000)) ?? 0) > 19_000);
          assert.equal(await rl.release(key, 'worker-1'), true);
          assert.equal(await rl.release(key, 'worker-1'), false);
          assert.equal(await rl.renew(key, 'worker-1', 1_000), null);
        });

        test("the server's refusal is a RateLimitError, word for word", async () => {
          const key = fresh('wrongtype');
          await raw.sAdd(key, 'x');
          await assert.rejects(rl.hit(key, { limit: 1, windowMs: 1_000 }), (e: unknown) => e instanceof RateLimitError && /^WRONGTYPE/.test(e.message));
          await assert.rejects(rl.settle(key, 'h:1:2:3', 1), (e: unknown) => e instanceof RateLimitError && e.message === 'ERR invalid reservation');
        });
      });
    }

    describe('bad input', () => {
      let sent: string[][];
      let rl: RateLimiter;
      let client: Awaited<ReturnType<typeof rawClient>>;
      before(async () => {
        client = await rawClient(server.port);
        sent = [];
        rl = new RateLimiter((...args: string[]) => {
          sent.push(args);
          return client.sendCommand(args);
        });
        await rl.detect();
      });
      after(async () => client.close());

      const refused: [string, () => Promise<unknown>, string][] = [
        ['a limit of 0', () => rl.hit('k', { limit: 0, windowMs: 1_000 }), 'limit must be an integer >= 1'],
        ['a window in fractions of ms', () => rl.hit('k', { limit: 1, windowMs: 1.5 }), 'windowMs must be a whole number of milliseconds >= 1'],
        ['a cost of 0', () => rl.slide('k', { limit: 1, windowMs: 1_000, cost: 0 }), 'COST must be a nonzero integer'],
        ['an unknown view', () => rl.top({ view: 'all' as never }), "view must be 'denied', 'admitted' or 'shadowed'"],
        ['a misspelt option', () => rl.hit('k', { limit: 1, windowMs: 1_000, costs: 2 } as never), "hit takes no option 'costs' (it takes limit, windowMs, calendar, cost, align, tz)"],
        ['a zone without a calendar window', () => rl.hit('k', { limit: 1, windowMs: 1_000, tz: 'UTC' }), 'TZ needs a calendar window (day, week, month or year)'],
        ['an unknown calendar unit', () => rl.hit('k', { limit: 1, calendar: 'fortnight' as never }), 'calendar must be day, week, month or year'],
        ['SLIDE with ALIGN', () => rl.hitAll([{ key: 'a', limit: 1, windowMs: 1_000 }], { slide: true, align: true }), 'syntax error: SLIDE and ALIGN cannot be given together'],
        ['ms beside a calendar window', () => rl.hitAll([{ key: '{a}1', limit: 1, windowMs: 1_500 }, { key: '{a}2', limit: 1, calendar: 'day' }]), 'beside a calendar window, windowMs must be whole seconds'],
        ['a key that is not a string', () => rl.hit(42 as never, { limit: 1, windowMs: 1_000 }), 'key must be a string, not number'],
        ['a negative reservation', () => rl.reserveHit('k', { limit: 1, windowMs: 1_000, cost: -1 }), 'RESERVE needs COST >= 1'],
        ['hitAll without limits', () => rl.hitAll([]), 'hitAll needs one or more {key, limit, windowMs}'],
        ['a key twice in hitAll', () => rl.hitAll([{ key: 'a', limit: 1, windowMs: 1 }, { key: 'a', limit: 1, windowMs: 1 }]), 'each key may be given only once'],
        ['an id over 256 bytes', () => rl.acquire('k', { limit: 1, leaseMs: 1_000, id: 'x'.repeat(257) }), 'ID must be 1 to 256 bytes'],
        ['used below 0', () => rl.settle('k', 'h:1:1:1:1:00000000', -1), 'used must be an integer >= 0'],
        ['a burst below 0', () => rl.gcra('k', { maxBurst: -1, tokensPerPeriod: 1, periodMs: 1 }), 'maxBurst must be an integer >= 0'],
      ];
      for (const [what, call, message] of refused) {
        test(`${what} is refused before anything is sent`, async () => {
          sent.length = 0;
          await assert.rejects(call(), (e: unknown) => e instanceof RateLimitError && e.message === message);
          assert.deepEqual(sent, []);
        });
      }

      test('the same builders are the commands module', () => {
        const call = commands.hit('k', { limit: 5, windowMs: 1_500, cost: 2 });
        assert.deepEqual([call.command, call.fn, call.keys, call.args], ['RATELIMIT.HIT', 'ratelimit_hit', ['k'], [5, 1_500, 'COST', 2, 'MS']]);
      });
    });

    test('TOP is the module only (its RESP3 maps read as RESP2 pairs)', async () => {
      const resp3 = await createClient({ socket: { host: '127.0.0.1', port: server.port }, RESP: 3 }).connect();
      try {
        for (const rl of [new RateLimiter(raw), new RateLimiter(resp3)]) {
          const key = fresh('top');
          await rl.hit(key, { limit: 1, windowMs: 60_000 });
          await rl.hit(key, { limit: 1, windowMs: 60_000 });
          if (kind === 'module') {
            const entries = await rl.top({ view: 'denied', count: 100 });
            assert.ok(entries.some((e) => e.key === key && e.count >= 1));
            // Shadow mode: a call its limit would deny is admitted, and shown in the SHADOWED view.
            const shadowed = fresh('shadowed');
            await raw.sendCommand(['CONFIG', 'SET', 'ratelimit.shadow', shadowed]);
            try {
              await rl.hit(shadowed, { limit: 1, windowMs: 60_000 });
              assert.equal((await rl.hit(shadowed, { limit: 1, windowMs: 60_000 })).allowed, true);
              const wouldDeny = await rl.top({ view: 'shadowed', count: 100 });
              assert.ok(wouldDeny.some((e) => e.key === shadowed && e.count === 1));
            } finally {
              await raw.sendCommand(['CONFIG', 'SET', 'ratelimit.shadow', '']);
            }
          } else {
            await assert.rejects(rl.top(), /RATELIMIT.TOP needs the module/);
          }
        }
      } finally {
        await resp3.close();
      }
    });

    if (kind === 'library') {
      test('the library is loaded when missing, and again when the server lost it', async () => {
        await raw.sendCommand(['FUNCTION', 'FLUSH']);
        const rl = new RateLimiter(raw);
        assert.equal((await rl.hit(fresh('load'), { limit: 1, windowMs: 1_000 })).allowed, true);
        await raw.sendCommand(['FUNCTION', 'FLUSH']);
        assert.equal((await rl.hit(fresh('load'), { limit: 1, windowMs: 1_000 })).allowed, true);
        const listed = (await raw.sendCommand(['FUNCTION', 'LIST', 'LIBRARYNAME', 'ratelimit'])) as unknown[];
        assert.equal(listed.length, 1);
      });

      test('without loadLibrary, a server without the library is LibraryNotLoaded', async () => {
        await raw.sendCommand(['FUNCTION', 'FLUSH']);
        const client = await rawClient(server.port);
        try {
          const rl = new RateLimiter(client, { loadLibrary: false });
          await assert.rejects(rl.hit(fresh('noload'), { limit: 1, windowMs: 1_000 }), LibraryNotLoaded);
          assert.deepEqual(await raw.sendCommand(['FUNCTION', 'LIST']), []);
        } finally {
          await client.close();
        }
      });
    }

    describe('withPermit', () => {
      test('holds a permit while the function runs, and gives it back when it throws', async () => {
        const rl = new RateLimiter(raw);
        const key = fresh('with');
        const seen = await rl.withPermit(key, { limit: 1, leaseMs: 10_000 }, async (permit) => {
          await assert.rejects(rl.withPermit(key, { limit: 1, leaseMs: 10_000 }, () => 'never'), PermitUnavailable);
          return permit.id;
        });
        assert.equal(typeof seen, 'string');
        assert.equal(await raw.zCard(key), 0);
        await assert.rejects(
          rl.withPermit(key, { limit: 1, leaseMs: 10_000 }, () => {
            throw new Error('boom');
          }),
          /boom/,
        );
        assert.equal(await raw.zCard(key), 0);
      });

      test('renews the lease while the function outlasts it', async () => {
        const rl = new RateLimiter(raw);
        const key = fresh('renew');
        await rl.withPermit(key, { limit: 1, leaseMs: 600 }, async (permit) => {
          const first = Number(await raw.zScore(key, permit.id));
          // Renewed every 200 ms; given 10 s here, so that a stalled machine does not fail it.
          for (let i = 0; i < 200 && Number(await raw.zScore(key, permit.id)) <= first; i++) await sleep(50);
          assert.ok(Number(await raw.zScore(key, permit.id)) > first, 'the lease was renewed');
          assert.equal(permit.lost, false);
        });
      });

      test('waits for a permit when asked to', async () => {
        const rl = new RateLimiter(raw);
        const key = fresh('wait');
        await rl.acquire(key, { limit: 1, leaseMs: 300 });
        const started = Date.now();
        await rl.withPermit(key, { limit: 1, leaseMs: 1_000, wait: true, timeoutMs: 10_000 }, () => undefined);
        assert.ok(Date.now() - started >= 250, 'it waited for the lease held to end');
      });
    });
  });
}
