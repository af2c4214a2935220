// The middlewares, for Express (rateLimitMiddleware) and Fastify (rateLimitPlugin), over the rules
// of rules.ts: a denied request gets 429 with Retry-After, every limited response carries the
// RateLimit-Policy and RateLimit fields, and a request's permits (inFlight) are held until its
// response has been sent or cut short, streamed responses included, renewed meanwhile. Neither
// framework is a dependency: only the parts of their request and response used here are typed.

import type { IncomingMessage, ServerResponse } from 'node:http';
import { onResponseEnd, pathOf, Rules, type MiddlewareOptions, type Verdict } from './rules.js';

const BODIES = {
  429: 'Too Many Requests\n',
  503: 'Service Unavailable: the rate limiter cannot be reached\n',
} as const;

/** What the Express middleware reads of a request (`ip` as Express's trust-proxy setting says). */
type ExpressRequest = IncomingMessage & { ip?: string | undefined; path?: string };

/** Express's middleware: `app.use(rateLimitMiddleware({ client, rules }))`. An error of a rule other
 * than the server unreachable (a WRONGTYPE key, say) goes to `next(error)`. */
export function rateLimitMiddleware(options: MiddlewareOptions) {
  const rules = new Rules(options);
  return function rateLimit(request: ExpressRequest, response: ServerResponse, next: (error?: unknown) => void): void {
    rules
      .decide({ method: request.method ?? 'GET', path: request.path ?? pathOf(request), headers: request.headers, ip: request.ip ?? request.socket.remoteAddress })
      .then(
        (verdict) => {
          for (const [name, value] of Object.entries(verdict.headers)) response.setHeader(name, value);
          if (verdict.status !== 200) {
            response.statusCode = verdict.status;
            response.setHeader('Content-Type', 'text/plain; charset=utf-8');
            response.end(BODIES[verdict.status]);
            return;
          }
          onResponseEnd(response, verdict.release);
          next();
        },
        (error: unknown) => {
          next(error);
        },
      );
  };
}

/** What the Fastify plugin uses of Fastify's request, reply and instance. */
interface FastifyRequest {
  readonly method: string;
  readonly ip: string;
  readonly raw: IncomingMessage;
  readonly headers: IncomingMessage['headers'];
}
interface FastifyReply {
  readonly raw: ServerResponse;
  headers(values: Record<string, string>): FastifyReply;
  code(status: number): FastifyReply;
  type(contentType: string): FastifyReply;
  send(body: string): FastifyReply;
}
interface FastifyInstance {
  addHook(name: 'onRequest', hook: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>): unknown;
}

async function limit(rules: Rules, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const verdict: Verdict = await rules.decide({ method: request.method, path: pathOf(request.raw), headers: request.headers, ip: request.ip });
  reply.headers(verdict.headers);
  if (verdict.status !== 200) return reply.code(verdict.status).type('text/plain; charset=utf-8').send(BODIES[verdict.status]);
  onResponseEnd(reply.raw, verdict.release);
  return undefined;
}

/** Fastify's plugin: `await app.register(rateLimitPlugin, { client, rules })`. It applies to every
 * route of the instance it is registered on (and its children), as an onRequest hook. */
export const rateLimitPlugin = Object.assign(
  async function rateLimitPlugin(instance: FastifyInstance, options: MiddlewareOptions): Promise<void> {
    const rules = new Rules(options);
    instance.addHook('onRequest', (request, reply) => limit(rules, request, reply));
    return Promise.resolve();
  },
  // As fastify-plugin marks a plugin: its hook reaches the routes of the instance that registers it.
  { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'redis-ratelimit' },
);
