// Package rlvalkey runs redis-ratelimit's limiters over valkey-go. A call's key goes through the
// command builder's Keys, so that a cluster client sends it to the key's primary at once.
//
// valkey-go is a fork of rueidis: this adapter is rlrueidis's over valkey-go's types (Go cannot
// share the code without one module depending on the other client).
package rlvalkey

import (
	"context"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adapt"
	"github.com/valkey-io/valkey-go"
)

// New is a Limiter over client.
func New(client valkey.Client, options ...ratelimit.Option) *ratelimit.Limiter {
	return ratelimit.New(Conn{client}, options...)
}

// Conn is client as a ratelimit.Conn.
type Conn struct {
	Client valkey.Client
}

// Do sends args, routed by args[keyPos].
func (c Conn) Do(ctx context.Context, keyPos int, args []string) (any, error) {
	return result(c.Client.Do(ctx, c.command(keyPos, args)).ToAny())
}

// command is args built with args[keyPos] as their key (none for keyPos 0).
func (c Conn) command(keyPos int, args []string) valkey.Completed {
	cmd := c.Client.B().Arbitrary(args[0])
	if keyPos > 0 {
		cmd = cmd.Args(args[1:keyPos]...).Keys(args[keyPos]).Args(args[keyPos+1:]...)
	} else {
		cmd = cmd.Args(args[1:]...)
	}
	return cmd.Build()
}

// result is a command's reply or error, in the shapes ratelimit.Conn promises.
func result(reply any, err error) (any, error) {
	if valkey.IsValkeyNil(err) {
		return nil, nil
	}
	if server, ok := valkey.IsValkeyErr(err); ok {
		return nil, &ratelimit.ServerError{Message: server.Error()}
	}
	if err != nil {
		return nil, err
	}
	return adapt.ServerErrors(reply), nil
}

// DoWaiting sends args, then WAIT replicas timeout, on one connection to the key's primary (a
// blocking command takes a connection of its own, with what is sent beside it).
func (c Conn) DoWaiting(ctx context.Context, keyPos int, args []string, replicas int, timeout time.Duration) (any, int64, error) {
	wait := c.Client.B().Wait().Numreplicas(int64(replicas)).Timeout(timeout.Milliseconds()).Build()
	replies := c.Client.DoMulti(ctx, c.command(keyPos, args), wait)
	reply, err := result(replies[0].ToAny())
	if err != nil {
		return nil, 0, err
	}
	acknowledged, err := replies[1].AsInt64()
	return reply, acknowledged, err
}

// EachPrimary calls fn on every node of a cluster (FUNCTION LOAD on a replica is refused as
// READONLY, and the replica gets the library from its primary), or on the one server.
func (c Conn) EachPrimary(ctx context.Context, fn func(ratelimit.Conn) error) error {
	if !c.Cluster() {
		return fn(c)
	}
	for _, node := range c.Client.Nodes() {
		if err := fn(Conn{node}); err != nil && !adapt.ReadOnly(err) {
			return err
		}
	}
	return nil
}

// Cluster reports whether the client is in cluster mode.
func (c Conn) Cluster() bool { return c.Client.Mode() == valkey.ClientModeCluster }
