package ratelimit

import (
	"context"
	"time"
)

// Conn is what an adapter gives the limiter: one Redis or Valkey client, standalone or a cluster.
type Conn interface {
	// Do sends one command; in a cluster it goes to the primary of the slot of args[keyPos] (any
	// node for keyPos 0). The reply comes as int64, string, nil, []any or map[string]any, nested
	// as the server sent it; an error reply as a *ServerError.
	Do(ctx context.Context, keyPos int, args []string) (any, error)
	// EachPrimary calls fn with a Conn for every primary (one server: itself), for the commands a
	// cluster needs on every node (FUNCTION LOAD).
	EachPrimary(ctx context.Context, fn func(Conn) error) error
	// Cluster reports whether keys are spread over slots: a call's keys must then share one.
	Cluster() bool
}

// Waiter is a Conn that can send a write and WAIT behind it on the connection that wrote (WAIT
// counts that connection's writes), for a limiter made WithReplicas: DoWaiting answers the
// write's reply as Do does, and how many replicas WAIT says acknowledged it. The adapters' Conns
// are Waiters.
type Waiter interface {
	DoWaiting(ctx context.Context, keyPos int, args []string, replicas int, timeout time.Duration) (reply any, acknowledged int64, err error)
}
