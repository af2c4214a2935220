export { RateLimiter, type Backend, type HeldPermit, type HotLimitOptions, type Permit, type PermitOptions, type RateLimiterOptions, type Settling } from './client.js';
export * as commands from './commands.js';
export type {
  AcquireOptions,
  AdaptOptions,
  Call,
  GcraOptions,
  HitAllOptions,
  KeyedLimit,
  CalendarUnit,
  FixedWindow,
  FixedWindowOptions,
  PeekOptions,
  Outcome,
  RefundOptions,
  ReportOptions,
  ReserveAllOptions,
  ReserveGcraOptions,
  ReserveHitOptions,
  ReserveWindowOptions,
  SlideOptions,
  TopOptions,
  WindowOptions,
} from './commands.js';
export type { Client, Connection, SendCommand, SendCommandCluster } from './adapters.js';
export { fastifyStore, RedisStore, type ClientRateLimitInfo, type FastifyStoreOptions, type RedisStoreOptions } from './stores.js';
export { LibraryNotLoaded, NotReplicatedError, PermitUnavailable, RateLimitError } from './errors.js';
export { HotLimit, HotLimitClosed, HotState, type Block, type HotOptions, type HotTransport, type Step } from './hot.js';
export { LIBRARY_SOURCE } from './library.js';
export { Acquisition, combinedHeaders, Decision, Grant, MultiDecision, MultiReservation, Reservation, type Learned, type Settlement, type TopEntry } from './results.js';
export { AdaptiveLimit, answerOf, RateLimitedError, type AdaptiveLimitOptions } from './adaptive.js';
export { goDuration, readAnswer, THROTTLED_STATUSES, type HeadersLike, type ProviderAnswer, type Stated } from './provider-answers.js';
export { rateLimitMiddleware, rateLimitPlugin } from './middlewares.js';
export { clientAddress, header, Rules, type KeyFunction, type LimitedRequest, type Limiter, type MiddlewareOptions, type Rule, type Verdict } from './rules.js';
export { adaptiveLimitMiddleware, type AdaptiveBounds, type AdaptiveLimitMiddlewareOptions } from './ai-sdk-adaptive.js';
export { LimitExceededError, tokenLimitMiddleware, type ModelCall, type ModelLimit, type TokenLimitMiddleware, type TokenLimitOptions } from './ai-sdk.js';
