// The adaptive limit's calls (RATELIMIT.ADAPT and RATELIMIT.REPORT): built, checked and read, as
// src/core/args/adaptive.rs reads them.

package ratelimit

import (
	"context"
	"strconv"
	"time"
)

// Every scaled quantity of the module's adaptive limit stays within 2^50, every span within 2^40 ms.
const (
	maxScaled = 1 << 50
	maxSpanMS = 1 << 40
)

// Adaptive is an adaptive limit's terms (RATELIMIT.ADAPT): a limit per Window that the fleet
// learns between Floor and Ceiling, a new key starting at Start; Cost is what a call takes (0
// means 1).
type Adaptive struct {
	Floor, Start, Ceiling int64
	Window                time.Duration
	Cost                  int64
	// Turn: the caller is back at the RetryAfter a denial told it (TURN): it is then admitted on
	// a bucket not in debt, so that no one who was not waiting takes its turn.
	Turn bool
}

// Report is how the provider answered a call (RATELIMIT.REPORT).
type Report struct {
	// Throttled: a 429, a 503, or a timeout counted as one.
	Throttled bool
	// RetryAfter is the provider's Retry-After (only when Throttled; 0: none).
	RetryAfter time.Duration
	// Limit is the provider's stated limit per window (0: none).
	Limit int64
	// Bound is what the provider says remains, and when it resets (nil: nothing said).
	Bound *Bound
	// Age is how long ago the call was decided (AGE; 0: not said): a throttle on a call decided
	// after the epoch's cut cuts again (where no Bound is stated).
	Age time.Duration
}

// Bound is a provider's stated remaining and the time until it resets.
type Bound struct {
	Remaining  int64
	ResetAfter time.Duration
}

// Learned is what a report taught an adaptive limit.
type Learned struct {
	// Limit is the fleet's limit per window now.
	Limit int64
	// Decreased: this report cut it (the first throttle of its epoch).
	Decreased bool
	// Hold is how long until any caller is admitted again (a provider's Retry-After).
	Hold time.Duration
}

func readAdaptive(window time.Duration) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 5)
		if !ok {
			return Decision{}, replyError("an adaptive limit", reply)
		}
		d := Decision{Allowed: n[0] == 1, Count: max(n[1]-n[2], 0), Remaining: n[2], Limit: n[1],
			ResetAfter: ms(n[4]), Window: window}
		if !d.Allowed {
			d.RetryAfter = ms(n[3])
		}
		return d, nil
	}
}

// adaptCall is RATELIMIT.ADAPT: a call decided against the limit the fleet learns.
func adaptCall(key string, a Adaptive) (command[Decision], error) {
	for _, v := range []struct {
		n    int64
		name string
	}{{a.Floor, "floor"}, {a.Start, "start"}, {a.Ceiling, "ceiling"}, {cost(a.Cost), "COST"}} {
		if err := positive(v.n, v.name); err != nil {
			return command[Decision]{}, err
		}
	}
	window, inMS, err := length(a.Window, "window")
	if err != nil {
		return command[Decision]{}, err
	}
	windowMS := int64(a.Window / time.Millisecond)
	switch {
	case windowMS > maxSpanMS:
		return command[Decision]{}, invalid("window is too large")
	case a.Floor > a.Start || a.Start > a.Ceiling:
		return command[Decision]{}, invalid("floor <= start <= ceiling must hold")
	case a.Ceiling > maxScaled/windowMS:
		return command[Decision]{}, invalid("ceiling * window is too large")
	case cost(a.Cost) > maxScaled/windowMS:
		return command[Decision]{}, invalid("COST * window is too large")
	}
	args := []string{strconv.FormatInt(a.Floor, 10), strconv.FormatInt(a.Start, 10), strconv.FormatInt(a.Ceiling, 10), window}
	if inMS {
		args = append(args, "MS")
	}
	if c := cost(a.Cost); c != 1 {
		args = append(args, "COST", strconv.FormatInt(c, 10))
	}
	if a.Turn {
		args = append(args, "TURN")
	}
	return command[Decision]{Command: "RATELIMIT.ADAPT", Function: "ratelimit_adapt", Keys: []string{key}, Args: args,
		parse: readAdaptive(a.Window)}, nil
}

// spanMS is a provider's wait in whole ms, rounded up, within the module's bound.
func spanMS(d time.Duration, name string) (string, error) {
	if d < 0 {
		return "", invalid(name + " must be an integer >= 0")
	}
	n := int64((d + time.Millisecond - 1) / time.Millisecond)
	if n > maxSpanMS {
		return "", invalid(name + " is too large")
	}
	return strconv.FormatInt(n, 10), nil
}

// reportCall is RATELIMIT.REPORT: how the provider answered a call decided at key.
func reportCall(key string, r Report) (command[*Learned], error) {
	args := []string{"OK"}
	if r.Throttled {
		args[0] = "THROTTLED"
	}
	if r.RetryAfter != 0 {
		if !r.Throttled {
			return command[*Learned]{}, invalid("syntax error: RETRY needs THROTTLED")
		}
		retry, err := spanMS(r.RetryAfter, "RETRY")
		if err != nil {
			return command[*Learned]{}, err
		}
		args = append(args, "RETRY", retry)
	}
	if r.Limit != 0 {
		if err := positive(r.Limit, "LIMIT"); err != nil {
			return command[*Learned]{}, err
		}
		if r.Limit > maxScaled {
			return command[*Learned]{}, invalid("LIMIT is too large")
		}
		args = append(args, "LIMIT", strconv.FormatInt(r.Limit, 10))
	}
	if b := r.Bound; b != nil {
		if b.Remaining < 0 {
			return command[*Learned]{}, invalid("REMAINING must be an integer >= 0")
		}
		if b.Remaining > maxScaled {
			return command[*Learned]{}, invalid("REMAINING is too large")
		}
		reset, err := spanMS(b.ResetAfter, "RESET")
		if err != nil {
			return command[*Learned]{}, err
		}
		args = append(args, "REMAINING", strconv.FormatInt(b.Remaining, 10), "RESET", reset)
	}
	if r.Age != 0 {
		age, err := spanMS(r.Age, "AGE")
		if err != nil {
			return command[*Learned]{}, err
		}
		args = append(args, "AGE", age)
	}
	parse := func(reply any) (*Learned, error) {
		if reply == nil {
			return nil, nil
		}
		n, ok := integers(reply, 3)
		if !ok {
			return nil, replyError("a report", reply)
		}
		return &Learned{Limit: n[0], Decreased: n[1] == 1, Hold: ms(n[2])}, nil
	}
	return command[*Learned]{Command: "RATELIMIT.REPORT", Function: "ratelimit_report", Keys: []string{key}, Args: args,
		parse: parse}, nil
}

// Adapt decides a call against the adaptive limit at key (RATELIMIT.ADAPT): paced, at most a
// sixth of a window's limit at once; the decision's Limit is the learned one.
func (l *Limiter) Adapt(ctx context.Context, key string, a Adaptive) (Decision, error) {
	call, err := adaptCall(key, a)
	return send(ctx, l, call, err)
}

// AdaptUpTo grants as many of a.Cost as the adaptive limit's bucket has, at least one
// (RATELIMIT.ADAPT PARTIAL).
func (l *Limiter) AdaptUpTo(ctx context.Context, key string, a Adaptive) (Grant, error) {
	call, err := adaptUpToCall(key, a)
	return send(ctx, l, call, err)
}

// adaptUpToCall is RATELIMIT.ADAPT with PARTIAL.
func adaptUpToCall(key string, a Adaptive) (command[Grant], error) {
	call, err := adaptCall(key, a)
	return granting(call, call.parse, 5, err)
}

// ReserveAdapt takes a.Cost, an estimate (an LLM call's tokens before the answer), as Adapt
// does, and reserves it (RATELIMIT.ADAPT RESERVE): Settle it with what was used, and the unused
// part goes back to the fleet's bucket, never counted as use that earns growth.
func (l *Limiter) ReserveAdapt(ctx context.Context, key string, a Adaptive) (Reservation, error) {
	call, err := reserveAdaptCall(key, a)
	return send(ctx, l, call, err)
}

// reserveAdaptCall is RATELIMIT.ADAPT with RESERVE.
func reserveAdaptCall(key string, a Adaptive) (command[Reservation], error) {
	call, err := adaptCall(key, a)
	return reserving(call, cost(a.Cost), "COST", err)
}

// ReserveAdaptUpTo takes as many of a.Cost as the adaptive limit's bucket has whole, at least
// one, and reserves what was granted (Reservation.Amount; 0 and no Token when none was).
func (l *Limiter) ReserveAdaptUpTo(ctx context.Context, key string, a Adaptive) (Reservation, error) {
	call, err := reserveAdaptUpToCall(key, a)
	return send(ctx, l, call, err)
}

// reserveAdaptUpToCall is RATELIMIT.ADAPT with PARTIAL and RESERVE.
func reserveAdaptUpToCall(key string, a Adaptive) (command[Reservation], error) {
	call, err := adaptCall(key, a)
	return reservingUpTo(call, cost(a.Cost), call.parse, 5, err)
}

// Report tells the adaptive limit at key how its provider answered (RATELIMIT.REPORT); nil where
// no limit is learned at key (nothing to steer, nothing written).
func (l *Limiter) Report(ctx context.Context, key string, r Report) (*Learned, error) {
	call, err := reportCall(key, r)
	return send(ctx, l, call, err)
}
