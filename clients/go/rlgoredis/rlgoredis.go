// Package rlgoredis runs redis-ratelimit's limiters over go-redis v9: a Client, ClusterClient,
// Ring or any UniversalClient. Each call names its key's position, so that a cluster or a ring
// sends it to the key's primary at once (no MOVED round trip, whatever go-redis's command cache
// holds). ConnFor also takes a client that only runs scripts (a wrapper or a mock made for
// redis_rate's or ulule's constructors), for the drop-ins.
package rlgoredis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis/go-redis/v9"
)

// New is a Limiter over rdb.
func New(rdb redis.UniversalClient, options ...ratelimit.Option) *ratelimit.Limiter {
	return ratelimit.New(Conn{rdb}, options...)
}

// Conn is rdb as a ratelimit.Conn.
type Conn struct {
	Client redis.UniversalClient
}

// Do sends args, routed by args[keyPos].
func (c Conn) Do(ctx context.Context, keyPos int, args []string) (any, error) {
	cmd := redis.NewCmd(ctx, words(args)...)
	client := c.Client
	if keyPos > 0 {
		cmd.SetFirstKeyPos(int8(keyPos))
	} else if cluster, ok := client.(*redis.ClusterClient); ok {
		// A keyless command (the backend's probe, TOP) goes to the primary of slot 0 as a plain
		// client sends it: the cluster client would look a module's command up in its command
		// cache first, and log it missing where the module is.
		primary, err := cluster.MasterForKey(ctx, "")
		if err != nil {
			return nil, err
		}
		client = primary
	}
	_ = client.Process(ctx, cmd)
	return result(cmd)
}

// DoWaiting sends args, then WAIT replicas timeout, on one connection: the key's primary's (a
// Ring cannot: which shard holds a key is its own).
func (c Conn) DoWaiting(ctx context.Context, keyPos int, args []string, replicas int, timeout time.Duration) (any, int64, error) {
	var node *redis.Client
	switch rdb := c.Client.(type) {
	case *redis.Client:
		node = rdb
	case *redis.ClusterClient:
		key := ""
		if keyPos > 0 {
			key = args[keyPos]
		}
		primary, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		node = primary
	default:
		return nil, 0, &ratelimit.ArgumentError{Message: fmt.Sprintf("a %T cannot wait for replicas (a Client or a ClusterClient can)", c.Client)}
	}
	cmd := redis.NewCmd(ctx, words(args)...)
	wait := redis.NewIntCmd(ctx, "WAIT", replicas, timeout.Milliseconds())
	// A pipeline goes out on one connection: the WAIT counts the write before it.
	_, _ = node.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		_ = pipe.Process(ctx, cmd)
		return pipe.Process(ctx, wait)
	})
	reply, err := result(cmd)
	var server *ratelimit.ServerError
	if cluster, ok := c.Client.(*redis.ClusterClient); ok && errors.As(err, &server) && moved(server.Message) {
		// The slot moved: the next call goes where the cluster's slots, read again, say.
		cluster.ReloadState(ctx)
	}
	if err != nil {
		return nil, 0, err
	}
	acknowledged, err := wait.Result()
	return reply, acknowledged, err
}

func moved(message string) bool {
	return strings.HasPrefix(message, "MOVED ") || strings.HasPrefix(message, "ASK ")
}

// result is a command's reply or error, in the shapes ratelimit.Conn promises.
func result(cmd *redis.Cmd) (any, error) {
	reply, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	var server redis.Error
	if errors.As(err, &server) {
		return nil, &ratelimit.ServerError{Message: server.Error()}
	}
	if err != nil {
		return nil, err
	}
	return plain(reply)
}

// EachPrimary calls fn on every primary of a cluster, every shard of a ring, or the one server.
func (c Conn) EachPrimary(ctx context.Context, fn func(ratelimit.Conn) error) error {
	each := func(ctx context.Context, node *redis.Client) error { return fn(Conn{node}) }
	switch rdb := c.Client.(type) {
	case *redis.ClusterClient:
		return rdb.ForEachMaster(ctx, each)
	case *redis.Ring:
		return rdb.ForEachShard(ctx, each)
	}
	return fn(c)
}

// Cluster reports whether the client spreads keys over slots: a ClusterClient (a Ring too, over
// its shards).
func (c Conn) Cluster() bool {
	switch c.Client.(type) {
	case *redis.ClusterClient, *redis.Ring:
		return true
	}
	return false
}

func words(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}

// plain is a go-redis reply in the shapes ratelimit.Conn promises.
func plain(v any) (any, error) {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			var err error
			if out[i], err = plain(item); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for name, item := range v {
			value, err := plain(item)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(name)] = value
		}
		return out, nil
	case redis.Error:
		return nil, &ratelimit.ServerError{Message: v.Error()}
	}
	return v, nil
}
