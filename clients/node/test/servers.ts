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

/** The process id of the server answering on the port, from `INFO server`; null if none answers. */
async function answeringPid(port: number): Promise<number | null> {
  return new Promise((resolve) => {
    let seen = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.write('*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n'));
    socket.setTimeout(1_000, () => socket.destroy());
    socket.on('data', (data) => {
      seen += data.toString();
      const found = /process_id:(\d+)\r\n/.exec(seen);
      if (found) {
        socket.end();
        resolve(Number(found[1]));
      }
    });
    socket.on('error', () => resolve(null));
    socket.on('close', () => resolve(null));
  });
}

/** Our server's process exited before it answered: on a port another test's server took first. */
class ServerExited extends Error {}

export class Server {
  process: ChildProcess | null = null;
  readonly dir = mkdtempSync(join(tmpdir(), 'ratelimit-node-'));

  constructor(
    readonly kind: Kind,
    readonly port: number,
    /** A one-node Redis Cluster, holding every slot. */
    readonly cluster = false,
    /** The port of the primary this server replicates. */
    readonly replicaOf: number | null = null,
  ) {}

  static async start(kind: Kind, options: { cluster?: boolean; replicaOf?: Server } = {}): Promise<Server> {
    // A port found free can be taken by another test's server before ours binds it: another port.
    for (let attempt = 1; ; attempt++) {
      const server = new Server(kind, await freePort(), options.cluster ?? false, options.replicaOf?.port ?? null);
      try {
        await server.up();
        return server;
      } catch (error) {
        await server.stop();
        if (!(error instanceof ServerExited) || attempt === 5) throw error;
      }
    }
  }

  /** Starts the server (again, on the same port, after `down`). */
  async up(): Promise<void> {
    const binary = process.env.REDIS_SERVER ?? 'redis-server';
    const module = process.env.RATELIMIT_MODULE;
    if (this.kind === 'module' && module === undefined) throw new Error('RATELIMIT_MODULE names the module to load');
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
    // A replica's first sync at once, not in 5 s.
    args.push('--repl-diskless-sync-delay', '0');
    if (this.replicaOf !== null) args.push('--replicaof', '127.0.0.1', String(this.replicaOf));
    if (this.kind === 'module') args.push('--loadmodule', module ?? '');
    if (this.cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, 'nodes.conf'), '--cluster-announce-ip', '127.0.0.1');
    this.process = spawn(binary, args, { stdio: 'ignore' });
    for (let i = 0; i < 400; i++) {
      if (this.process.exitCode !== null) throw new ServerExited(`${binary} exited with ${String(this.process.exitCode)}`);
      // Ours, not another test's server on the same port until ours exits.
      if ((await answeringPid(this.port)) === this.process.pid) return;
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
