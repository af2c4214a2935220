// Real HTTP servers for the middleware and store tests: an app listening on a free loopback port,
// requests sent with fetch, and the server closed with every connection it holds.

import { once } from 'node:events';
import type { AddressInfo, Server as NetServer } from 'node:net';

export interface Listening {
  url: string;
  close(): Promise<void>;
}

export async function listen(server: NetServer & { closeAllConnections?: () => void }): Promise<Listening> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    close: async () => {
      server.closeAllConnections?.();
      server.close();
      await once(server, 'close');
    },
  };
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: string }> {
  const response = await fetch(url, { headers });
  return { status: response.status, headers: response.headers, body: await response.text() };
}

/** The statuses of `count` requests sent one after another. */
export async function statuses(url: string, count: number, headers: Record<string, string> = {}): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) seen.push((await get(url, headers)).status);
  return seen;
}
