// The AI SDK (`ai` on npm): a language-model middleware for `wrapLanguageModel` that holds request
// and token limits with reserve-then-settle. Before the model runs, one HITALL decides every limit
// (requests count 1, tokens the call's estimate) and reserves the token limits; when the model is
// done, one SETTLE gives each token limit what was really used. The package does not depend on
// `ai`: the middleware is a plain object of the shape AI SDK 5 to 7 take.

import { isReplyError, type Client } from './adapters.js';
import { RateLimiter } from './client.js';
import type { CalendarUnit, KeyedLimit } from './commands.js';
import { RateLimitError } from './errors.js';
import { combinedHeaders, type MultiDecision, type MultiReservation } from './results.js';

/** One limit on a model's calls: requests (each call counts 1) or tokens (its estimate, then what
 * the model reports it used). The window is `windowMs` or a calendar unit (in `tz`). */
export type ModelLimit = { counts: 'requests' | 'tokens'; limit: number; name?: string } & (
  | { windowMs: number; calendar?: undefined }
  | { calendar: CalendarUnit; windowMs?: undefined }
);

/** The call as a middleware sees it (the fields read here, in every AI SDK version's shape). */
export interface ModelCall {
  readonly prompt?: unknown;
  readonly maxOutputTokens?: number;
  readonly providerOptions?: Record<string, unknown>;
}

export interface TokenLimitOptions {
  /** A node-redis or ioredis client, a cluster, a `sendCommand` function, or a RateLimiter. */
  client: Client | RateLimiter;
  limits: readonly ModelLimit[];
  /** Whose limits: a name, or one per call (a user, a team); default 'all'. */
  key?: string | ((call: ModelCall) => string);
  /** Before every key name (default 'rl:ai:'). */
  prefix?: string;
  /** The tokens a call may use, counted before it runs: by default the prompt's text at 4
   * characters a token, plus its `maxOutputTokens` (or `defaultMaxTokens`). */
  estimate?: (call: ModelCall) => number;
  /** The output a call without `maxOutputTokens` is expected to stay within (default 4096). */
  defaultMaxTokens?: number;
  /** The calendar windows' time zone (default UTC). */
  tz?: string;
  /** When the server cannot be reached: let calls through (default) or refuse them. Either way
   * the failure goes to `onError`. */
  failOpen?: boolean;
  /** Told of server failures, and of a settle that failed (default: console.warn). */
  onError?: (error: unknown) => void;
}

/** A call refused by a limit: nothing was counted. `retryAfterMs` is when every limit that said no
 * admits it again; `headers` are the RateLimit fields (`RateLimit` names the limit that refused)
 * and `Retry-After`. `statusCode` is 429, or 400 for a call that can never fit (its estimate above
 * a whole window's limit: `retryAfterMs` Infinity, and no `Retry-After` to invite a retry). */
export class LimitExceededError extends Error {
  override name = 'LimitExceededError';
  readonly statusCode: 400 | 429;
  constructor(
    readonly decision: MultiDecision,
    readonly retryAfterMs: number,
    readonly headers: Record<string, string>,
    refusedBy: readonly string[] = [],
  ) {
    const by = refusedBy.join(', ');
    super(
      Number.isFinite(retryAfterMs)
        ? `rate limited${by ? ` by ${by}` : ''}: retry in ${String(retryAfterMs)} ms`
        : `the call can never fit${by ? ` ${by}` : ''}: its estimate is above the limit of a whole window`,
    );
    this.statusCode = Number.isFinite(retryAfterMs) ? 429 : 400;
  }
}

/** What the middleware gives `wrapLanguageModel`: generic, so that it takes any AI SDK version's
 * results and hands them back as they were. */
export interface TokenLimitMiddleware {
  wrapGenerate<R extends Generated>(options: { doGenerate: () => PromiseLike<R>; params: ModelCall }): Promise<R>;
  wrapStream<P extends StreamPart, S extends Streamed<P>>(options: { doStream: () => PromiseLike<S>; params: ModelCall }): Promise<S>;
}

interface Generated {
  readonly usage?: unknown;
}

interface Streamed<P> {
  readonly stream: ReadableStream<P>;
}

interface StreamPart {
  readonly type: string;
  readonly usage?: unknown;
  readonly delta?: unknown;
  readonly textDelta?: unknown;
}

const CHARACTERS_PER_TOKEN = 4;

/** Request and token limits on a model: `wrapLanguageModel({ model, middleware:
 * tokenLimitMiddleware({ client, limits: [...] }) })`. A denied call throws LimitExceededError
 * before the model runs; an admitted one is settled with the usage the model reports (a stream's
 * at its finish part, or what was streamed when the reader stopped early), or 0 if the model
 * failed. */
export function tokenLimitMiddleware(options: TokenLimitOptions): TokenLimitMiddleware {
  const rl = options.client instanceof RateLimiter ? options.client : new RateLimiter(options.client);
  const { prefix = 'rl:ai:', tz, failOpen = true, defaultMaxTokens = 4096 } = options;
  const onError =
    options.onError ??
    ((error: unknown) => {
      console.warn('redis-ratelimit: token limit', error);
    });
  // The request limits first and the token limits last, as HITALL's TOKENS counts them.
  const ordered = [...options.limits.filter((l) => l.counts === 'requests'), ...options.limits.filter((l) => l.counts === 'tokens')];
  if (ordered.length === 0) throw new RateLimitError('tokenLimitMiddleware needs one or more limits');
  const tokenKeys = ordered.filter((l) => l.counts === 'tokens').length;
  const names = ordered.map((l) => l.name ?? `${l.counts}:${l.calendar ?? String(l.windowMs)}`);
  const estimate = options.estimate ?? ((call: ModelCall) => estimateTokens(call, defaultMaxTokens));

  /** The call decided on every limit: its reservation (null without token limits), or null when
   * the server failed and calls go through. */
  const reserve = async (call: ModelCall): Promise<MultiReservation | null> => {
    const who = typeof options.key === 'function' ? options.key(call) : (options.key ?? 'all');
    // One hash tag: a call's keys share a slot in a cluster.
    const limits: KeyedLimit[] = ordered.map((l, i) => {
      const key = `${prefix}{${who}}:${names[i] ?? ''}`;
      return l.calendar === undefined ? { key, limit: l.limit, windowMs: l.windowMs } : { key, limit: l.limit, calendar: l.calendar };
    });
    const tokens = Math.max(1, Math.ceil(estimate(call)));
    let decided: MultiReservation | MultiDecision;
    try {
      const zone = tz === undefined ? {} : { tz };
      decided = tokenKeys === 0 ? await rl.hitAll(limits, zone) : await rl.reserveAll(limits, { tokens, tokenKeys, ...zone });
    } catch (error) {
      if (isReplyError(error) || error instanceof RateLimitError || !failOpen) throw error;
      onError(error);
      return null;
    }
    const decision = 'decisions' in decided ? decided : decided.decision;
    if (!decision.allowed) {
      const retry = decision.retryAfterMs ?? 0;
      const named = names.map((n, i) => [n, decision.decisions[i] ?? decision.tightest] as const);
      const refusedBy = named.filter(([, d]) => !d.allowed).map(([n]) => n);
      throw new LimitExceededError(decision, retry, combinedHeaders(named, retry), refusedBy);
    }
    return 'decisions' in decided ? null : decided;
  };

  /** The call decided, then the model run: its result, and how to settle (once, never over the
   * model's own outcome); a model that throws is settled at 0. */
  const admitted: Admit = async <T>(call: ModelCall, run: () => PromiseLike<T>): Promise<[T, (used: number) => Promise<void>]> => {
    const held = await reserve(call);
    let done = false;
    const settle = async (used: number) => {
      const token = held?.token;
      if (done || held === null || typeof token !== 'string') return;
      done = true;
      await rl.settle(held.keys, token, Math.max(0, Math.round(used))).catch(onError);
    };
    try {
      return [await run(), settle];
    } catch (error) {
      await settle(0);
      throw error;
    }
  };

  return settlingMiddleware(admitted, estimate);
}

/** How a middleware runs a model call: decided first, then run; its result, and how to settle
 * the call's tokens with what it used (once; later calls are ignored). */
export type Admit = <T>(call: ModelCall, run: () => PromiseLike<T>) => Promise<[T, (used: number) => Promise<void>]>;

/** A middleware around `admitted`: a generation settled with the usage the model reports (else
 * `estimate`), a stream counted as it is read (`countedStream`). */
export function settlingMiddleware(admitted: Admit, estimate: (call: ModelCall) => number): TokenLimitMiddleware {
  return {
    async wrapGenerate<R extends Generated>({ doGenerate, params }: { doGenerate: () => PromiseLike<R>; params: ModelCall }) {
      const [result, settle] = await admitted(params, doGenerate);
      await settle(usedTokens(result.usage) ?? estimate(params));
      return result;
    },
    async wrapStream<P extends StreamPart, S extends Streamed<P>>({ doStream, params }: { doStream: () => PromiseLike<S>; params: ModelCall }) {
      const [result, settle] = await admitted(params, doStream);
      return countedStream(result, params, settle);
    },
  };
}

/** A model's stream result as it was, its stream read through and counted: `settle` (called
 * once is enough; later calls are the caller's to ignore) gets the usage of its finish part, or
 * what was streamed (the prompt, and the text at 4 characters a token) when it ends, fails or is
 * cancelled without one. */
function countedStream<P extends StreamPart, S extends Streamed<P>>(result: S, params: ModelCall, settle: (used: number) => Promise<void>): S {
  const input = promptTokens(params.prompt);
  let characters = 0;
  const streamed = () => input + Math.ceil(characters / CHARACTERS_PER_TOKEN);
  const reader = result.stream.getReader();
  const stream = new ReadableStream<P>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        await settle(streamed());
        throw error;
      }
      if (next.done) {
        await settle(streamed());
        controller.close();
        return;
      }
      const part = next.value;
      const text = part.type === 'text-delta' ? (part.delta ?? part.textDelta) : undefined;
      if (typeof text === 'string') characters += text.length;
      if (part.type === 'finish') await settle(usedTokens(part.usage) ?? streamed());
      controller.enqueue(part);
    },
    async cancel(reason) {
      await settle(streamed());
      await reader.cancel(reason);
    },
  });
  return Object.assign({}, result, { stream });
}

/** The tokens a usage reports: AI SDK 6 and 7's `{ inputTokens: { total }, outputTokens: { total } }`,
 * or 5's numbers; undefined when it reports none. */
function usedTokens(usage: unknown): number | undefined {
  if (typeof usage !== 'object' || usage === null) return undefined;
  const { inputTokens, outputTokens, totalTokens } = usage as Record<string, unknown>;
  if (typeof totalTokens === 'number') return totalTokens;
  const count = (n: unknown) => (typeof n === 'number' ? n : typeof n === 'object' && n !== null ? (n as { total?: unknown }).total : undefined);
  const [input, output] = [count(inputTokens), count(outputTokens)];
  if (typeof input !== 'number' && typeof output !== 'number') return undefined;
  return (typeof input === 'number' ? input : 0) + (typeof output === 'number' ? output : 0);
}

/** A call's tokens before it runs: its prompt's, plus its `maxOutputTokens` (or `defaultMaxTokens`). */
export function estimateTokens(call: ModelCall, defaultMaxTokens: number): number {
  return promptTokens(call.prompt) + (call.maxOutputTokens ?? defaultMaxTokens);
}

/** A prompt's text in tokens, at 4 characters a token: every string in its messages. */
function promptTokens(prompt: unknown): number {
  let characters = 0;
  const walk = (value: unknown, depth: number): void => {
    if (typeof value === 'string') characters += value.length;
    else if (Array.isArray(value) && depth < 8) for (const v of value) walk(v, depth + 1);
    else if (typeof value === 'object' && value !== null && depth < 8) {
      const { text, content } = value as { text?: unknown; content?: unknown };
      walk(text, depth + 1);
      walk(content, depth + 1);
    }
  };
  walk(prompt, 0);
  return Math.ceil(characters / CHARACTERS_PER_TOKEN);
}
