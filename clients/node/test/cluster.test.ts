// The client on a one-node Redis Cluster (every slot on one node), through node-redis's cluster:
// calls routed by their keys, hitAll's keys in one slot or CROSSSLOT before
// anything is sent, and the library loaded on the node that holds the key.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createClient, createCluster } from 'redis';
import { RateLimiter, RateLimitError } from 'redis-ratelimit';
import { KINDS, Server } from './servers.js';

for (const kind of KINDS) {
  describe(`a cluster with the ${kind}`, () => {
    let server: Server;
    before(async () => {
      server = await Server.start(kind, { cluster: true });
      const node = await createClient({ socket: { host: '127.0.0.1', port: server.port } }).connect();
      try {
        await node.sendCommand(['CLUSTER', 'ADDSLOTSRANGE', '0', '16383']);
        for (let i = 0; i < 200 && !String(await node.sendCommand(['CLUSTER', 'INFO'])).includes('cluster_state:ok'); i++) await sleep(50);
      } finally {
        await node.close();
      }
    });
    after(async () => server.stop());

    const clients: [string, () => Promise<{ client: object; close: () => Promise<unknown> }>][] = [
      ['node-redis cluster', async () => {
        const client = await createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: server.port } }] }).connect();
        return { client, close: () => client.close() };
      }],
    ];
    for (const [name, connect] of clients) {
      test(`${name}: routed calls, and hitAll's keys in one slot or CROSSSLOT before anything is sent`, async () => {
        const { client, close } = await connect();
        try {
          const rl = new RateLimiter(client);
          assert.equal((await rl.hit(`c:${name}:a`, { limit: 1, windowMs: 60_000 })).allowed, true);
          assert.equal(rl.backend, kind);
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
