// The Redis clients the package talks through, each behind one small adapter: node-redis 4 to 6
// (a client, a pool or a cluster), ioredis 5 and iovalkey (a client or a Cluster), and a bare
// `sendCommand` function as rate-limit-redis takes it. None is a dependency: an adapter only calls
// the client it was given.

import type { Arg } from './commands.js';
import { slotOf } from './slot.js';

/** One command to one server, routed by its keys in a cluster (a keyless one goes to any node). */
export interface Connection {
  send(args: readonly Arg[], keys: readonly string[], readonly: boolean): Promise<unknown>;
  /** A write and `wait` (a WAIT) on the connection that made the write, since WAIT counts what
   * its own connection wrote: both replies. Without it, a limiter cannot wait for replicas. */
  sendAndWait?(args: readonly Arg[], keys: readonly string[], wait: readonly Arg[]): Promise<[unknown, unknown]>;
  /** Keys must share a slot (and are checked to before sending). */
  readonly cluster: boolean;
}

type Method = (...args: never[]) => Promise<unknown>;

/** node-redis: `createClient()`, `createClientPool()`, `createCluster()` (4.x to 6.x). */
interface NodeRedisClient {
  sendCommand(args: string[]): Promise<unknown>;
}
/** A pool lends one of its clients to a function. */
interface NodeRedisPool extends NodeRedisClient {
  execute<T>(fn: (client: NodeRedisClient) => Promise<T>): Promise<T>;
}
interface NodeRedisCluster {
  sendCommand(firstKey: string | undefined, isReadonly: boolean | undefined, args: string[]): Promise<unknown>;
  readonly masters: unknown;
}
/** ioredis and iovalkey: `new Redis()`, `new Cluster()`. */
interface IoRedisClient {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  readonly isCluster?: boolean;
  /** A Cluster's: each slot's nodes, the primary first, as `host:port`. */
  readonly slots?: (readonly string[] | undefined)[];
  nodes?(role: 'master'): (IoRedisClient & { readonly options: { host?: string; port?: number } })[];
}

/** A Cluster's primary at `host:port`, if it knows it. */
function ioNode(cluster: IoRedisClient, address: string | undefined): IoRedisClient | undefined {
  return address === undefined ? undefined : cluster.nodes?.('master').find((n) => `${n.options.host ?? ''}:${String(n.options.port)}` === address);
}

/** A Cluster's primary for `key`, by the slots it last read; undefined when it knows none. */
function ioPrimary(cluster: IoRedisClient, key: string): IoRedisClient | undefined {
  return ioNode(cluster, cluster.slots?.[slotOf(key)]?.[0]);
}

const REDIRECT = /^(MOVED|ASK) \d+ (\S+)/;

/** Commands sent back to back on one connection, answered in order. */
type Send = (args: readonly Arg[]) => Promise<unknown>;
const together = (send: Send) => (args: readonly Arg[], _keys: readonly string[], wait: readonly Arg[]) =>
  Promise.all([send(args), send(wait)]);

/** In a cluster client that routes by key and follows redirects itself: the write, then WAIT to
 * the same key's node (one connection per node). During a slot's migration (an ASK), that can be
 * the slot's former node, whose answer then covers what that connection wrote before. */
const sequential =
  (send: (args: readonly Arg[], keys: readonly string[]) => Promise<unknown>) =>
  async (args: readonly Arg[], keys: readonly string[], wait: readonly Arg[]): Promise<[unknown, unknown]> => {
    const reply = await send(args, keys);
    return [reply, await send(wait, keys)];
  };

/** ioredis's Cluster routes a command by its keys only where its command table knows them: the
 * module's commands are not there, nor FCALL in iovalkey's. So a keyed command goes to its key's
 * primary here, and through the Cluster (which follows MOVED and ASK) when that node no longer
 * holds the slot, or none is known yet. */
function ioCluster(cluster: IoRedisClient): Connection {
  const call = (node: IoRedisClient, args: readonly Arg[]) => {
    const [command = '', ...rest] = args.map(String);
    return node.call(command, ...rest);
  };
  return {
    cluster: true,
    send: async (args, keys) => {
      const node = keys[0] === undefined ? undefined : ioPrimary(cluster, keys[0]);
      if (node !== undefined) {
        try {
          return await call(node, args);
        } catch (error) {
          if (!(error instanceof Error) || !REDIRECT.test(error.message)) throw error;
        }
      }
      return call(cluster, args);
    },
    // The write and WAIT back to back on the key's primary; after an ASK, with ASKING, on the node
    // it names; after a MOVED, the write through the Cluster (which learns the slot's new node),
    // then WAIT on that node.
    sendAndWait: async (args, keys, wait) => {
      const key = keys[0] ?? '';
      const node = ioPrimary(cluster, key);
      if (node !== undefined) {
        try {
          return await together((a) => call(node, a))(args, keys, wait);
        } catch (error) {
          const redirect = error instanceof Error ? REDIRECT.exec(error.message) : null;
          if (redirect === null) throw error;
          const asked = redirect[1] === 'ASK' ? ioNode(cluster, redirect[2]) : undefined;
          if (asked !== undefined) {
            const [, reply, acknowledged] = await Promise.all([call(asked, ['ASKING']), call(asked, args), call(asked, wait)]);
            return [reply, acknowledged];
          }
        }
      }
      const reply = await call(cluster, args);
      const now = ioPrimary(cluster, key);
      if (now === undefined) throw new Error(`the Cluster knows no primary for ${JSON.stringify(key)} to send WAIT to`);
      return [reply, await call(now, wait)];
    },
  };
}

/** A bare function as rate-limit-redis takes it: `(...args) => client.sendCommand(args)`. */
export type SendCommand = (...args: string[]) => Promise<unknown>;
/** rate-limit-redis's cluster form: the command, and the key that routes it. */
export type SendCommandCluster = (command: { key: string | undefined; isReadOnly: boolean; command: string[] }) => Promise<unknown>;

/** What the package accepts as a client: one of those above, or a Connection of your own. */
export type Client = object | SendCommand;

const strings = (args: readonly Arg[]): string[] => args.map(String);

function has<K extends string>(value: object, name: K): value is Record<K, Method> {
  return typeof (value as Record<string, unknown>)[name] === 'function';
}

export function fromSendCommand(send: SendCommand): Connection {
  // One connection is assumed (as `(...args) => client.sendCommand(args)` over a client).
  const one: Send = (args) => send(...strings(args));
  return { send: one, sendAndWait: together(one), cluster: false };
}

export function fromSendCommandCluster(send: SendCommandCluster): Connection {
  const routed = (args: readonly Arg[], keys: readonly string[], readonly = false) =>
    send({ key: keys[0], isReadOnly: readonly, command: strings(args) });
  return { send: routed, sendAndWait: sequential(routed), cluster: true };
}

/** The adapter for `client`, found by what it offers. */
export function connect(client: Client): Connection {
  if (typeof client === 'function') return fromSendCommand(client as SendCommand);
  if (has(client, 'send') && typeof (client as Partial<Connection>).cluster === 'boolean') return client as Connection;
  if (has(client, 'call') && has(client, 'defineCommand')) {
    const io = client as unknown as IoRedisClient;
    if (io.isCluster === true) return ioCluster(io);
    const one: Send = (args) => io.call(String(args[0]), ...args.slice(1));
    return { send: one, sendAndWait: together(one), cluster: false };
  }
  if (has(client, 'sendCommand')) {
    if ('masters' in client) {
      const cluster = client as unknown as NodeRedisCluster;
      const routed = (args: readonly Arg[], keys: readonly string[], readonly = false) => cluster.sendCommand(keys[0], readonly, strings(args));
      return { send: routed, sendAndWait: sequential(routed), cluster: true };
    }
    const single = client as unknown as NodeRedisClient;
    const one: Send = (args) => single.sendCommand(strings(args));
    // A pool spreads commands over its clients: the write and its WAIT go to one of them.
    const sendAndWait = has(client, 'execute')
      ? (args: readonly Arg[], keys: readonly string[], wait: readonly Arg[]) =>
          (client as unknown as NodeRedisPool).execute((lent) => together((a) => lent.sendCommand(strings(a)))(args, keys, wait))
      : together(one);
    return { send: one, sendAndWait, cluster: false };
  }
  throw new TypeError('not a Redis client: give a node-redis client or cluster, an ioredis or iovalkey client or Cluster, or a sendCommand function');
}

const REPLY_ERRORS = new Set(['ReplyError', 'ErrorReply', 'SimpleError', 'BlobError']);

/** Whether `error` is the server's answer (not a connection failure): by the client's error class,
 * else by the server's form, an upper-case code then its words (`ERR ...`, `WRONGTYPE ...`). */
export function isReplyError(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  return REPLY_ERRORS.has(error.name) || REPLY_ERRORS.has(error.constructor.name) || /^[A-Z][A-Z_-]+ /.test(error.message);
}
