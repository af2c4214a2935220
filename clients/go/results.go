package ratelimit

import (
	"fmt"
	"math"
	"time"
)

// Forever is a wait or a reset that never comes: a cost above the limit, or a counter without TTL
// (PEEK).
const Forever = time.Duration(math.MaxInt64)

// Decision is one limit's answer (HIT, SLIDE, PEEK, GCRA, and each limit of HITALL).
type Decision struct {
	// Allowed: admitted (PEEK: would be).
	Allowed bool
	// Count is the counter after the call (SLIDE: the estimate, rounded up; GCRA: tokens in use).
	Count int64
	// Remaining is what is left before the limit.
	Remaining int64
	// Limit is the quota (GCRA: the capacity, MaxBurst + 1).
	Limit int64
	// ResetAfter is how long until the window ends (SLIDE: until the estimate is 0; GCRA: until
	// the bucket is full); 0 when nothing is counted; Forever for a counter without TTL (PEEK).
	ResetAfter time.Duration
	// RetryAfter is 0 when allowed; else how long until the same call would be admitted if
	// nothing else happened (Forever: never, the cost is above the limit).
	RetryAfter time.Duration
	// Window is the window (GCRA: the period); 0 where the call names none (PEEK) or it varies
	// (a calendar window).
	Window time.Duration
}

// MultiDecision is HITALL's answer: one decision for several limits, all or nothing.
type MultiDecision struct {
	Allowed bool
	// Decisions are each limit's own answer, in the order given (Allowed there: whether that
	// limit alone would admit the call).
	Decisions []Decision
}

// RetryAfter is 0 when allowed; else when every limit that said no admits the call again.
func (m MultiDecision) RetryAfter() time.Duration {
	var wait time.Duration
	for _, d := range m.Decisions {
		if !m.Allowed && d.RetryAfter > wait {
			wait = d.RetryAfter
		}
	}
	return wait
}

// Tightest is the most restrictive limit: the fewest remaining, then the latest reset (a zero
// Decision when there is none).
func (m MultiDecision) Tightest() Decision {
	if len(m.Decisions) == 0 {
		return Decision{}
	}
	best := m.Decisions[0]
	for _, d := range m.Decisions[1:] {
		if d.Remaining < best.Remaining || d.Remaining == best.Remaining && d.ResetAfter > best.ResetAfter {
			best = d
		}
	}
	return best
}

// Grant is GCRA's answer with PARTIAL (GCRAUpTo): the decision and the tokens taken, at least
// one when allowed, 0 when not.
type Grant struct {
	Decision
	Granted int64
}

// Reservation is HIT's, SLIDE's or GCRA's answer with RESERVE: the decision, and the reservation
// to settle with what was used (Token is "" when denied).
type Reservation struct {
	Decision
	Key string
	// Token is the reservation as the server made it: opaque, for Key only, settled at most once.
	Token string
	// Amount is what was reserved: the call's cost, or its tokens.
	Amount int64
}

// MultiReservation is HITALL's answer with TOKENS and RESERVE: every limit decided, and one
// reservation of the token keys (Token is "" when denied).
type MultiReservation struct {
	MultiDecision
	// Keys are the token keys, in order: what the reservation is settled on.
	Keys   []string
	Token  string
	Amount int64
}

// Settlement is SETTLE's answer for one key: its limit after the settle, and the tokens applied
// (negative: given back; positive: charged beyond the reservation).
type Settlement struct {
	Decision
	Applied int64
}

// Acquisition is ACQUIRE's answer.
type Acquisition struct {
	Acquired bool
	InUse    int64
	// Remaining is how many more permits may be taken now.
	Remaining int64
	// Wait is the lease when acquired; when denied, how long until the earliest lease ends.
	Wait time.Duration
	// ID is the lease's id ("" when denied): RELEASE and RENEW take it.
	ID string
}

// TopEntry is one key of RATELIMIT.TOP: its count over the covered span, at most Error too many.
type TopEntry struct {
	Key   string
	Count int64
	Error int64
}

// Reply readers: a reply of an unexpected shape is an error that errors.Is finds as
// ErrUnexpectedReply.

func replyError(what string, reply any) error {
	return fmt.Errorf("%w for %s: %v", ErrUnexpectedReply, what, reply)
}

func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case bool:
		if n {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func integers(reply any, n int) ([]int64, bool) {
	items, ok := reply.([]any)
	if !ok || len(items) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, item := range items {
		if out[i], ok = integer(item); !ok {
			return nil, false
		}
	}
	return out, true
}

func ms(n int64) time.Duration {
	if n < 0 {
		return Forever
	}
	return time.Duration(n) * time.Millisecond
}
