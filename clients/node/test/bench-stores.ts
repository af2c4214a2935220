// `make bench`'s row for the express-rate-limit store: rate-limit-redis (the installed package,
// driven through its store) against this package's RedisStore (on the module; on the library
// too, informative), server CPU per request, on each server binary given.
//
// Each request is counted by the store's `increment`, against the server, and the commands the
// store sent for it are recorded; they are then sent again, on a clean keyspace, in pipelines of
// PIPELINE, as many application processes would load a server, and that replay's server CPU is
// the figure (one Node client waits a round trip per request, and the server's cost of waking for
// each would hide what the stores cost). 50 identities; repetitions interleave the contenders;
// medians. `--quick` is the smoke run `make test` makes so that this cannot rot.
//
//   node dist/bench-stores.js --out report.md [--quick] -- <server binary>...

import { readFileSync, writeFileSync } from 'node:fs';
import { RedisStore as RateLimitRedis } from 'rate-limit-redis';
import { createClient } from 'redis';
import { RedisStore } from 'redis-ratelimit';
import { Server, type Kind } from './servers.js';

const TARGET = 0.75; // the bound on this store's server CPU per request, as a multiple of rate-limit-redis's
const IDENTITIES = 50;
const PIPELINE = 50;
const WINDOW_MS = 60_000;

const argv = process.argv.slice(2);
const quick = argv.includes('--quick');
const out = argv[argv.indexOf('--out') + 1] ?? 'node.md';
const binaries = argv.slice(argv.indexOf('--') + 1);
const requests = quick ? 500 : 10_000;
const repetitions = quick ? 1 : 3;

type Raw = Awaited<ReturnType<typeof connect>>;
const connect = (port: number) => createClient({ socket: { host: '127.0.0.1', port } }).connect();

interface Store {
  init(options: { windowMs: number }): unknown;
  increment(key: string): Promise<unknown>;
}

type Make = (send: (...args: string[]) => Promise<unknown>) => Store;

const CONTENDERS: [string, Kind, Make][] = [
  ['rate-limit-redis', 'module', (sendCommand) => new RateLimitRedis({ sendCommand: sendCommand as never })],
  ['redis-ratelimit RedisStore (the module)', 'module', (sendCommand) => new RedisStore({ sendCommand })],
  ['redis-ratelimit RedisStore (the library)', 'library', (sendCommand) => new RedisStore({ sendCommand })],
];

async function serverCpuUs(raw: Raw): Promise<number> {
  const info = await raw.info('cpu');
  const field = (name: string) => Number(new RegExp(`${name}:([0-9.]+)`).exec(info)?.[1] ?? NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/** Server CPU µs per request: the recorded commands sent again, pipelined. */
async function measure(raw: Raw, make: Make): Promise<number> {
  await raw.flushAll();
  let recording: string[][] | null = null;
  const store = make(async (...args: string[]) => {
    recording?.push(args);
    return raw.sendCommand(args);
  });
  await store.init({ windowMs: WINDOW_MS });
  await store.increment('warm-up'); // scripts loaded, the backend found out: not counted
  recording = [];
  for (let i = 0; i < requests; i++) await store.increment(`id${String(i % IDENTITIES)}`);
  const sent = recording;
  recording = null;
  await raw.flushAll();
  const before = await serverCpuUs(raw);
  for (let i = 0; i < sent.length; i += PIPELINE) await Promise.all(sent.slice(i, i + PIPELINE).map((c) => raw.sendCommand(c)));
  return ((await serverCpuUs(raw)) - before) / requests;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
const version = (name: string) =>
  (JSON.parse(readFileSync(new URL(`../node_modules/${name}/package.json`, import.meta.url), 'utf8')) as { version: string }).version;

const rows: string[] = [];
const targets: string[] = [];
for (const binary of binaries) {
  process.env.REDIS_SERVER = binary;
  const servers = { module: await Server.start('module'), library: await Server.start('library') };
  const raws = { module: await connect(servers.module.port), library: await connect(servers.library.port) };
  try {
    const info = await raws.module.info('server');
    const valkey = /valkey_version:(\S+)/.exec(info)?.[1];
    const label = valkey === undefined ? `Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? binary}` : `Valkey ${valkey}`;
    const seen = CONTENDERS.map((): number[] => []);
    for (let r = 0; r < repetitions; r++) {
      for (const [i, [what, kind, make]] of CONTENDERS.entries()) {
        console.error(`bench: the Node stores, ${label}: row ${String(i + 1)}/${String(CONTENDERS.length)} ${what}, rep ${String(r + 1)}/${String(repetitions)}`);
        seen[i]?.push(await measure(raws[kind], make));
      }
    }
    const base = median(seen[0] ?? []);
    for (const [i, [what]] of CONTENDERS.entries()) {
      const us = median(seen[i] ?? []);
      rows.push(`| ${label} | ${what} | ${us.toFixed(2)} | ${(us / base).toFixed(2)} |`);
    }
    const ratio = median(seen[1] ?? []) / base;
    targets.push(`| ${label}: RedisStore (the module) <= ${String(TARGET)}x rate-limit-redis | ${ratio.toFixed(2)} | ${ratio <= TARGET ? 'yes' : 'no'} |`);
  } finally {
    await raws.module.close();
    await raws.library.close();
    await servers.module.stop();
    await servers.library.stop();
  }
}

const report = [
  '# The express-rate-limit store against rate-limit-redis',
  '',
  `Measured ${new Date().toISOString().slice(0, 10)} by \`make bench\` (clients/node/test/bench-stores.ts): rate-limit-redis ${version('rate-limit-redis')}, ` +
    `node-redis ${version('redis')}; ${String(requests)} requests a run through each store's \`increment\` (a ${String(WINDOW_MS / 1000)} s window, ` +
    `${String(IDENTITIES)} identities), their commands recorded and sent again in pipelines of ${String(PIPELINE)}, ${String(repetitions)} repetitions ` +
    'interleaved, medians. Server CPU is INFO\'s used_cpu_user + used_cpu_sys.',
  '',
  '| server | store | server CPU µs/request | × rate-limit-redis |',
  '| --- | --- | ---: | ---: |',
  ...rows,
  '',
  '## Targets',
  '',
  '| target | measured | met |',
  '| --- | ---: | :---: |',
  ...targets,
  '',
].join('\n');
writeFileSync(out, report);
console.log(quick ? `node store bench smoke run passed; report in ${out}` : report);
