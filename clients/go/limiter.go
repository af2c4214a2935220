package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/resp"
)

// Backend is what answers the limiter's calls.
type Backend string

// The backends.
const (
	Module  Backend = "module"
	Library Backend = "library"
)

// Limiter sends the limiters' calls over one Conn. It finds the backend on first use (the module,
// else the Functions library, loaded when missing unless WithoutLibraryLoad) and remembers it; it
// is safe for concurrent use.
//
// The calls it makes on its own, not on a caller's context, each have a deadline (5 s unless
// WithBackgroundTimeout): finding the backend (one search, shared by every caller that needs it,
// each waiting as long as its own context allows), a held permit's renewals (at most a third of
// its lease each) and its release when the work ends.
type Limiter struct {
	conn        Conn
	loadLibrary bool
	background  time.Duration
	// replicas each write waits for (0: none), at most replicaTimeout.
	replicas       int
	replicaTimeout time.Duration

	mu      sync.Mutex
	backend Backend
	search  *search
}

// search is the backend's search in progress: done closes when backend or err is set.
type search struct {
	done    chan struct{}
	backend Backend
	err     error
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithoutLibraryLoad makes the limiter expect the library loaded already on a server without the
// module (ErrLibraryNotLoaded otherwise), rather than load it.
func WithoutLibraryLoad() Option { return func(l *Limiter) { l.loadLibrary = false } }

// WithBackgroundTimeout sets the deadline of each call the limiter makes on its own (5 s by
// default): the backend's search, a held permit's renewals (at most a third of its lease) and its
// release. A timeout of 0 or less keeps the default.
func WithBackgroundTimeout(timeout time.Duration) Option {
	return func(l *Limiter) {
		if timeout > 0 {
			l.background = timeout
		}
	}
}

// WithReplicas makes every call that writes wait, on the connection that wrote, until replicas
// replicas have it (WAIT replicas timeout), at most timeout (in whole ms, rounded up; 100 ms when
// 0 or less; within the client's read timeout): a failover then loses no write the call
// answered. When fewer acknowledge in time the call answers beside a *NotReplicatedError
// (errors.Is ErrNotReplicated). It costs a round trip to the replicas per write. The Conn must be
// a Waiter (the adapters' are, but over a go-redis Ring).
func WithReplicas(replicas int, timeout time.Duration) Option {
	return func(l *Limiter) {
		if timeout <= 0 {
			timeout = 100 * time.Millisecond
		}
		// WAIT's 0 would wait for ever.
		l.replicas, l.replicaTimeout = max(replicas, 0), timeout.Round(time.Millisecond)
		if l.replicaTimeout < timeout {
			l.replicaTimeout += time.Millisecond
		}
	}
}

// New is a Limiter over conn (an adapter's: rlgoredis.New, rlrueidis.New, rlvalkey.New).
func New(conn Conn, options ...Option) *Limiter {
	l := &Limiter{conn: conn, loadLibrary: true, background: 5 * time.Second}
	for _, option := range options {
		option(l)
	}
	return l
}

// Conn is the connection the limiter sends over.
func (l *Limiter) Conn() Conn { return l.conn }

// Backend is the backend, found on the first call (and by this one if none was made yet). The
// search runs once for all the callers that wait for it, with the limiter's background timeout;
// each caller waits as long as its ctx allows. A search that failed is made again by the next call.
func (l *Limiter) Backend(ctx context.Context) (Backend, error) {
	l.mu.Lock()
	if l.backend != "" {
		defer l.mu.Unlock()
		return l.backend, nil
	}
	s := l.search
	if s == nil {
		s = &search{done: make(chan struct{})}
		l.search = s
		go l.find(context.WithoutCancel(ctx), s)
	}
	l.mu.Unlock()
	select {
	case <-s.done:
		return s.backend, s.err
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
}

// find searches for the backend on behalf of every caller waiting on s.
func (l *Limiter) find(ctx context.Context, s *search) {
	ctx, cancel := context.WithTimeout(ctx, l.background)
	defer cancel()
	s.backend, s.err = l.probe(ctx)
	l.mu.Lock()
	if s.err == nil {
		l.backend = s.backend
	}
	l.search = nil
	l.mu.Unlock()
	close(s.done)
}

// probe finds the backend, loading the library where the module is missing.
func (l *Limiter) probe(ctx context.Context) (Backend, error) {
	// Asked with no arguments, the module answers its arity error; a server without it "unknown
	// command". No key is touched, and no MODULE LIST is needed (managed services refuse it).
	_, err := l.conn.Do(ctx, 0, []string{"RATELIMIT.PEEK"})
	var server *ServerError
	if err == nil || errors.As(err, &server) && !strings.Contains(strings.ToLower(server.Message), "unknown command") {
		return Module, nil
	}
	if !errors.As(err, &server) {
		return "", err
	}
	if err := l.ensureLibrary(ctx); err != nil {
		return "", err
	}
	return Library, nil
}

// ensureLibrary loads the library on every primary that lacks it (never REPLACE: a newer one
// loaded by hand stays).
func (l *Limiter) ensureLibrary(ctx context.Context) error {
	return l.conn.EachPrimary(ctx, func(node Conn) error {
		listing, err := node.Do(ctx, 0, []string{"FUNCTION", "LIST", "LIBRARYNAME", LibraryName})
		if err != nil {
			return err
		}
		if hasLibrary(listing) {
			return nil
		}
		if !l.loadLibrary {
			return ErrLibraryNotLoaded
		}
		_, err = node.Do(ctx, 0, []string{"FUNCTION", "LOAD", librarySource})
		var server *ServerError
		if errors.As(err, &server) && strings.Contains(server.Message, "already exists") {
			return nil
		}
		return err
	})
}

func hasLibrary(listing any) bool {
	entries, _ := listing.([]any)
	for _, entry := range entries {
		if name, _ := resp.Fields(entry)["library_name"].(string); name == LibraryName {
			return true
		}
	}
	return false
}

// Do sends any built call, to the backend found, and reads its reply.
func do[T any](ctx context.Context, l *Limiter, call command[T]) (T, error) {
	var zero T
	if l.conn.Cluster() && len(call.Keys) > 1 {
		for _, key := range call.Keys[1:] {
			if slot(key) != slot(call.Keys[0]) {
				return zero, invalid("CROSSSLOT Keys in request don't hash to the same slot (give them one hash tag, e.g. rl:{user:42}:s)")
			}
		}
	}
	backend, err := l.Backend(ctx)
	if err != nil {
		return zero, err
	}
	if backend == Library && call.Function == "" {
		return zero, invalid(call.Command + " needs the module (the Functions library has no such function)")
	}
	args, keyPos := call.ModuleArgs(), 1
	if call.Numkeys {
		keyPos = 2
	}
	if backend == Library {
		args, keyPos = call.LibraryArgs(), 3
	}
	if len(call.Keys) == 0 {
		keyPos = 0
	}
	var acknowledged int64
	deliver := func() (reply any, err error) {
		if l.replicas == 0 || call.ReadOnly {
			return l.conn.Do(ctx, keyPos, args)
		}
		waiter, ok := l.conn.(Waiter)
		if !ok {
			return nil, invalid("this Conn cannot wait for replicas (WithReplicas): it is no Waiter")
		}
		reply, acknowledged, err = waiter.DoWaiting(ctx, keyPos, args, l.replicas, l.replicaTimeout)
		return reply, err
	}
	reply, err := deliver()
	var server *ServerError
	if backend == Library && errors.As(err, &server) && strings.Contains(strings.ToLower(server.Message), "function not found") {
		// The server lost the library (a restart without persistence, FUNCTION FLUSH): again.
		if err := l.ensureLibrary(ctx); err != nil {
			return zero, err
		}
		reply, err = deliver()
	}
	if err != nil {
		return zero, err
	}
	answer, err := call.Parse(reply)
	if err == nil && l.replicas > 0 && !call.ReadOnly && acknowledged < int64(l.replicas) {
		err = &NotReplicatedError{Acknowledged: int(acknowledged), Wanted: l.replicas}
	}
	return answer, err
}

func send[T any](ctx context.Context, l *Limiter, call command[T], err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return do(ctx, l, call)
}

// Hit counts a call against a fixed window (RATELIMIT.HIT).
func (l *Limiter) Hit(ctx context.Context, key string, f Fixed) (Decision, error) {
	call, err := hitCall(key, f)
	return send(ctx, l, call, err)
}

// Peek says whether a HIT of cost (0 means 1) would be admitted, writing nothing.
func (l *Limiter) Peek(ctx context.Context, key string, limit, cost int64) (Decision, error) {
	call, err := peekCall(key, limit, cost)
	return send(ctx, l, call, err)
}

// Slide counts a call against a sliding window (RATELIMIT.SLIDE).
func (l *Limiter) Slide(ctx context.Context, key string, s Sliding) (Decision, error) {
	call, err := slideCall(key, s)
	return send(ctx, l, call, err)
}

// SlidePeek says whether a SLIDE would be admitted, writing nothing.
func (l *Limiter) SlidePeek(ctx context.Context, key string, s Sliding) (Decision, error) {
	call, err := slidePeekCall(key, s)
	return send(ctx, l, call, err)
}

// HitAll counts one call against several limits, all or nothing (RATELIMIT.HITALL).
func (l *Limiter) HitAll(ctx context.Context, limits []Limit, o AllOptions) (MultiDecision, error) {
	call, err := hitAllCall(limits, o)
	return send(ctx, l, call, err)
}

// GCRA takes tokens from a GCRA bucket (RATELIMIT.GCRA).
func (l *Limiter) GCRA(ctx context.Context, key string, r Rate) (Decision, error) {
	call, err := gcraCall(key, r)
	return send(ctx, l, call, err)
}

// GCRAUpTo takes as many of r.Tokens as the bucket has, at least one (RATELIMIT.GCRA PARTIAL).
func (l *Limiter) GCRAUpTo(ctx context.Context, key string, r Rate) (Grant, error) {
	call, err := gcraUpToCall(key, r)
	return send(ctx, l, call, err)
}

// HitUpTo counts as many of f.Cost as the fixed window has left, at least one (RATELIMIT.HIT
// PARTIAL).
func (l *Limiter) HitUpTo(ctx context.Context, key string, f Fixed) (Grant, error) {
	call, err := hitUpToCall(key, f)
	return send(ctx, l, call, err)
}

// SlideUpTo counts as many of s.Cost as the sliding window's estimate has room for, at least one
// (RATELIMIT.SLIDE PARTIAL).
func (l *Limiter) SlideUpTo(ctx context.Context, key string, s Sliding) (Grant, error) {
	call, err := slideUpToCall(key, s)
	return send(ctx, l, call, err)
}

// RefundHit gives amount back to the fixed window running now (f's Cost is not read).
func (l *Limiter) RefundHit(ctx context.Context, key string, f Fixed, amount int64) (Decision, error) {
	call, err := refundHitCall(key, f, amount)
	return send(ctx, l, call, err)
}

// RefundSlide gives amount back to the sliding window's current window (s's Cost is not read).
func (l *Limiter) RefundSlide(ctx context.Context, key string, s Sliding, amount int64) (Decision, error) {
	call, err := refundSlideCall(key, s, amount)
	return send(ctx, l, call, err)
}

// RefundGCRA gives amount tokens back to the bucket (r's Tokens and Align are not read).
func (l *Limiter) RefundGCRA(ctx context.Context, key string, r Rate, amount int64) (Decision, error) {
	call, err := refundGCRACall(key, r, amount)
	return send(ctx, l, call, err)
}

// ReserveHit counts an estimate (f.Cost) against a fixed window, and reserves it for Settle.
func (l *Limiter) ReserveHit(ctx context.Context, key string, f Fixed) (Reservation, error) {
	call, err := reserveHitCall(key, f)
	return send(ctx, l, call, err)
}

// ReserveHitUpTo counts as many of f.Cost as the fixed window has left, at least one, and
// reserves what was granted (Reservation.Amount; 0 and no Token when none was left): a block of
// hits to spend locally, whose unused part Settle gives back while the window runs.
func (l *Limiter) ReserveHitUpTo(ctx context.Context, key string, f Fixed) (Reservation, error) {
	call, err := reserveHitUpToCall(key, f)
	return send(ctx, l, call, err)
}

// ReserveSlideUpTo counts as many of s.Cost as the sliding window's estimate has room for, at
// least one, and reserves what was granted (Reservation.Amount; 0 and no Token when none).
func (l *Limiter) ReserveSlideUpTo(ctx context.Context, key string, s Sliding) (Reservation, error) {
	call, err := reserveSlideUpToCall(key, s)
	return send(ctx, l, call, err)
}

// ReserveSlide counts an estimate (s.Cost) against a sliding window, and reserves it.
func (l *Limiter) ReserveSlide(ctx context.Context, key string, s Sliding) (Reservation, error) {
	call, err := reserveSlideCall(key, s)
	return send(ctx, l, call, err)
}

// ReserveGCRA takes an estimate (r.Tokens) from a bucket, and reserves it.
func (l *Limiter) ReserveGCRA(ctx context.Context, key string, r Rate) (Reservation, error) {
	call, err := reserveGCRACall(key, r)
	return send(ctx, l, call, err)
}

// ReserveGCRAUpTo takes as many of r.Tokens as the bucket has whole, at least one, and reserves
// what was granted (Reservation.Amount; 0 and no Token when none was).
func (l *Limiter) ReserveGCRAUpTo(ctx context.Context, key string, r Rate) (Reservation, error) {
	call, err := reserveGCRAUpToCall(key, r)
	return send(ctx, l, call, err)
}

// ReserveAll decides a request's limits together, its estimated tokens on the token keys, and
// reserves them (HITALL TOKENS RESERVE).
func (l *Limiter) ReserveAll(ctx context.Context, limits []Limit, o AllOptions) (MultiReservation, error) {
	call, err := reserveAllCall(limits, o)
	return send(ctx, l, call, err)
}

// Settle settles a reservation with what was used (RATELIMIT.SETTLE).
func (l *Limiter) Settle(ctx context.Context, r Reservation, used int64) (Settlement, error) {
	call, err := settleCall(r, used)
	return send(ctx, l, call, err)
}

// SettleAll settles a ReserveAll reservation with what was used: one Settlement per token key.
func (l *Limiter) SettleAll(ctx context.Context, r MultiReservation, used int64) ([]Settlement, error) {
	call, err := settleAllCall(r, used)
	return send(ctx, l, call, err)
}

// Acquire takes one of at most limit permits in flight for lease, under id ("": a new one).
func (l *Limiter) Acquire(ctx context.Context, key string, limit int64, lease time.Duration, id string) (Acquisition, error) {
	call, err := acquireCall(key, limit, lease, id)
	return send(ctx, l, call, err)
}

// Release gives back the permit under id; false if it was not live.
func (l *Limiter) Release(ctx context.Context, key, id string) (bool, error) {
	call, err := releaseCall(key, id)
	return send(ctx, l, call, err)
}

// Renew extends the live lease under id to lease from now; 0 when it was lost.
func (l *Limiter) Renew(ctx context.Context, key, id string, lease time.Duration) (time.Duration, error) {
	call, err := renewCall(key, id, lease)
	return send(ctx, l, call, err)
}

// Top is RATELIMIT.TOP (the module only) on the node the connection reaches first.
func (l *Limiter) Top(ctx context.Context, o TopOptions) ([]TopEntry, error) {
	call, err := topCall(o)
	return send(ctx, l, call, err)
}
