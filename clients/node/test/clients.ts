// Every Redis client the package supports, connected to a test server, and how to close it.

import { Redis as IoRedis } from 'ioredis';
import { Redis as IoValkey } from 'iovalkey';
import { createClient } from 'redis';
import { createClient as createClient4 } from 'redis4';
import { createClient as createClient5 } from 'redis5';

export interface Connected {
  readonly client: object;
  close(): Promise<void>;
}

export const CLIENTS: Record<string, (port: number) => Promise<Connected>> = {
  'node-redis 6 (RESP2)': async (port) => {
    const client = await createClient({ socket: { host: '127.0.0.1', port }, RESP: 2 }).connect();
    return { client, close: async () => void (await client.close()) };
  },
  'node-redis 6 (RESP3)': async (port) => {
    const client = await createClient({ socket: { host: '127.0.0.1', port }, RESP: 3 }).connect();
    return { client, close: async () => void (await client.close()) };
  },
  'node-redis 5': async (port) => {
    const client = await createClient5({ socket: { host: '127.0.0.1', port } }).connect();
    return { client, close: async () => void (await client.quit()) };
  },
  'node-redis 4': async (port) => {
    const client = createClient4({ socket: { host: '127.0.0.1', port } });
    await client.connect();
    return { client, close: async () => void (await client.quit()) };
  },
  'ioredis 5': async (port) => {
    const client = new IoRedis(port, '127.0.0.1');
    return { client, close: async () => void (await client.quit()) };
  },
  iovalkey: async (port) => {
    const client = new IoValkey(port, '127.0.0.1');
    return { client, close: async () => void (await client.quit()) };
  },
  'a sendCommand function (node-redis)': async (port) => {
    const client = await createClient({ socket: { host: '127.0.0.1', port } }).connect();
    const send = (...args: string[]) => client.sendCommand(args);
    return { client: send, close: async () => void (await client.close()) };
  },
};
