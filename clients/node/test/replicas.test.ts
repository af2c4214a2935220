// Limiters that wait for replicas (`waitForReplicas`), through every client, standalone and in a
// cluster: each write answers once the replica holds it (read back from it at once), or throws
// NotReplicatedError with the answer. WAIT has to go on the connection that wrote (it counts what its
// own connection wrote): with the replica stopped (SIGSTOP), a write is not acknowledged. Reads
// never wait.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster as IoRedisCluster, Redis as IoRedis } from 'ioredis';
import { Cluster as IoValkeyCluster } from 'iovalkey';
import { createClientPool, createCluster } from 'redis';
import { Decision, NotReplicatedError, RateLimiter, RateLimitError } from 'redis-ratelimit';
import { CLIENTS, type Connected } from './clients.js';
import { KINDS, Server } from './servers.js';

// Long enough for a busy machine: only a stopped replica ever runs out of it.
const PATIENT_MS = 10_000;
let serial = 0;

async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await condition()) return;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A primary and its replica (without the module: it applies what the primary replicates); in a
 * cluster, a one-node cluster and a replica of that node. */
class Pair {
  constructor(
    readonly primary: Server,
    readonly replica: Server,
    readonly toPrimary: IoRedis,
    readonly toReplica: IoRedis,
  ) {}

  static async start(kind: (typeof KINDS)[number], cluster: boolean): Promise<Pair> {
    const primary = await Server.start(kind, { cluster });
    const toPrimary = new IoRedis(primary.port, '127.0.0.1');
    if (cluster) {
      await toPrimary.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
      await until(async () => String(await toPrimary.call('CLUSTER', 'INFO')).includes('cluster_state:ok'), 'the cluster');
    }
    const replica = await Server.start('library', cluster ? { cluster } : { replicaOf: primary });
    const toReplica = new IoRedis(replica.port, '127.0.0.1');
    if (cluster) {
      const id = String(await toPrimary.call('CLUSTER', 'MYID'));
      await toReplica.call('CLUSTER', 'MEET', '127.0.0.1', String(primary.port));
      await until(async () => String(await toReplica.call('CLUSTER', 'NODES')).includes(id), 'the meeting');
      await toReplica.call('CLUSTER', 'REPLICATE', id);
      await toReplica.call('READONLY');
    }
    await until(async () => /slave0:.*state=online/.test(await toPrimary.info('replication')), 'the replica');
    return new Pair(primary, replica, toPrimary, toReplica);
  }

  /** Every key of the primary is on the replica with the same value, read at once. */
  async sameData(): Promise<void> {
    const keys = (await this.toPrimary.keys('*')).sort();
    assert.ok(keys.length > 0, 'the calls wrote nothing');
    assert.deepEqual((await this.toReplica.keys('*')).sort(), keys);
    for (const key of keys) assert.deepEqual(await this.toReplica.dumpBuffer(key), await this.toPrimary.dumpBuffer(key), key);
  }

  /** Writes of each kind wait until the replica has them; with the replica stopped, a write is
   * not acknowledged and a read does not wait. */
  async check(rl: RateLimiter): Promise<void> {
    const key = `{t}${String(++serial)}`;
    assert.equal((await rl.hit(key, { limit: 10, windowMs: 60_000 })).count, 1);
    await this.sameData();
    const r = await rl.reserveHit(`${key}:t`, { limit: 1000, windowMs: 60_000, cost: 400 });
    await this.sameData();
    assert.equal((await rl.settle(`${key}:t`, r.token ?? '', 100)).applied, -300);
    await this.sameData();
    assert.ok((await rl.acquire(`${key}:l`, { limit: 2, leaseMs: 30_000, id: 'me' })).acquired);
    await this.sameData();

    this.replica.process?.kill('SIGSTOP');
    try {
      const quick = rl.waitingForReplicas(1, 50);
      await assert.rejects(quick.hit(key, { limit: 10, windowMs: 60_000 }), (error) => {
        assert.ok(error instanceof NotReplicatedError);
        assert.equal(error.acknowledged, 0);
        assert.equal(error.wanted, 1);
        assert.ok(error.answer instanceof Decision && error.answer.count === 2);
        return true;
      });
      assert.equal((await quick.peek(key, { limit: 10 })).count, 2);
    } finally {
      this.replica.process?.kill('SIGCONT');
    }
  }

  async stop(): Promise<void> {
    this.toPrimary.disconnect();
    this.toReplica.disconnect();
    await this.replica.stop();
    await this.primary.stop();
  }
}

for (const kind of KINDS) {
  describe(`a primary and its replica, with the ${kind}`, () => {
    let pair: Pair;
    before(async () => {
      pair = await Pair.start(kind, false);
    });
    after(async () => pair.stop());

    const clients: Record<string, (port: number) => Promise<Connected>> = {
      ...CLIENTS,
      'node-redis 6 pool': async (port) => {
        const pool = createClientPool({ socket: { host: '127.0.0.1', port } }, { minimum: 3 });
        await pool.connect();
        return { client: pool, close: async () => void (await pool.close()) };
      },
    };
    for (const [name, connect] of Object.entries(clients)) {
      test(name, async () => {
        const connected = await connect(pair.primary.port);
        try {
          await pair.check(new RateLimiter(connected.client, { waitForReplicas: 1, replicaTimeoutMs: PATIENT_MS }));
        } finally {
          await connected.close();
        }
      });
    }
  });

  describe(`a cluster's node and its replica, with the ${kind}`, () => {
    let pair: Pair;
    before(async () => {
      pair = await Pair.start(kind, true);
    });
    after(async () => pair.stop());

    const root = () => [{ host: '127.0.0.1', port: pair.primary.port }];
    const clusters: Record<string, () => Promise<Connected>> = {
      'node-redis cluster': async () => {
        const client = await createCluster({ rootNodes: [{ socket: root()[0] ?? {} }] }).connect();
        return { client, close: async () => void (await client.close()) };
      },
      'ioredis Cluster': async () => {
        const client = new IoRedisCluster(root());
        await client.ping();
        return { client, close: async () => void (await client.quit()) };
      },
      'iovalkey Cluster': async () => {
        const client = new IoValkeyCluster(root());
        await client.ping();
        return { client, close: async () => void (await client.quit()) };
      },
    };
    for (const [name, connect] of Object.entries(clusters)) {
      test(name, async () => {
        const connected = await connect();
        try {
          await pair.check(new RateLimiter(connected.client, { waitForReplicas: 1, replicaTimeoutMs: PATIENT_MS }));
        } finally {
          await connected.close();
        }
      });
    }
  });
}

/** A client that still maps a slot to its first node, after the slot moved to a second: the
 * write is redirected (MOVED), and it and its WAIT reach the node that holds the slot now. */
describe('a slot moved since the client read the slots', () => {
  const kind = KINDS[0] ?? 'module';
  const clusters: Record<string, (port: number) => Promise<Connected>> = {
    'node-redis cluster': async (port) => {
      const client = await createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port } }] }).connect();
      return { client, close: async () => void (await client.close()) };
    },
    'ioredis Cluster': async (port) => {
      const client = new IoRedisCluster([{ host: '127.0.0.1', port }]);
      await client.ping();
      return { client, close: async () => void (await client.quit()) };
    },
  };
  for (const [name, connect] of Object.entries(clusters)) {
    test(name, async () => {
      const [first, second] = [await Server.start(kind, { cluster: true }), await Server.start(kind, { cluster: true })];
      const [old, now] = [new IoRedis(first.port, '127.0.0.1'), new IoRedis(second.port, '127.0.0.1')];
      let connected: Connected | undefined;
      try {
        await old.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
        await until(async () => String(await old.call('CLUSTER', 'INFO')).includes('cluster_state:ok'), 'the cluster');
        connected = await connect(first.port);
        const rl = new RateLimiter(connected.client, { waitForReplicas: 1, replicaTimeoutMs: 50 });
        await rl.waitingForReplicas(0).hit('{x}k', { limit: 10, windowMs: 60_000 }); // slots read, backend found
        await now.config('SET', 'cluster-node-timeout', '1000'); // it waits that long (at most 5 s) to say "ok"
        await now.call('CLUSTER', 'MEET', '127.0.0.1', String(first.port));
        const id = String(await now.call('CLUSTER', 'MYID'));
        await until(async () => String(await old.call('CLUSTER', 'NODES')).includes(id), 'the meeting');
        const slot = String(await old.call('CLUSTER', 'KEYSLOT', '{y}k'));
        for (const node of [now, old]) await node.call('CLUSTER', 'SETSLOT', slot, 'NODE', id);
        for (const node of [now, old]) await until(async () => String(await node.call('CLUSTER', 'INFO')).includes('cluster_state:ok'), 'the cluster');
        await assert.rejects(rl.hit('{y}k', { limit: 10, windowMs: 60_000 }), (error) => {
          assert.ok(error instanceof NotReplicatedError && error.acknowledged === 0);
          assert.ok(error.answer instanceof Decision && error.answer.count === 1);
          return true;
        });
        assert.equal(await now.exists('{y}k'), 1);
        assert.match(await now.info('commandstats'), /cmdstat_wait:calls=1,/);
        assert.equal(await old.call('CLUSTER', 'COUNTKEYSINSLOT', slot), 0);
      } finally {
        await connected?.close();
        old.disconnect();
        now.disconnect();
        await first.stop();
        await second.stop();
      }
    });
  }
});

test('bad options are refused before anything is sent', () => {
  const never = (..._args: string[]): Promise<unknown> => Promise.reject(new Error('sent'));
  for (const [options, message] of [
    [{ waitForReplicas: -1 }, 'waitForReplicas must be an integer >= 0, got -1'],
    [{ waitForReplicas: 1.5 }, 'waitForReplicas must be an integer >= 0, got 1.5'],
    [{ replicaTimeoutMs: 0 }, 'replicaTimeoutMs must be a number of milliseconds > 0, got 0'],
    [{ replicaTimeoutMs: Infinity }, 'replicaTimeoutMs must be a number of milliseconds > 0, got Infinity'],
  ] as const) {
    assert.throws(() => new RateLimiter(never, options), new RateLimitError(message));
  }
  const own = { cluster: false, send: never };
  assert.throws(() => new RateLimiter(own, { waitForReplicas: 1 }), /needs a Connection with sendAndWait/);
  assert.equal(new RateLimiter(own).waitForReplicas, 0);
});
