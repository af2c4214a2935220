// What an LLM provider's answer says about its limits, read from its status and headers with no
// I/O: OpenAI's (and Azure OpenAI's) `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, the
// resets Go durations (`6m0s`); Anthropic's `anthropic-ratelimit-{requests,tokens}-*`, the resets
// RFC 3339 instants; and the wait: `retry-after-ms`, then `retry-after` in seconds or as an HTTP
// date. A figure that does not parse is left out, never guessed; a wait of 0 or less (Azure has
// sent -1) is none. testkit/conformance/provider_answers.json holds every client to the same
// readings.

/** The answers that say the provider is over its limit (or shedding load). */
export const THROTTLED_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/** One measure's figures as the provider stated them (null: not stated). */
export interface Stated {
  readonly limit: number | null;
  readonly remaining: number | null;
  /** Until the provider's window resets. */
  readonly resetAfterMs: number | null;
}

export interface ProviderAnswer {
  /** A 429 or a 503. */
  readonly throttled: boolean;
  /** How long the provider asks callers to wait; null when it asks nothing. */
  readonly retryAfterMs: number | null;
  readonly requests: Stated;
  readonly tokens: Stated;
}

/** Headers as a fetch `Headers`, a Node `IncomingHttpHeaders`, a plain record or pairs. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined> | Iterable<[string, string]>;

const GO_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const GO_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
const WHOLE = /^\d+$/;

/** A Go duration (`1s`, `6m0s`, `12ms`, `1h2m3.5s`, `0`) in ms; null if not one. */
export function goDuration(text: string): number | null {
  const trimmed = text.trim();
  if (['0', '+0', '-0'].includes(trimmed)) return 0;
  const body = trimmed.startsWith('+') ? trimmed.slice(1) : trimmed;
  if (body === '' || body.startsWith('-')) return null;
  let total = 0;
  GO_PART.lastIndex = 0;
  while (GO_PART.lastIndex < body.length) {
    const part = GO_PART.exec(body);
    if (part === null) return null;
    total += Number(part[1]) * (GO_UNITS[part[2] ?? ''] ?? NaN);
  }
  return total;
}

function lowerCased(headers: HeadersLike): Map<string, string> {
  const found = new Map<string, string>();
  const pairs: Iterable<[string, unknown]> =
    typeof Headers !== 'undefined' && headers instanceof Headers
      ? headers.entries()
      : Symbol.iterator in headers
        ? (headers as Iterable<[string, string]>)
        : Object.entries(headers);
  for (const [name, value] of pairs) {
    const first: unknown = Array.isArray(value) ? value[0] : value;
    if (typeof first === 'string' || typeof first === 'number') found.set(name.toLowerCase(), String(first));
  }
  return found;
}

function count(text: string | undefined): number | null {
  return text !== undefined && WHOLE.test(text.trim()) ? Number(text.trim()) : null;
}

/** Ms from `nowMs` to an RFC 3339 instant (0 if past); null if not one. */
function instantAfter(text: string, nowMs: number): number | null {
  const trimmed = text.trim();
  if (!/^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/.test(trimmed)) return null;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(at - nowMs, 0);
}

function wait(headers: Map<string, string>, nowMs: number): number | null {
  const ms = headers.get('retry-after-ms');
  if (ms !== undefined && ms.trim() !== '' && Number.isFinite(Number(ms))) {
    const value = Number(ms);
    return value > 0 ? value : null;
  }
  const text = headers.get('retry-after')?.trim();
  if (text === undefined) return null;
  if (WHOLE.test(text) || /^\d*\.\d+$/.test(text)) {
    const seconds = Number(text);
    return seconds > 0 ? seconds * 1000 : null;
  }
  const at = Date.parse(text);
  if (Number.isNaN(at) || !/GMT|UTC|[+-]\d{4}$/.test(text)) return null;
  return at - nowMs > 0 ? at - nowMs : null;
}

const NOTHING: Stated = { limit: null, remaining: null, resetAfterMs: null };

function stated(headers: Map<string, string>, measure: 'requests' | 'tokens', nowMs: number): Stated {
  const openai = (['limit', 'remaining', 'reset'] as const).map((field) => headers.get(`x-ratelimit-${field}-${measure}`));
  if (openai.some((v) => v !== undefined)) {
    const [limit, remaining, reset] = openai;
    return { limit: count(limit), remaining: count(remaining), resetAfterMs: reset === undefined ? null : goDuration(reset) };
  }
  for (const name of measure === 'requests' ? ['requests'] : ['tokens', 'input-tokens']) {
    const anthropic = (['limit', 'remaining', 'reset'] as const).map((field) => headers.get(`anthropic-ratelimit-${name}-${field}`));
    if (anthropic.some((v) => v !== undefined)) {
      const [limit, remaining, reset] = anthropic;
      return { limit: count(limit), remaining: count(remaining), resetAfterMs: reset === undefined ? null : instantAfter(reset, nowMs) };
    }
  }
  return NOTHING;
}

/** The provider's answer: `status` its HTTP status (null: no answer, as a timeout), the headers in
 * any case. `nowMs` dates Anthropic's resets and an HTTP-date Retry-After (default: the clock). */
export function readAnswer(status: number | null, headers: HeadersLike = {}, nowMs: number = Date.now()): ProviderAnswer {
  const lower = lowerCased(headers);
  return {
    throttled: status !== null && THROTTLED_STATUSES.has(status),
    retryAfterMs: wait(lower, nowMs),
    requests: stated(lower, 'requests', nowMs),
    tokens: stated(lower, 'tokens', nowMs),
  };
}
