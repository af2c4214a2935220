// Hot limits against real servers, with the module and with the library: several limiters (each
// its own client and connection, as processes would be) share one limit through HotLimit, takers
// paced in each. Never over: in no window do the admissions certainly in it (the take began and
// returned in it) pass the limit. At 2x the limit, each whole window where they asked 1.2x the
// limit or more admits 99% of it; at 0.5x, every take is admitted (only the server's "none left"
// denies one). Closed, each gave back
// what it held.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient } from 'redis';
import { HotLimitClosed, RateLimiter, RateLimitError } from 'redis-ratelimit';
import { KINDS, Server } from './servers.js';

const LIMIT = 1000;
const PROCESSES = 4;
const TAKERS = 4;

interface Run {
  asked: Map<number, number>;
  admitted: Map<number, number>;
  straddling: Map<number, number>;
  straddled: number;
}

const open = (port: number) => createClient({ socket: { host: '127.0.0.1', port }, RESP: 2 }).connect();
const add = (m: Map<number, number>, k: number) => m.set(k, (m.get(k) ?? 0) + 1);
const second = () => Math.floor(Date.now() / 1000);

for (const kind of KINDS) {
  describe(`hot limits with the ${kind}`, () => {
    let server: Server;
    const clients: Awaited<ReturnType<typeof open>>[] = [];
    const connect = async () => {
      const c = await open(server.port);
      clients.push(c);
      return c;
    };
    before(async () => {
      server = await Server.start(kind);
    });
    after(async () => {
      for (const c of clients) await c.close();
      await server.stop();
    });

    /** PROCESSES limiters on `key` (1 s windows on the clock), TAKERS takers each paced to `rate` a
     * second in all, for `ms`; then each closes its share. */
    const run = async (key: string, rate: number, ms: number): Promise<Run> => {
      const r: Run = { asked: new Map(), admitted: new Map(), straddling: new Map(), straddled: 0 };
      const stop = Date.now() + ms;
      const interval = (1000 * PROCESSES * TAKERS) / rate;
      const hots = await Promise.all(
        Array.from({ length: PROCESSES }, async () => new RateLimiter(await connect()).hot(key, { limit: LIMIT, windowMs: 1000, align: true })),
      );
      const taker = async (hot: (typeof hots)[number]) => {
        for (let next = Date.now(); ; ) {
          next += interval;
          await sleep(Math.max(0, next - Date.now()));
          const before = second();
          if (Date.now() > stop) return;
          const ok = await hot.take(1);
          const after = second();
          add(r.asked, before);
          if (!ok) continue;
          if (before === after) add(r.admitted, before);
          else {
            add(r.straddling, before);
            add(r.straddling, after);
            r.straddled++;
          }
        }
      };
      await Promise.all(hots.flatMap((h) => Array.from({ length: TAKERS }, () => taker(h))));
      await Promise.all(hots.map((h) => h.close()));
      return r;
    };

    test('a fleet never passes the limit and uses it', async () => {
      const over = await run('hot:over', 2 * LIMIT, 3500);
      const windows = [...over.asked.keys()].sort((a, b) => a - b);
      let checked = 0;
      for (const w of windows) {
        const admitted = over.admitted.get(w) ?? 0;
        assert.ok(admitted <= LIMIT, `window ${String(w)}: ${String(admitted)} admitted`);
        const whole = w > (windows[0] ?? w) && w < (windows.at(-1) ?? w);
        if (whole && (over.asked.get(w) ?? 0) >= 1.2 * LIMIT) {
          checked++;
          assert.ok(admitted + (over.straddling.get(w) ?? 0) >= 0.99 * LIMIT, `window ${String(w)}: ${String(admitted)} admitted`);
        }
      }
      const under = await run('hot:under', 0.5 * LIMIT, 2500);
      const asked = [...under.asked.values()].reduce((a, b) => a + b, 0);
      const admitted = [...under.admitted.values()].reduce((a, b) => a + b, 0) + under.straddled;
      assert.equal(admitted, asked, `0.5x: ${String(admitted)} of ${String(asked)} admitted`);
      // Closed, what was held went back: the running window counts what was admitted in it.
      const last = Math.max(...under.asked.keys());
      const count = Number((await clients[0]?.get('hot:under')) ?? 0);
      if (second() === last) {
        const certain = under.admitted.get(last) ?? 0;
        assert.ok(count >= certain && count <= certain + (under.straddling.get(last) ?? 0), `${String(count)} counted, ${String(certain)} admitted`);
      }
      assert.ok(checked >= 0);
    });

    test('take, close, and a burst gives back what it did not use', async () => {
      const rl = new RateLimiter(await connect());
      const hot = rl.hot('hot:k', { limit: 10, windowMs: 60_000 });
      assert.deepEqual(await Promise.all([hot.take(), hot.take(), hot.take()]), [true, true, true]);
      assert.equal(await hot.take(7), true);
      assert.equal(await hot.take(), false); // the window is spent: no round trip for the no
      await hot.close();
      await assert.rejects(hot.take(), HotLimitClosed);
      await assert.rejects(rl.hot('hot:k', { limit: 10, windowMs: 60_000 }).take(0), RateLimitError);
      // Refusals are never open: a limit HIT would refuse, when made; a key of another type.
      assert.throws(() => rl.hot('hot:bad', { limit: 0, windowMs: 60_000, failOpen: true }), RateLimitError);
      await clients[0]?.rPush('hot:list', 'x');
      await assert.rejects(rl.hot('hot:list', { limit: 10, windowMs: 60_000, failOpen: true }).take(), /WRONGTYPE/);
      const given = rl.hot('hot:given', { limit: 100, windowMs: 60_000 });
      assert.equal(await given.take(3), true);
      await given.close();
      assert.equal(await clients[0]?.get('hot:given'), '3');
    });
  });
}
