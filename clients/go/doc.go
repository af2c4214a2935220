// Package ratelimit is the Go client of redis-ratelimit: atomic rate limiters run inside Redis or
// Valkey, by the ratelimit module where the server has it, else by its Functions library (loaded
// when missing). Every counter and permit it writes expires in the same atomic step.
//
// The package depends on no Redis client. An adapter brings one:
//
//   - rlgoredis: go-redis v9 (Client, ClusterClient, Ring, UniversalClient);
//   - rlrueidis: rueidis;
//   - rlvalkey: valkey-go.
//
// Each is a module of its own: a service downloads only the client it uses. On top: httplimit (a
// net/http middleware, in this module), redis_rate (a drop-in for go-redis/redis_rate v10) and
// ulule/redis (a store for ulule/limiter v3).
//
// Every call takes a context.Context first, durations as time.Duration, and returns errors that
// errors.Is and errors.As can test: ErrInvalidArgument (an *ArgumentError: refused before any
// round trip), *ServerError (the server's error reply), ErrLibraryNotLoaded.
package ratelimit
