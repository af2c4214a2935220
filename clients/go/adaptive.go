// One limit a whole fleet learns from its provider's answers (RATELIMIT.ADAPT and
// RATELIMIT.REPORT): decide before calling the provider, report how it answered, or let Do do both
// around an HTTP call. The rules are the module's (docs/adaptive.md); this only reads the
// provider's answer (ReadAnswer) and sends it.

package ratelimit

import (
	"context"
	"errors"
	"net/http"
	"time"
)

// ErrRateLimited is what Do returns (as a *RateLimitedError) when the fleet's limit had no room
// within its wait.
var ErrRateLimited = errors.New("ratelimit: the adaptive limit had no room in time")

// RateLimitedError says how long the adaptive limit at Key would have had the caller wait.
type RateLimitedError struct {
	Key        string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return "ratelimit: " + e.Key + " has no room for " + e.RetryAfter.String()
}

// Is makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Is(target error) bool { return target == ErrRateLimited }

// AdaptiveLimit is a limit per window that every process using Key learns together.
type AdaptiveLimit struct {
	Limiter *Limiter
	Key     string
	// Terms are the bounds and window (its Cost is each call's, given to Decide and Do).
	Terms Adaptive
	// Tokens: the limit counts tokens (each call's cost), its reports read the tokens' figures;
	// else requests.
	Tokens bool
	// MaxHold is the longest a Retry-After holds the fleet (0: a minute, as the SDKs honour).
	MaxHold time.Duration
}

// Decide is whether a call of cost may go to the provider now.
func (a *AdaptiveLimit) Decide(ctx context.Context, cost int64) (Decision, error) {
	return a.decide(ctx, cost, false)
}

// decide asks with turn when a denial told this caller to come back.
func (a *AdaptiveLimit) decide(ctx context.Context, cost int64, turn bool) (Decision, error) {
	terms := a.Terms
	terms.Cost, terms.Turn = cost, turn
	return a.Limiter.Adapt(ctx, a.Key, terms)
}

// Reserve is whether a call estimated at estimate (tokens, say) may go now, and if so its
// reservation: Settle it with what the call used once the answer says.
func (a *AdaptiveLimit) Reserve(ctx context.Context, estimate int64) (Reservation, error) {
	terms := a.Terms
	terms.Cost = estimate
	return a.Limiter.ReserveAdapt(ctx, a.Key, terms)
}

// Settle settles a reservation with what was used: the unused part back to the fleet (at most
// once).
func (a *AdaptiveLimit) Settle(ctx context.Context, r Reservation, used int64) (Settlement, error) {
	return a.Limiter.Settle(ctx, r, used)
}

// Answered reports how the provider answered (status 0: no answer); throttled overrides the
// status (a timeout counted as a throttle).
func (a *AdaptiveLimit) Answered(ctx context.Context, answer ProviderAnswer) (*Learned, error) {
	return a.AnsweredAfter(ctx, answer, 0)
}

// AnsweredAfter reports the answer to a call decided age ago: a throttle on a call decided after
// the epoch's cut cuts again (where the provider states no remaining).
func (a *AdaptiveLimit) AnsweredAfter(ctx context.Context, answer ProviderAnswer, age time.Duration) (*Learned, error) {
	s := answer.Requests
	if a.Tokens {
		s = answer.Tokens
	}
	r := Report{Throttled: answer.Throttled, Age: age}
	if r.Throttled && answer.RetryAfter > 0 {
		hold := a.MaxHold
		if hold <= 0 {
			hold = time.Minute
		}
		r.RetryAfter = min(answer.RetryAfter, hold)
	}
	if s.Limit > 0 {
		r.Limit = s.Limit
	}
	if s.Remaining >= 0 && s.ResetAfter >= 0 {
		r.Bound = &Bound{Remaining: s.Remaining, ResetAfter: s.ResetAfter}
	}
	return a.Limiter.Report(ctx, a.Key, r)
}

// Do sends the request once the fleet's limit has room (waiting while ctx allows, else a
// *RateLimitedError), and reports its answer: the response's status and headers, or, for an
// error (a timeout), a throttle when countTimeouts is set.
func (a *AdaptiveLimit) Do(ctx context.Context, cost int64, countTimeouts bool,
	send func(context.Context) (*http.Response, error)) (*http.Response, error) {
	for turn := false; ; turn = true {
		d, err := a.decide(ctx, cost, turn)
		if err != nil {
			return nil, err
		}
		if d.Allowed {
			break
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.RetryAfter {
			return nil, &RateLimitedError{Key: a.Key, RetryAfter: d.RetryAfter}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d.RetryAfter):
		}
	}
	decided := time.Now()
	res, err := send(ctx)
	answer := ProviderAnswer{Throttled: err != nil && countTimeouts, Requests: notStated, Tokens: notStated}
	if err == nil {
		answer = ReadAnswer(res.StatusCode, res.Header, time.Now())
	}
	if _, rerr := a.AnsweredAfter(context.WithoutCancel(ctx), answer, time.Since(decided)); rerr != nil && err == nil {
		return res, rerr
	}
	return res, err
}
