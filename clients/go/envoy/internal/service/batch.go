package service

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// maxBatchKeys bounds the keys of one HITALL a batch sends: the server answers it in one step.
const maxBatchKeys = 128

// batcher sends the uncapped checks of concurrent requests (every hit counts, the service
// decides: nothing one request's answer depends on is another's) in one HITALL: while a call of
// a cost and zone is in flight, the next requests' checks of that cost and zone wait and go
// together when it returns. No timer: an idle service sends each request at once, a busy one
// sends one call for many, which spares Redis a read, a command and a write per request.
type batcher struct {
	mu sync.Mutex
	// lanes holds the calls in flight and the batches waiting behind them, by cost and zone;
	// a lane goes when it has nothing left to send, so that there are no more lanes than calls
	// in flight.
	lanes map[string]*lane
}

// lane is one cost and zone's: a call in flight, and the batch that goes when it returns.
type lane struct {
	next *batch
}

// batch is the checks of requests sent in one call, each request's together (`jobs`).
type batch struct {
	jobs []*job
	keys map[string]bool
	n    int
}

// job is one request's checks of one cost and zone, its keys distinct: copies, which the call
// fills and the request reads back once `done` (a request that stops waiting leaves them).
type job struct {
	checks []*check
	done   chan struct{}
}

// sendTimeout bounds a call sent for requests that are not the sender's (envoyproxy/ratelimit's
// REDIS_TIMEOUT default); each request still waits no longer than its own context.
const sendTimeout = 10 * time.Second

func (b *batch) add(j *job) {
	b.jobs = append(b.jobs, j)
	for _, c := range j.checks {
		b.keys[c.key] = true
	}
	b.n += len(j.checks)
}

// fits reports whether j can join b: room, and none of its keys in b (a key counted twice in one
// HITALL is refused).
func (b *batch) fits(j *job) bool {
	if b.n+len(j.checks) > maxBatchKeys {
		return false
	}
	for _, c := range j.checks {
		if b.keys[c.key] {
			return false
		}
	}
	return true
}

// decide counts checks (one request's, of one cost and zone, uncapped) with other requests'
// where they can share a call, and returns when their answers are in (or ctx ends: the call,
// shared, still goes).
func (bt *batcher) decide(ctx context.Context, rl *ratelimit.Limiter, checks []*check) {
	j := &job{checks: make([]*check, len(checks)), done: make(chan struct{})}
	for i, c := range checks {
		copied := *c
		j.checks[i] = &copied
	}
	shape := strconv.FormatInt(checks[0].addend, 10) + "@" + checks[0].limit.TimeZone
	bt.mu.Lock()
	l := bt.lanes[shape]
	switch {
	case l == nil:
		// Nothing in flight: this request's call goes now.
		bt.lanes[shape] = &lane{}
		bt.mu.Unlock()
		bt.send(ctx, rl, shape, &batch{jobs: []*job{j}})
	case l.next == nil || l.next.fits(j):
		if l.next == nil {
			l.next = &batch{keys: map[string]bool{}}
		}
		l.next.add(j)
		bt.mu.Unlock()
	default:
		// A key already waiting (a hot key), or a full batch: a call of its own, now, beside.
		bt.mu.Unlock()
		together(ctx, rl, checks, false)
		return
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		for _, c := range checks {
			c.err = ctx.Err()
		}
		return
	}
	for i, c := range checks {
		*c = *j.checks[i]
	}
}

// send makes b's call, then sends the batch that gathered meanwhile, in a goroutine of its own
// (the caller's request has its answer), or closes the lane.
func (bt *batcher) send(ctx context.Context, rl *ratelimit.Limiter, shape string, b *batch) {
	var all []*check
	for _, j := range b.jobs {
		all = append(all, j.checks...)
	}
	together(ctx, rl, all, false)
	// The server refused the call (a key of another type, say): each request alone, so that
	// the others still get their answers.
	var refused *ratelimit.ServerError
	if len(b.jobs) > 1 && errors.As(all[0].err, &refused) {
		for _, j := range b.jobs {
			together(ctx, rl, j.checks, false)
		}
	}
	for _, j := range b.jobs {
		close(j.done)
	}
	bt.mu.Lock()
	next := bt.lanes[shape].next
	if next == nil {
		delete(bt.lanes, shape)
	} else {
		bt.lanes[shape].next = nil
	}
	bt.mu.Unlock()
	if next != nil {
		// For other requests than the caller's: its context is not theirs to end.
		go func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
			defer cancel()
			bt.send(ctx, rl, shape, next)
		}()
	}
}
