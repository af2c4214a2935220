// Package redis_rate is go-redis/redis_rate v10's API on redis-ratelimit's RATELIMIT.GCRA:
// changing the import path from github.com/go-redis/redis_rate/v10 to this package is the whole
// switch. Limit, PerSecond, PerMinute, PerHour, NewLimiter, Allow, AllowN, AllowAtMost, Reset and
// Result keep their names, fields and meanings; a differential test holds them to redis_rate's
// own answers on the same server and clock.
//
// What differs:
//   - keys are KeyPrefix+key, not "rate:"+key (redis_rate stores a float of seconds since 2017,
//     RATELIMIT.GCRA integer nanoseconds since 1970): on the switch each key starts with a full
//     bucket, and redis_rate's keys expire by themselves within Burst/Rate periods;
//   - a Limit with Rate, Burst or Period below 1 and AllowN with n of 0 are refused with an error
//     (errors.Is(err, ratelimit.ErrInvalidArgument)) before any round trip: redis_rate divides by
//     zero, denies everything, or reads without taking;
//   - a negative n gives back: the bucket is refilled by n tokens, never past full (redis_rate
//     drops a give-back that would pass full).
package redis_rate

import (
	"context"
	"fmt"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	"github.com/redis/go-redis/v9"
)

// KeyPrefix goes before every key.
const KeyPrefix = "ratelimit:rate:"

// Limit is Rate events per Period, in bursts of up to Burst.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero reports whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate per second, in bursts of rate.
func PerSecond(rate int) Limit { return Limit{Rate: rate, Period: time.Second, Burst: rate} }

// PerMinute is rate per minute, in bursts of rate.
func PerMinute(rate int) Limit { return Limit{Rate: rate, Period: time.Minute, Burst: rate} }

// PerHour is rate per hour, in bursts of rate.
func PerHour(rate int) Limit { return Limit{Rate: rate, Period: time.Hour, Burst: rate} }

// rediser is the client redis_rate's NewLimiter takes, method for method: a *redis.Client,
// ClusterClient or Ring, or a wrapper or a mock of yours made for redis_rate.
type rediser interface {
	Eval(ctx context.Context, script string, keys []string, args ...interface{}) *redis.Cmd
	EvalSha(ctx context.Context, sha1 string, keys []string, args ...interface{}) *redis.Cmd
	ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd
	ScriptLoad(ctx context.Context, script string) *redis.StringCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd

	EvalRO(ctx context.Context, sha1 string, keys []string, args ...interface{}) *redis.Cmd
	EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...interface{}) *redis.Cmd
}

// Limiter decides GCRA limits on the server.
type Limiter struct {
	limiter *ratelimit.Limiter
	rdb     rediser
}

// NewLimiter returns a new Limiter over rdb, which redis_rate's NewLimiter would take too. A
// go-redis client (a Client, ClusterClient, Ring, or a type embedding one) sends RATELIMIT.GCRA
// itself, and on a server without the module loads the module's Functions library on first use.
// Another client (a wrapper with only redis_rate's methods) sends it inside a script (EVALSHA),
// which needs the module: errors.Is(err, rlgoredis.ErrScriptsOnly) without it.
func NewLimiter(rdb rediser) *Limiter {
	return &Limiter{limiter: ratelimit.New(rlgoredis.ConnFor(rdb)), rdb: rdb}
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

func rate(limit Limit, n int) (ratelimit.Rate, error) {
	if limit.Rate < 1 || limit.Burst < 1 || limit.Period <= 0 {
		return ratelimit.Rate{}, &ratelimit.ArgumentError{Message: "redis_rate: a Limit needs Rate >= 1, Burst >= 1 and Period > 0, got " + limit.String()}
	}
	if n == 0 {
		return ratelimit.Rate{}, &ratelimit.ArgumentError{Message: "redis_rate: n must not be 0"}
	}
	return ratelimit.Rate{MaxBurst: int64(limit.Burst) - 1, PerPeriod: int64(limit.Rate), Period: limit.Period, Tokens: int64(n)}, nil
}

// AllowN admits n events now, or none.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	r, err := rate(limit, n)
	if err != nil {
		return nil, err
	}
	d, err := l.limiter.GCRA(ctx, KeyPrefix+key, r)
	if err != nil {
		return nil, err
	}
	if d.RetryAfter == ratelimit.Forever {
		// More than the burst: redis_rate still says when the bucket would have room for n.
		d.RetryAfter = d.ResetAfter + time.Duration(n-limit.Burst)*emission(limit)
	}
	return result(limit, d, n), nil
}

// AllowAtMost admits as many of n events as the bucket has room for now, at least one (Allowed
// says how many). Granted fewer than n, the bucket is left empty, as redis_rate leaves it.
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	r, err := rate(limit, n)
	if err != nil {
		return nil, err
	}
	g, err := l.limiter.GCRAUpTo(ctx, KeyPrefix+key, r)
	if err != nil {
		return nil, err
	}
	return result(limit, g.Decision, int(g.Granted)), nil
}

// result is redis_rate's Result for a decision: allowed events and what remains, or, denied,
// none and the wait.
func result(limit Limit, d ratelimit.Decision, allowed int) *Result {
	if d.Allowed {
		return &Result{Limit: limit, Allowed: allowed, Remaining: int(d.Remaining), RetryAfter: -1, ResetAfter: d.ResetAfter}
	}
	return &Result{Limit: limit, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}
}

// Reset forgets key's usage: its bucket is full again.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.rdb.Del(ctx, KeyPrefix+key).Err()
}

func emission(limit Limit) time.Duration {
	return limit.Period / time.Duration(limit.Rate)
}

// Result is one decision, with redis_rate's fields and meanings.
type Result struct {
	// Limit is the limit the call was decided with.
	Limit Limit

	// Allowed is how many of the n events asked for were admitted (0 when denied).
	Allowed int

	// Remaining is how many more events the bucket would admit right now.
	Remaining int

	// RetryAfter is -1 when admitted; else how long until the same call would be admitted.
	RetryAfter time.Duration

	// ResetAfter is how long until the bucket is full again (Remaining back to Burst).
	ResetAfter time.Duration
}
