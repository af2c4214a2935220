package ratelimit

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrHotClosed is Take's error after Close.
var ErrHotClosed = errors.New("ratelimit: the hot limit is closed")

// HotOptions tune a HotLimit; the zero value is the defaults.
type HotOptions struct {
	// Horizon is how much of this process's demand a block of tokens covers (10 ms by default):
	// longer, fewer calls; shorter, less held by a process that stops needing them.
	Horizon time.Duration
	// Guard is taken off each block's deadline, for scheduling and reset_ms's whole
	// milliseconds (2 ms by default); a thousandth of the time the window had left is taken off
	// too, for the hosts' clocks running at slightly different rates.
	Guard time.Duration
	// FailOpen admits when Redis cannot be reached and no tokens are held; by default Take
	// then denies (and returns the error either way). A call the server refuses is denied
	// whatever FailOpen says.
	FailOpen bool
	// Now is the clock (time.Now by default): its monotonic reading measures every delay.
	Now func() time.Time
}

// HotLimit is one process's share of a limit on one key that many processes share (a partner's
// requests a second across a fleet): it takes blocks of tokens from the server (HIT PARTIAL
// RESERVE) and decides locally, with no round trip, until a block is spent or its deadline.
// Safe for concurrent use.
//
// Never over: a block is used only before its deadline, the instant its request was sent plus
// the time the server said its window had left, less the guard, so every admission falls in the
// window that granted it, whatever the offset between the hosts' clocks. The sum of the grants
// of a window is at most the limit, so the admissions are.
//
// Refilled ahead: one request in flight at a time, sent when what is held covers less than half
// the horizon of demand; it asks for a horizon of demand, no more than can be spent before the
// window ends, nor than an eighth of what the server had left. When the server says none remain,
// none is asked for before the window resets. Close gives back what is unused; a process that
// dies holding tokens loses them for that window.
type HotLimit struct {
	l      *Limiter
	key    string
	f      Fixed
	now    func() time.Time
	origin time.Time
	open   bool // FailOpen
	// invalid is f's error, if Hit would refuse it: every Take answers it.
	invalid error

	mu     sync.Mutex
	s      *hotState
	closed bool
	// answered is closed when the request in flight returns (nil when none is).
	answered chan struct{}
	// lastErr is the last request's error, while no block has come since.
	lastErr error
}

// Hot is this process's share of f's limit on key, shared by every process that takes it the
// same way (f.Cost is ignored: Take says how many). Close it when done.
func (l *Limiter) Hot(key string, f Fixed, o HotOptions) *HotLimit {
	f.Cost = 1
	now := o.Now
	if now == nil {
		now = time.Now
	}
	horizon := o.Horizon
	if horizon <= 0 {
		horizon = 10 * time.Millisecond
	}
	guard := o.Guard
	if guard <= 0 {
		guard = 2 * time.Millisecond
	}
	origin := now()
	return &HotLimit{l: l, key: key, f: f, now: now, origin: origin, open: o.FailOpen, invalid: f.Validate(),
		s: newHotState(f.Limit, horizon, guard, 0)}
}

func (h *HotLimit) elapsed() time.Duration { return h.now().Sub(h.origin) }

// Take admits n tokens (at least 1) from what this process holds, waiting for a block when it
// holds too few (as long as ctx allows). False when the window has none left for it. Redis
// unreachable with none held: the error, and FailOpen's answer.
func (h *HotLimit) Take(ctx context.Context, n int64) (bool, error) {
	if n < 1 {
		return false, invalid("Take needs n >= 1")
	}
	if h.invalid != nil {
		return false, h.invalid
	}
	waited := false
	for tries := 0; ; {
		h.mu.Lock()
		if h.closed {
			if waited {
				h.s.gaveUp(n)
			}
			h.mu.Unlock()
			return false, ErrHotClosed
		}
		now := h.elapsed()
		step := h.s.step(now, n, tries, waited)
		waited = step.wait
		if step.send > 0 {
			h.send(step.send)
		}
		if step.admitted || step.denied {
			h.mu.Unlock()
			return step.admitted, nil
		}
		answered := h.answered
		h.mu.Unlock()
		if !step.wait {
			// The window is ending: the next one's tokens, when it starts.
			timer := time.NewTimer(step.sleepUntil - now)
			select {
			case <-timer.C:
				continue
			case <-ctx.Done():
				timer.Stop()
				return false, ctx.Err()
			}
		}
		select {
		case <-answered:
			tries++
		case <-ctx.Done():
			h.mu.Lock()
			h.s.gaveUp(n)
			h.mu.Unlock()
			return false, ctx.Err()
		}
		h.mu.Lock()
		err := h.lastErr
		if err != nil {
			h.s.gaveUp(n)
		}
		h.mu.Unlock()
		if err != nil {
			// No answer, and too few held: closed, or open with FailOpen where Redis could not
			// be reached (not where it refused the call).
			var refused *ServerError
			return h.open && !errors.As(err, &refused) && !errors.Is(err, ErrLibraryNotLoaded), err
		}
	}
}

// send sends a request for want tokens (under h.mu): its answer makes a block.
func (h *HotLimit) send(want int64) {
	answered := make(chan struct{})
	h.answered = answered
	f := h.f
	f.Cost = want
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), h.l.background)
		defer cancel()
		sent := h.elapsed()
		r, err := h.l.ReserveHitUpTo(ctx, h.key, f)
		received := h.elapsed()
		h.mu.Lock()
		if err != nil {
			h.s.failed()
		} else {
			h.s.granted(sent, received, r)
		}
		h.lastErr = err
		h.answered = nil
		h.mu.Unlock()
		close(answered)
	}()
}

// Close gives back the tokens held of windows still running (SETTLE), a request in flight's
// once it is answered (as long as ctx allows), and makes Take refuse.
func (h *HotLimit) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	answered := h.answered
	h.mu.Unlock()
	if answered != nil {
		select {
		case <-answered:
		case <-ctx.Done():
		}
	}
	h.mu.Lock()
	blocks := h.s.unused(h.elapsed())
	h.mu.Unlock()
	var errs []error
	for _, b := range blocks {
		if _, err := h.l.Settle(ctx, b.grant, b.grant.Amount-b.left); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
