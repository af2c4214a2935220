export { RateLimiter, type Backend, type Permit, type PermitOptions, type RateLimiterOptions } from './client.js';
export * as commands from './commands.js';
export type {
  AcquireOptions,
  Call,
  GcraOptions,
  HitAllOptions,
  KeyedLimit,
  PeekOptions,
  RefundOptions,
  ReserveGcraOptions,
  ReserveWindowOptions,
  SlideOptions,
  TopOptions,
  WindowOptions,
} from './commands.js';
export type { Client, SendCommand, SendCommandCluster } from './adapters.js';
export { LibraryNotLoaded, PermitUnavailable, RateLimitError } from './errors.js';
export { LIBRARY_SOURCE } from './library.js';
export { Acquisition, combinedHeaders, Decision, MultiDecision, Reservation, type Settlement, type TopEntry } from './results.js';
