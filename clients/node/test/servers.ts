// Real servers for the tests: a redis-server (or valkey-server) on a free loopback port, with the
// module loaded or without it (the client then answers through the Functions library).
// REDIS_SERVER and RATELIMIT_MODULE name the server binary and the module (make node-test sets them).

import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export type Kind = 'module' | 'library';
export const KINDS: Kind[] = ['module', 'library'];

export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

async function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.end();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

export class Server {
  process: ChildProcess | null = null;
  readonly dir = mkdtempSync(join(tmpdir(), 'ratelimit-node-'));

  constructor(
    readonly kind: Kind,
    readonly port: number,
    /** A one-node Redis Cluster, holding every slot. */
    readonly cluster = false,
  ) {}

  static async start(kind: Kind, options: { cluster?: boolean } = {}): Promise<Server> {
    const server = new Server(kind, await freePort(), options.cluster ?? false);
    await server.up();
    return server;
  }

  /** Starts the server (again, on the same port, after `down`). */
  async up(): Promise<void> {
    const binary = process.env.REDIS_SERVER ?? 'redis-server';
    const module = process.env.RATELIMIT_MODULE;
    if (this.kind === 'module' && module === undefined) throw new Error('RATELIMIT_MODULE names the module to load');
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
    if (this.kind === 'module') args.push('--loadmodule', module ?? '');
    if (this.cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1');
    this.process = spawn(binary, args, { stdio: 'ignore' });
    for (let i = 0; i < 400; i++) {
      if (this.process.exitCode !== null) throw new Error(`${binary} exited with ${String(this.process.exitCode)}`);
      if (await accepting(this.port)) return;
      await sleep(25);
    }
    throw new Error(`${binary} does not listen on ${String(this.port)}`);
  }

  /** Stops the server and waits until it has exited. */
  async down(): Promise<void> {
    const child = this.process;
    this.process = null;
    if (child === null || child.exitCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.down();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
