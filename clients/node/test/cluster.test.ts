// The client on a three-node Redis Cluster, through node-redis's cluster client, ioredis's
// Cluster and iovalkey's: each call goes straight to the node that holds its key (no MOVED
// round trip: the nodes' commandstats show no rejected call), the library is loaded on each node
// as calls reach it, and hitAll's keys share a slot or are refused with CROSSSLOT before anything
// is sent.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster as IoRedisCluster } from 'ioredis';
import { Cluster as IoValkeyCluster } from 'iovalkey';
import { createClient, createCluster } from 'redis';
import { RateLimiter, RateLimitError, RedisStore } from 'redis-ratelimit';
import { KINDS, Server } from './servers.js';

type Node = Awaited<ReturnType<typeof connect>>;
const connect = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect();
const RANGES = [
  ['0', '5460'],
  ['5461', '10922'],
  ['10923', '16383'],
];

/** The calls of `command` each node refused (MOVED, ASK, CROSSSLOT...), from its commandstats. */
async function rejected(nodes: Node[], command: string): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    const line = new RegExp(`cmdstat_${command.toLowerCase().replace('.', '\\.')}:[^\\r\\n]*rejected_calls=(\\d+)`).exec(await node.info('commandstats'));
    total += Number(line?.[1] ?? 0);
  }
  return total;
}

for (const kind of KINDS) {
  describe(`a three-node cluster with the ${kind}`, () => {
    const servers: Server[] = [];
    const nodes: Node[] = [];
    before(async () => {
      for (const range of RANGES) {
        const server = await Server.start(kind, { cluster: true });
        servers.push(server);
        const node = await connect(server.port);
        nodes.push(node);
        await node.sendCommand(['CLUSTER', 'ADDSLOTSRANGE', ...range]);
      }
      for (const server of servers.slice(1)) await nodes[0]?.sendCommand(['CLUSTER', 'MEET', '127.0.0.1', String(server.port)]);
      // Every node knows every slot (10 s here, so that a stalled machine does not fail it).
      for (let i = 0; i < 200; i++) {
        const states = await Promise.all(nodes.map(async (n) => [String(await n.sendCommand(['CLUSTER', 'INFO'])), (await n.sendCommand(['CLUSTER', 'SLOTS'])) as unknown[]] as const));
        if (states.every(([info, slots]) => info.includes('cluster_state:ok') && slots.length === 3)) return;
        await sleep(50);
      }
      throw new Error('the cluster did not come up');
    });
    after(async () => {
      for (const node of nodes) await node.close();
      for (const server of servers) await server.stop();
    });

    const clients: [string, () => Promise<{ client: object; close: () => Promise<unknown> }>][] = [
      ['node-redis cluster', async () => {
        const client = await createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: servers[0]?.port ?? 0 } }] }).connect();
        return { client, close: () => client.close() };
      }],
      ['ioredis Cluster', async () => {
        const client = new IoRedisCluster([{ host: '127.0.0.1', port: servers[0]?.port ?? 0 }]);
        await client.ping();
        return { client, close: () => client.quit() };
      }],
      ['iovalkey Cluster', async () => {
        const client = new IoValkeyCluster([{ host: '127.0.0.1', port: servers[0]?.port ?? 0 }]);
        await client.ping();
        return { client, close: () => client.quit() };
      }],
    ];
    test("express-rate-limit's RedisStore through rate-limit-redis's sendCommandCluster", async () => {
      const cluster = await createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: servers[0]?.port ?? 0 } }] }).connect();
      try {
        const command = kind === 'module' ? 'RATELIMIT.HIT' : 'FCALL';
        const before = await rejected(nodes, command);
        // Written as a function with `this`, which rate-limit-redis binds to the store.
        const seen = new Set<unknown>();
        const store = new RedisStore({
          sendCommandCluster: function (this: RedisStore, { key, isReadOnly, command: args }) {
            seen.add(this);
            return cluster.sendCommand(key, isReadOnly, args);
          },
        });
        store.init({ windowMs: 60_000 });
        for (let i = 0; i < 20; i++) assert.equal((await store.increment(`user${String(i)}`)).totalHits, 1);
        assert.equal((await store.increment('user0')).totalHits, 2);
        assert.equal(await rejected(nodes, command), before, 'each count on its key\'s node');
        assert.deepEqual([...seen], [store], 'every call has the store as this');
      } finally {
        await cluster.close();
      }
    });

    for (const [name, make] of clients) {
      test(`${name}: each call to its key's node, and hitAll's keys in one slot or CROSSSLOT before anything is sent`, async () => {
        const { client, close } = await make();
        const command = kind === 'module' ? 'RATELIMIT.HIT' : 'FCALL';
        try {
          const rl = new RateLimiter(client);
          const before = await rejected(nodes, command);
          const keys = Array.from({ length: 30 }, (_, i) => `c:${name}:${String(i)}`);
          for (const key of keys) assert.equal((await rl.hit(key, { limit: 1, windowMs: 60_000 })).allowed, true);
          for (const key of keys) assert.equal((await rl.hit(key, { limit: 1, windowMs: 60_000 })).allowed, false);
          assert.equal(rl.backend, kind);
          assert.equal(await rejected(nodes, command), before, 'no call went to a node without its key');
          const counted = await Promise.all(nodes.map((n) => n.dbSize()));
          assert.ok(counted.every((n) => n > 0), `the keys are spread over the nodes (${counted.join(', ')})`);
          const tagged = await rl.hitAll([
            { key: `{c:${name}}:s`, limit: 1, windowMs: 1_000 },
            { key: `{c:${name}}:h`, limit: 5, windowMs: 60_000 },
          ]);
          assert.equal(tagged.allowed, true);
          await assert.rejects(
            rl.hitAll([
              { key: `c:${name}:x`, limit: 1, windowMs: 1_000 },
              { key: `c:${name}:y`, limit: 1, windowMs: 1_000 },
            ]),
            (e: unknown) => e instanceof RateLimitError && e.message.startsWith('CROSSSLOT'),
          );
        } finally {
          await close();
        }
      });
    }
  });
}
