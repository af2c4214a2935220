// Package wrappers holds client wrappers of the kinds users pass to redis_rate's and ulule's
// constructors, for the tests and the bench.
package wrappers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Embedding is a client wrapper that embeds go-redis's client (to add methods of its own): a
// redis.UniversalClient still.
type Embedding struct{ *redis.Client }

// ScriptsOnly is a client wrapper with only the methods redis_rate's and ulule's constructors ask
// for, as a wrapper that logs or a mock has: not a redis.UniversalClient. It counts its scripts.
type ScriptsOnly struct {
	rdb     *redis.Client
	Scripts *atomic.Int64
}

// NewScriptsOnly wraps rdb.
func NewScriptsOnly(rdb *redis.Client) ScriptsOnly { return ScriptsOnly{rdb, new(atomic.Int64)} }

func (s ScriptsOnly) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	s.Scripts.Add(1)
	return s.rdb.Eval(ctx, script, keys, args...)
}

func (s ScriptsOnly) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	s.Scripts.Add(1)
	return s.rdb.EvalSha(ctx, sha1, keys, args...)
}

func (s ScriptsOnly) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	s.Scripts.Add(1)
	return s.rdb.EvalRO(ctx, script, keys, args...)
}

func (s ScriptsOnly) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	s.Scripts.Add(1)
	return s.rdb.EvalShaRO(ctx, sha1, keys, args...)
}

func (s ScriptsOnly) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return s.rdb.ScriptExists(ctx, hashes...)
}

func (s ScriptsOnly) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return s.rdb.ScriptLoad(ctx, script)
}

func (s ScriptsOnly) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return s.rdb.Del(ctx, keys...)
}

func (s ScriptsOnly) Get(ctx context.Context, key string) *redis.StringCmd {
	return s.rdb.Get(ctx, key)
}

func (s ScriptsOnly) Set(ctx context.Context, key string, value any, expiration time.Duration) *redis.StatusCmd {
	return s.rdb.Set(ctx, key, value, expiration)
}

func (s ScriptsOnly) SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd {
	return s.rdb.SetNX(ctx, key, value, expiration)
}

func (s ScriptsOnly) Watch(ctx context.Context, handler func(*redis.Tx) error, keys ...string) error {
	return s.rdb.Watch(ctx, handler, keys...)
}
