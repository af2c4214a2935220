// The package's errors. Every refusal of bad input and every error the server answers a limiter
// command with is a RateLimitError, so one `instanceof` covers both; connection errors stay the
// client library's own (node-redis's, ioredis's), and are what the middlewares fail open on.

/** Bad input refused before a round trip (the message names the argument), or the server's own
 * error for the command, word for word (`ERR limit must be an integer >= 1`). Nothing was written. */
export class RateLimitError extends Error {
  override name = 'RateLimitError';
}

/** The server has neither the module nor the Functions library, and loading it was not allowed. */
export class LibraryNotLoaded extends RateLimitError {
  override name = 'LibraryNotLoaded';
}

/** A limiter waiting for replicas (`waitForReplicas`) made its write on the primary, which
 * answered `answer`, but only `acknowledged` of the `wanted` replicas confirmed it in time. The
 * write stands on the primary; a failover before the replicas catch up would lose it, and the limit
 * would admit that many calls again. Not a RateLimitError: something was written. */
export class NotReplicatedError extends Error {
  override name = 'NotReplicatedError';
  constructor(
    readonly answer: unknown,
    readonly acknowledged: number,
    readonly wanted: number,
  ) {
    super(`${String(acknowledged)} of ${String(wanted)} replicas acknowledged the write in time`);
  }
}

/** `withPermit` found every permit in use. `retryAfterMs`: until the earliest lease in use ends,
 * the soonest a permit frees itself. */
export class PermitUnavailable extends Error {
  override name = 'PermitUnavailable';
  constructor(
    readonly key: string,
    readonly limit: number,
    readonly retryAfterMs: number,
  ) {
    super(`all ${String(limit)} permits of ${JSON.stringify(key)} are in use; the earliest frees itself in ${String(retryAfterMs)} ms`);
  }
}
