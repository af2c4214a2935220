// RATELIMIT.SETTLE's calls: a reservation passed through as the server made it, the reply read
// by the shape that ends it.

package ratelimit

import (
	"strconv"
	"time"
)

// readSettled reads one key's SETTLE reply: the reserving command's numbers, what was applied,
// then what the reservation was of (its limiter, its limit, its window in ms: -1 for none), so
// that the reservation itself stays opaque.
func readSettled(reply any) (Settlement, error) {
	items, ok := reply.([]any)
	if !ok || len(items) < 5 {
		return Settlement{}, replyError("SETTLE", reply)
	}
	n := len(items)
	kind, _ := items[n-3].(string)
	limit, okLimit := integer(items[n-2])
	windowMS, okWindow := integer(items[n-1])
	applied, okApplied := integer(items[n-4])
	if !okLimit || !okWindow || !okApplied {
		return Settlement{}, replyError("SETTLE", reply)
	}
	window := time.Duration(0)
	if windowMS > 0 {
		window = ms(windowMS)
	}
	var read func(any) (Decision, error)
	switch kind {
	case "fixed":
		read = readFixed(limit, window, 1)
	case "sliding":
		read = readSliding(limit, window)
	case "adaptive":
		read = readAdaptive(window)
	default:
		read = readBucket(0)
	}
	d, err := read(items[:n-4])
	return Settlement{Decision: d, Applied: applied}, err
}

// settleCall is RATELIMIT.SETTLE: a reservation settled with what was used. The unused part goes
// back to the window it was counted in while that still counts; more than reserved is charged to
// the current one. At most once: settled again (a retry), it changes nothing and answers what the
// first applied.
func settleCall(r Reservation, used int64) (command[Settlement], error) {
	args, err := settleArgs(r.Token, used)
	if err != nil {
		return command[Settlement]{}, err
	}
	return command[Settlement]{Command: "RATELIMIT.SETTLE", Function: "ratelimit_settle", Keys: []string{r.Key},
		Args: args, parse: readSettled}, nil
}

// settleArgs are SETTLE's arguments after its keys, checked.
func settleArgs(token string, used int64) ([]string, error) {
	if used < 0 {
		return nil, invalid("used must be an integer >= 0")
	}
	if token == "" {
		return nil, invalid("a denied call has no reservation to settle")
	}
	return []string{token, strconv.FormatInt(used, 10)}, nil
}

// settleAllCall is RATELIMIT.SETTLE of a HITALL reservation: one Settlement per token key.
func settleAllCall(r MultiReservation, used int64) (command[[]Settlement], error) {
	args, err := settleArgs(r.Token, used)
	if err != nil {
		return command[[]Settlement]{}, err
	}
	parse := func(reply any) ([]Settlement, error) {
		// One key's reply is flat, several keys' one per key.
		if len(r.Keys) == 1 {
			s, err := readSettled(reply)
			return []Settlement{s}, err
		}
		items, ok := reply.([]any)
		if !ok || len(items) != len(r.Keys) {
			return nil, replyError("SETTLE", reply)
		}
		out := make([]Settlement, len(items))
		for i, item := range items {
			s, err := readSettled(item)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	return command[[]Settlement]{Command: "RATELIMIT.SETTLE", Function: "ratelimit_settle", Keys: r.Keys,
		Args: args, parse: parse}, nil
}
