// Package redis is a limiter.Store for ulule/limiter v3 on redis-ratelimit, with the constructors
// of ulule's own Redis store (github.com/ulule/limiter/v3/drivers/store/redis): changing that
// import path to this package's is the whole switch, and ulule's net/http, gin and fasthttp
// middlewares run on it unchanged.
//
// It counts as ulule's Redis store counts: a window of rate.Period from the first hit, every
// hit counted, denied ones too (Reached is count > Limit), under the same keys (Prefix:key), so
// that a running service's counters carry over. Each Increment is one RATELIMIT.HIT, which sets
// the window's expiry in the same step as the count: a counter found without a TTL gets one.
package redis

import (
	"context"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/rlgoredis"
	libredis "github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/common"
)

// Client is the client ulule's Redis store takes, method for method: a go-redis Client,
// ClusterClient or Ring, or a wrapper or a mock of yours made for ulule's store. A go-redis client
// (or a type embedding one) sends the module's commands itself, and loads the Functions library
// where the module is missing; another sends them inside a script (EVALSHA), which needs the
// module: errors.Is(err, rlgoredis.ErrScriptsOnly) without it.
type Client interface {
	Get(ctx context.Context, key string) *libredis.StringCmd
	Set(ctx context.Context, key string, value interface{}, expiration time.Duration) *libredis.StatusCmd
	Watch(ctx context.Context, handler func(*libredis.Tx) error, keys ...string) error
	Del(ctx context.Context, keys ...string) *libredis.IntCmd
	SetNX(ctx context.Context, key string, value interface{}, expiration time.Duration) *libredis.BoolCmd
	EvalSha(ctx context.Context, sha string, keys []string, args ...interface{}) *libredis.Cmd
	ScriptLoad(ctx context.Context, script string) *libredis.StringCmd
}

// Store is the redis-ratelimit store.
type Store struct {
	// Prefix goes before every key (with a ":").
	Prefix string
	// MaxRetry is kept for ulule's StoreOptions; nothing is retried (each call is atomic).
	MaxRetry int

	limiter *ratelimit.Limiter
	client  Client
}

// NewStore returns a store with ulule's defaults.
func NewStore(client Client) (limiter.Store, error) {
	return NewStoreWithOptions(client, limiter.StoreOptions{
		Prefix:          limiter.DefaultPrefix,
		CleanUpInterval: limiter.DefaultCleanUpInterval,
		MaxRetry:        limiter.DefaultMaxRetry,
	})
}

// NewStoreWithOptions returns a store with options. Like ulule's, it talks to the server once
// here: it finds the module, or loads the Functions library where the module is missing.
func NewStoreWithOptions(client Client, options limiter.StoreOptions) (limiter.Store, error) {
	store := &Store{Prefix: options.Prefix, MaxRetry: options.MaxRetry, limiter: ratelimit.New(rlgoredis.ConnFor(client)), client: client}
	if _, err := store.limiter.Backend(context.Background()); err != nil {
		return nil, err
	}
	return store, nil
}

// unlimited is the limit sent: the store never denies, it counts; ulule decides Reached. 2^53 - 1:
// the largest number the Functions library computes with exactly.
const unlimited = 1<<53 - 1

func (store *Store) key(key string) string { return store.Prefix + ":" + key }

// Get counts one hit and returns the limit for key.
func (store *Store) Get(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	return store.Increment(ctx, key, 1, rate)
}

// Increment counts count hits (a negative count gives back, at most what was counted) and
// returns the limit for key.
func (store *Store) Increment(ctx context.Context, key string, count int64, rate limiter.Rate) (limiter.Context, error) {
	if count == 0 {
		return store.Peek(ctx, key, rate)
	}
	d, err := store.limiter.Hit(ctx, store.key(key), ratelimit.Fixed{Limit: unlimited, Window: rate.Period, Cost: count})
	if err != nil {
		return limiter.Context{}, err
	}
	return state(rate, d), nil
}

// Peek returns the limit for key without counting.
func (store *Store) Peek(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	d, err := store.limiter.Peek(ctx, store.key(key), unlimited, 1)
	if err != nil {
		return limiter.Context{}, err
	}
	return state(rate, d), nil
}

// Reset forgets key's count.
func (store *Store) Reset(ctx context.Context, key string, rate limiter.Rate) (limiter.Context, error) {
	if err := store.client.Del(ctx, store.key(key)).Err(); err != nil {
		return limiter.Context{}, err
	}
	now := time.Now()
	return common.GetContextFromState(now, rate, now.Add(rate.Period), 0), nil
}

// state is ulule's Context for a counter: the window ends when the key expires (a key with no
// count yet, or no TTL: a period from now, as ulule's store has it).
func state(rate limiter.Rate, d ratelimit.Decision) limiter.Context {
	now := time.Now()
	expiration := now.Add(rate.Period)
	if d.ResetAfter > 0 && d.ResetAfter != ratelimit.Forever {
		expiration = now.Add(d.ResetAfter)
	}
	return common.GetContextFromState(now, rate, expiration, d.Count)
}
