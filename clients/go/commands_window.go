// The fixed and sliding windows' calls (RATELIMIT.HIT, PEEK, SLIDE, HITALL): built, checked and read,
// as src/core/args/window.rs reads them.

package ratelimit

import (
	"strconv"
	"time"
)

func readFixed(limit int64, window time.Duration, cost int64) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 4)
		if !ok {
			return Decision{}, replyError("a fixed window", reply)
		}
		d := Decision{Allowed: n[0] == 1, Count: n[1], Remaining: n[2], Limit: limit, ResetAfter: ms(n[3]), Window: window}
		if !d.Allowed {
			d.RetryAfter = d.ResetAfter
			if cost > limit {
				d.RetryAfter = Forever
			}
		}
		return d, nil
	}
}

func readSliding(limit int64, window time.Duration) func(any) (Decision, error) {
	return func(reply any) (Decision, error) {
		n, ok := integers(reply, 5)
		if !ok {
			return Decision{}, replyError("a sliding window", reply)
		}
		d := Decision{Allowed: n[0] == 1, Count: n[1], Remaining: n[2], Limit: limit, ResetAfter: ms(n[4]), Window: window}
		if !d.Allowed {
			d.RetryAfter = ms(n[3])
		}
		return d, nil
	}
}

// hitCall is RATELIMIT.HIT: a fixed window counted, its expiry set in the same step.
func hitCall(key string, f Fixed) (command[Decision], error) {
	if err := positive(f.Limit, "limit"); err != nil {
		return command[Decision]{}, err
	}
	window, inMS, err := fixedWindow(f.Window, f.Calendar)
	if err != nil {
		return command[Decision]{}, err
	}
	clock, err := laidOnClock(f.Calendar != "", f.Align, f.TZ)
	if err != nil {
		return command[Decision]{}, err
	}
	c := cost(f.Cost)
	args := append([]string{strconv.FormatInt(f.Limit, 10), window}, signedCost(c, "COST")...)
	if inMS {
		args = append(args, "MS")
	}
	args = append(args, clock...)
	return command[Decision]{Command: "RATELIMIT.HIT", Function: "ratelimit_hit", Keys: []string{key}, Args: args,
		parse: readFixed(f.Limit, f.Window, c)}, nil
}

// peekCall is RATELIMIT.PEEK: whether a HIT of cost would be admitted, writing nothing.
func peekCall(key string, limit, c int64) (command[Decision], error) {
	if err := positive(limit, "limit"); err != nil {
		return command[Decision]{}, err
	}
	c = cost(c)
	if err := positive(c, "COST"); err != nil {
		return command[Decision]{}, err
	}
	args := append([]string{strconv.FormatInt(limit, 10)}, signedCost(c, "COST")...)
	return command[Decision]{Command: "RATELIMIT.PEEK", Function: "ratelimit_peek", Keys: []string{key}, Args: args, ReadOnly: true,
		parse: readFixed(limit, 0, c)}, nil
}

func slideArgs(s Sliding) ([]string, error) {
	if err := positive(s.Limit, "limit"); err != nil {
		return nil, err
	}
	window, inMS, err := length(s.Window, "window")
	if err != nil {
		return nil, err
	}
	args := append([]string{strconv.FormatInt(s.Limit, 10), window}, signedCost(cost(s.Cost), "COST")...)
	if inMS {
		args = append(args, "MS")
	}
	return args, nil
}

// slideCall is RATELIMIT.SLIDE: a sliding window (the previous window weighted by its overlap).
func slideCall(key string, s Sliding) (command[Decision], error) {
	args, err := slideArgs(s)
	if err != nil {
		return command[Decision]{}, err
	}
	return command[Decision]{Command: "RATELIMIT.SLIDE", Function: "ratelimit_slide", Keys: []string{key}, Args: args,
		parse: readSliding(s.Limit, s.Window)}, nil
}

// slidePeekCall is RATELIMIT.SLIDE with PEEK: the decision without counting.
func slidePeekCall(key string, s Sliding) (command[Decision], error) {
	call, err := slideCall(key, s)
	call.Args, call.ReadOnly = append(call.Args, "PEEK"), true
	return call, err
}

// hitAllCall is RATELIMIT.HITALL: one call counted against several limits, all or nothing.
func hitAllCall(limits []Limit, o AllOptions) (command[MultiDecision], error) {
	fail := func(err error) (command[MultiDecision], error) { return command[MultiDecision]{}, err }
	if len(limits) == 0 {
		return fail(invalid("HITALL needs at least one limit"))
	}
	keys, pairs := make([]string, len(limits)), make([]string, 0, 2*len(limits))
	anyMS, calendar := false, false
	seen := make(map[string]bool, len(limits))
	for _, l := range limits {
		if seen[l.Key] {
			return fail(invalid("each key may be given only once"))
		}
		seen[l.Key] = true
		_, inMS, err := fixedWindow(l.Window, l.Calendar)
		if err != nil {
			return fail(err)
		}
		if err := positive(l.Limit, "limit"); err != nil {
			return fail(err)
		}
		anyMS, calendar = anyMS || inMS, calendar || l.Calendar != ""
	}
	if o.Sliding && calendar {
		return fail(invalid("SLIDE and a calendar window cannot be given together"))
	}
	for i, l := range limits {
		keys[i] = l.Key
		// One unit for all the lengths: ms if any needs them.
		window := string(l.Calendar)
		if window == "" {
			window = inWhole(l.Window, anyMS)
		}
		pairs = append(pairs, strconv.FormatInt(l.Limit, 10), window)
	}
	c := cost(o.Cost)
	if err := positive(c, "COST"); err != nil {
		return fail(err)
	}
	args := append(pairs, signedCost(c, "COST")...)
	if anyMS {
		args = append(args, "MS")
	}
	if o.Sliding {
		if o.Align {
			return fail(invalid("SLIDE and ALIGN cannot be given together"))
		}
		args = append(args, "SLIDE")
	}
	clock, err := laidOnClock(calendar, o.Align, o.TZ)
	if err != nil {
		return fail(err)
	}
	args = append(args, clock...)
	costs := make([]int64, len(limits))
	for i := range costs {
		costs[i] = c
	}
	if o.Tokens != 0 || o.TokenKeys != 0 {
		if err := positive(o.Tokens, "TOKENS"); err != nil {
			return fail(err)
		}
		if o.TokenKeys < 1 || o.TokenKeys > len(limits) {
			return fail(invalid("TOKENS' key count must be between 1 and numkeys"))
		}
		for i := len(limits) - o.TokenKeys; i < len(limits); i++ {
			costs[i] = o.Tokens
		}
		args = append(args, "TOKENS", strconv.FormatInt(o.Tokens, 10), strconv.Itoa(o.TokenKeys))
	}
	parse := func(reply any) (MultiDecision, error) {
		items, ok := reply.([]any)
		if !ok || len(items) != len(limits)+1 {
			return MultiDecision{}, replyError("HITALL", reply)
		}
		allowed, _ := integer(items[0])
		m := MultiDecision{Allowed: allowed == 1, Decisions: make([]Decision, len(limits))}
		for i, l := range limits {
			var d Decision
			var err error
			if o.Sliding {
				n, ok := integers(items[i+1], 4)
				if !ok {
					return MultiDecision{}, replyError("HITALL", reply)
				}
				fits := int64(0)
				if n[2] < 0 {
					fits = 1
				}
				d, err = readSliding(l.Limit, l.Window)([]any{fits, n[0], n[1], n[2], n[3]})
			} else {
				n, ok := integers(items[i+1], 3)
				if !ok {
					return MultiDecision{}, replyError("HITALL", reply)
				}
				fits := int64(0)
				if m.Allowed || n[0]+costs[i] <= l.Limit {
					fits = 1
				}
				d, err = readFixed(l.Limit, l.Window, costs[i])([]any{fits, n[0], n[1], n[2]})
			}
			if err != nil {
				return MultiDecision{}, err
			}
			m.Decisions[i] = d
		}
		return m, nil
	}
	return command[MultiDecision]{Command: "RATELIMIT.HITALL", Function: "ratelimit_hitall", Keys: keys, Args: args,
		Numkeys: true, parse: parse}, nil
}

// hitUpToCall is RATELIMIT.HIT with PARTIAL: as many of f.Cost as the window has left, at least
// one; none left, it is denied (until the window ends, whatever the cost).
func hitUpToCall(key string, f Fixed) (command[Grant], error) {
	if err := positive(cost(f.Cost), "COST"); err != nil {
		return command[Grant]{}, invalid("PARTIAL needs COST >= 1")
	}
	call, err := hitCall(key, f)
	return granting(call, readFixed(f.Limit, f.Window, 1), 4, err)
}

// slideUpToCall is RATELIMIT.SLIDE with PARTIAL: as many of s.Cost as the estimate has room for,
// at least one (a denial's retry is for one).
func slideUpToCall(key string, s Sliding) (command[Grant], error) {
	if err := positive(cost(s.Cost), "COST"); err != nil {
		return command[Grant]{}, invalid("PARTIAL needs COST >= 1")
	}
	call, err := slideCall(key, s)
	return granting(call, call.parse, 5, err)
}

// refundHitCall is RATELIMIT.HIT with a negative cost: n given back to the window running now.
func refundHitCall(key string, f Fixed, n int64) (command[Decision], error) {
	back, err := amount(n)
	if err != nil {
		return command[Decision]{}, err
	}
	f.Cost = back
	return hitCall(key, f)
}

// refundSlideCall is RATELIMIT.SLIDE with a negative cost.
func refundSlideCall(key string, s Sliding, n int64) (command[Decision], error) {
	back, err := amount(n)
	if err != nil {
		return command[Decision]{}, err
	}
	s.Cost = back
	return slideCall(key, s)
}

// reserveHitCall is RATELIMIT.HIT with RESERVE: f.Cost (the estimate) counted now, and a
// reservation to settle with what was used.
func reserveHitCall(key string, f Fixed) (command[Reservation], error) {
	call, err := hitCall(key, f)
	return reserving(call, cost(f.Cost), "COST", err)
}

// reserveHitUpToCall is RATELIMIT.HIT with PARTIAL and RESERVE.
func reserveHitUpToCall(key string, f Fixed) (command[Reservation], error) {
	call, err := hitCall(key, f)
	// Denied only with none left: then again when the window ends, whatever the cost.
	return reservingUpTo(call, cost(f.Cost), readFixed(f.Limit, f.Window, 1), 4, err)
}

// reserveSlideUpToCall is RATELIMIT.SLIDE with PARTIAL and RESERVE (a denial's retry is for one).
func reserveSlideUpToCall(key string, s Sliding) (command[Reservation], error) {
	call, err := slideCall(key, s)
	return reservingUpTo(call, cost(s.Cost), call.parse, 5, err)
}

// reserveSlideCall is RATELIMIT.SLIDE with RESERVE.
func reserveSlideCall(key string, s Sliding) (command[Reservation], error) {
	call, err := slideCall(key, s)
	return reserving(call, cost(s.Cost), "COST", err)
}

// reserveAllCall is RATELIMIT.HITALL with TOKENS and RESERVE: the request's limits decided
// together, its estimated tokens (o.Tokens) counted on the last o.TokenKeys (default 1) limits and
// reserved there.
func reserveAllCall(limits []Limit, o AllOptions) (command[MultiReservation], error) {
	if o.TokenKeys == 0 {
		o.TokenKeys = 1
	}
	if o.Tokens < 1 {
		return command[MultiReservation]{}, invalid("RESERVE needs TOKENS >= 1")
	}
	call, err := hitAllCall(limits, o)
	if err != nil {
		return command[MultiReservation]{}, err
	}
	tokenKeys := call.Keys[len(call.Keys)-o.TokenKeys:]
	parse := func(reply any) (MultiReservation, error) {
		items, ok := reply.([]any)
		if !ok || len(items) == 0 {
			return MultiReservation{}, replyError("a reservation", reply)
		}
		m, err := call.parse(items[:len(items)-1])
		token, _ := items[len(items)-1].(string)
		return MultiReservation{MultiDecision: m, Keys: tokenKeys, Token: token, Amount: o.Tokens}, err
	}
	return command[MultiReservation]{Command: call.Command, Function: call.Function, Keys: call.Keys,
		Args: append(call.Args, "RESERVE"), Numkeys: true, parse: parse}, nil
}
