// The Redis clients the package talks through, each behind one small adapter: node-redis 4 to 6
// (a client, a pool or a cluster), ioredis 5 and iovalkey (a client or a Cluster), and a bare
// `sendCommand` function as rate-limit-redis takes it. None is a dependency: an adapter only calls
// the client it was given.

import type { Arg } from './commands.js';
import { slotOf } from './slot.js';

/** One command to one server, routed by its keys in a cluster (a keyless one goes to any node). */
export interface Connection {
  send(args: readonly Arg[], keys: readonly string[], readonly: boolean): Promise<unknown>;
  /** Keys must share a slot (and are checked to before sending). */
  readonly cluster: boolean;
}

type Send = (...args: never[]) => Promise<unknown>;

/** node-redis: `createClient()`, `createClientPool()`, `createCluster()` (4.x to 6.x). */
interface NodeRedisClient {
  sendCommand(args: string[]): Promise<unknown>;
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

/** A Cluster's primary for `key`, by the slots it last read; undefined when it knows none. */
function ioPrimary(cluster: IoRedisClient, key: string): IoRedisClient | undefined {
  const address = cluster.slots?.[slotOf(key)]?.[0];
  return address === undefined ? undefined : cluster.nodes?.('master').find((n) => `${n.options.host ?? ''}:${String(n.options.port)}` === address);
}

/** ioredis's Cluster routes a command by its keys only where its command table knows them: the
 * module's commands are not there, nor FCALL in iovalkey's. So a keyed command goes to its key's
 * primary here, and through the Cluster (which follows MOVED and ASK) when that node no longer
 * holds the slot, or none is known yet. */
function ioCluster(cluster: IoRedisClient): Connection {
  return {
    cluster: true,
    send: async (args, keys) => {
      const [command = '', ...rest] = args.map(String);
      const node = keys[0] === undefined ? undefined : ioPrimary(cluster, keys[0]);
      if (node !== undefined) {
        try {
          return await node.call(command, ...rest);
        } catch (error) {
          if (!(error instanceof Error) || !/^(MOVED|ASK) /.test(error.message)) throw error;
        }
      }
      return cluster.call(command, ...rest);
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

function has<K extends string>(value: object, name: K): value is Record<K, Send> {
  return typeof (value as Record<string, unknown>)[name] === 'function';
}

export function fromSendCommand(send: SendCommand): Connection {
  return { send: (args) => send(...strings(args)), cluster: false };
}

export function fromSendCommandCluster(send: SendCommandCluster): Connection {
  return { send: (args, keys, readonly) => send({ key: keys[0], isReadOnly: readonly, command: strings(args) }), cluster: true };
}

/** The adapter for `client`, found by what it offers. */
export function connect(client: Client): Connection {
  if (typeof client === 'function') return fromSendCommand(client as SendCommand);
  if (has(client, 'send') && typeof (client as Partial<Connection>).cluster === 'boolean') return client as Connection;
  if (has(client, 'call') && has(client, 'defineCommand')) {
    const io = client as unknown as IoRedisClient;
    if (io.isCluster === true) return ioCluster(io);
    return { send: (args) => io.call(String(args[0]), ...args.slice(1)), cluster: false };
  }
  if (has(client, 'sendCommand')) {
    if ('masters' in client) {
      const cluster = client as unknown as NodeRedisCluster;
      return { send: (args, keys, readonly) => cluster.sendCommand(keys[0], readonly, strings(args)), cluster: true };
    }
    const single = client as unknown as NodeRedisClient;
    return { send: (args) => single.sendCommand(strings(args)), cluster: false };
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
